//! The store conformance suite: one set of behaviours every backend must
//! show. Each case takes a fresh database URL; [`crate::conformance_suite!`]
//! turns them into tests for one backend.

mod accounts;
mod audit;
mod batch_sizes;
mod durability;
mod leases;
mod limits;
mod patch_refs;
mod resources;
mod secrets;
mod selections;
mod status_writers;
mod tool_runs;
mod watch;

use std::sync::Arc;

use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::api::{Draft, EventType, Key, Store, WatchItem, WatchStream};
use crate::sql::{SqlStore, StoreOptions};

/// Generates one `#[tokio::test]` per conformance case. `$url` is an
/// expression giving `(url, guard)`: a fresh, empty database and whatever
/// keeps it alive.
#[macro_export]
macro_rules! conformance_suite {
    ($url:expr) => {
        $crate::conformance_suite!(@cases $url;
            create_get_and_list, all_is_every_object_of_a_kind, duplicates_conflict, children_need_their_tenant,
            compare_and_set, generation_follows_spec, concurrent_updates_have_one_winner,
            batched_writes_fail_alone,
            node_group_resources_are_tenant_spec, tenant_update_replaces_groups,
            tenant_deletion_and_finalizers, machine_deletion, watch_burst_then_live,
            watch_resumes_from_log, long_replays_come_in_pages, watch_refuses_compacted_and_future, slow_watchers_are_cut_off,
            one_object_watches_resume_past_compaction, one_object_watches_burst_and_follow_that_object,
            reopen_sees_everything, projections, tool_runs_are_the_last_of_each_command,
            selections_count_and_page_the_matches,
            users_and_the_last_admin, tokens_lifecycle, settings_keep_the_first_value,
            grants_lifecycle, concurrent_grant_updates_have_one_winner,
            secrets_are_written_with_the_tenant, secrets_go_with_their_finalizer,
            sealed_blobs_page_and_swap_only_when_unchanged,
            leases_are_exclusive, leases_expire_and_are_taken_over, fenced_writes_need_the_lease,
            audit_records_read_back_newest_first, audit_pages_and_filters, audit_retention_keeps_the_newest,
            audit_records_never_fail_concurrent_writes, token_touches_never_fail_concurrent_writes,
            a_tenant_put_is_one_event_with_the_condition, the_condition_follows_the_patches,
            status_writes_keep_the_condition, tenants_without_refs_never_get_the_condition,
            concurrent_status_writers_keep_each_others_fields, the_database_commits_durably,
            concurrent_group_creates_share_the_machine_cap, the_machine_cap_refuses_growth_but_not_shrinking);
    };
    (@cases $url:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $case() {
                let (url, _guard) = $url;
                $crate::conformance::$case(&url).await;
            }
        )*
    };
}

pub use accounts::*;
pub use audit::*;
pub use durability::*;
pub use leases::*;
pub use limits::*;
pub use patch_refs::*;
pub use resources::*;
pub use secrets::*;
pub use selections::*;
pub use status_writers::*;
pub use tool_runs::*;
pub use watch::*;

/// A fresh SQLite database in a directory of its own, for
/// [`crate::conformance_suite!`].
pub fn sqlite() -> (String, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("cms.db").display());
    (url, dir)
}

/// A fresh database on this test process's PostgreSQL server (see
/// [`crate::pgtest::PgServer::shared`]), for [`crate::conformance_suite!`].
#[cfg(feature = "testsuite")]
pub fn postgres() -> (String, ()) {
    (crate::pgtest::PgServer::shared().database(), ())
}

pub(crate) async fn open(url: &str) -> Arc<SqlStore> {
    open_with(url, StoreOptions::new(url)).await
}

pub(crate) async fn open_with(url: &str, options: StoreOptions) -> Arc<SqlStore> {
    SqlStore::open(&options).await.unwrap_or_else(|err| panic!("opening {url}: {err:?}"))
}

pub(crate) fn group(name: &str, count: u32) -> Value {
    json!({"name": name, "role": "worker", "count": count, "providerClass": "metal:bare",
           "providerConfig": {"hosts": [{"address": "10.0.0.1"}]}, "configPatches": []})
}

pub(crate) fn tenant_draft(version: &str, groups: Option<Vec<Value>>) -> Draft {
    let mut spec = json!({"kubernetesVersion": version, "podNetwork": ["10.244.0.0/16"]});
    if let Some(groups) = groups {
        spec["nodeGroups"] = Value::Array(groups);
    }
    Draft { spec, ..Draft::default() }
}

pub(crate) fn body(store: &dyn Store, key: &Key) -> Value {
    let object = store.get(key).unwrap_or_else(|| panic!("{key} is missing"));
    serde_json::from_slice(&object.json).expect("stored JSON")
}

pub(crate) fn group_names(tenant: &Value) -> Vec<String> {
    tenant["spec"]["nodeGroups"]
        .as_array()
        .expect("nodeGroups")
        .iter()
        .map(|g| g["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

pub(crate) async fn next_event(stream: &mut WatchStream) -> WatchItem {
    tokio::time::timeout(std::time::Duration::from_secs(5), stream.next())
        .await
        .expect("watch event in time")
        .expect("stream open")
        .expect("no watch error")
}

pub(crate) fn event_of(item: WatchItem) -> (EventType, String, u64) {
    match item {
        WatchItem::Event(e) => (e.event_type, e.object.key.name.clone(), e.revision),
        WatchItem::Synced(r) => panic!("unexpected sync at {r}"),
    }
}

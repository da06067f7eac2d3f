//! Conformance cases for resources: create, read, compare-and-set, node
//! groups as tenant spec, deletion and restarts.

use cms_model::{Kind, Page};
use serde_json::json;

use super::batch_sizes::BatchSizes;
use super::{body, event_of, group, group_names, next_event, open, tenant_draft};
use crate::api::{Deleted, Draft, EventType, Key, Store};
use crate::error::StoreError;
use crate::{FINALIZER_MACHINES, FINALIZER_SECRETS};

pub async fn create_get_and_list(url: &str) {
    let store = open(url).await;
    let t = Key::tenant("alpha");
    let created =
        store.create(t.clone(), tenant_draft("1.31.0", Some(vec![group("b", 1), group("a", 2)]))).await;
    let created = created.expect("create");
    assert_eq!((created.resource_version, created.generation), (1, 1));
    let tenant = body(store.as_ref(), &t);
    assert_eq!(tenant["metadata"]["name"], "alpha");
    assert_eq!(tenant["metadata"]["resourceVersion"], 1);
    assert_eq!(tenant["status"]["phase"], "pending");
    assert_eq!(group_names(&tenant), ["a", "b"]);
    let listing = store.list(Kind::NodeGroup, Some("alpha".into()), Page::default());
    assert_eq!(listing.total, 2);
    assert_eq!(body(store.as_ref(), &Key::child(Kind::NodeGroup, "alpha", "a"))["spec"]["count"], 2);
    store.create(Key::tenant("beta"), tenant_draft("1.31.0", None)).await.expect("create beta");
    let page = store.list(Kind::Tenant, None, Page { limit: 1, offset: 1 });
    assert_eq!(page.total, 2);
    assert_eq!(page.items[0].key.name, "beta");
    assert!(store.get(&Key::tenant("gamma")).is_none());
}

/// `all` is every object of a kind, in a tenant or in all, sorted like
/// `list` and never cut to a page.
pub async fn all_is_every_object_of_a_kind(url: &str) {
    let store = open(url).await;
    let many: Vec<_> = (0..=Page::DEFAULT_LIMIT).map(|i| group(&format!("g{i:03}"), 1)).collect();
    store.create(Key::tenant("b"), tenant_draft("1.31.0", Some(many))).await.expect("b");
    store
        .create(Key::tenant("a"), tenant_draft("1.31.0", Some(vec![group("z", 1), group("y", 1)])))
        .await
        .expect("a");
    let keys = |objects: Vec<std::sync::Arc<crate::api::Object>>| -> Vec<Key> {
        objects.iter().map(|object| object.key.clone()).collect()
    };
    let groups = keys(store.all(Kind::NodeGroup, None));
    assert_eq!(groups.len(), Page::DEFAULT_LIMIT + 3, "not paged");
    assert_eq!(
        &groups[..3],
        [("a", "y"), ("a", "z"), ("b", "g000")].map(|(t, n)| Key::child(Kind::NodeGroup, t, n))
    );
    let listed = store.list(Kind::NodeGroup, None, Page { limit: Page::MAX_LIMIT, offset: 0 });
    assert_eq!(groups, keys(listed.items), "sorted like list");
    assert_eq!(keys(store.all(Kind::NodeGroup, Some("a".into()))).len(), 2);
    assert_eq!(keys(store.all(Kind::Tenant, None)), [Key::tenant("a"), Key::tenant("b")]);
    assert!(store.all(Kind::ConfigPatch, None).is_empty());
    assert!(store.all(Kind::NodeGroup, Some("none".into())).is_empty());
}

pub async fn duplicates_conflict(url: &str) {
    let store = open(url).await;
    store.create(Key::tenant("a"), tenant_draft("1.31.0", None)).await.expect("create");
    let again = store.create(Key::tenant("a"), tenant_draft("1.31.0", None)).await;
    assert!(matches!(again, Err(StoreError::AlreadyExists(_))), "{again:?}");
}

pub async fn children_need_their_tenant(url: &str) {
    let store = open(url).await;
    let draft = Draft { spec: json!({"format": "strategic", "patches": [{}]}), ..Draft::default() };
    let orphan = store.create(Key::child(Kind::ConfigPatch, "none", "p"), draft).await;
    assert!(matches!(orphan, Err(StoreError::NotFound(_))), "{orphan:?}");
}

pub async fn compare_and_set(url: &str) {
    let store = open(url).await;
    let t = Key::tenant("a");
    store.create(t.clone(), tenant_draft("1.31.0", None)).await.expect("create");
    let updated = store.update(t.clone(), tenant_draft("1.31.1", None), 1).await.expect("update");
    assert_eq!(updated.resource_version, 2);
    let stale = store.update(t.clone(), tenant_draft("1.31.2", None), 1).await;
    assert!(matches!(stale, Err(StoreError::Conflict { current: 2, .. })), "{stale:?}");
    let missing = store.update(Key::tenant("b"), tenant_draft("1.31.2", None), 1).await;
    assert!(matches!(missing, Err(StoreError::NotFound(_))), "{missing:?}");
    assert_eq!(body(store.as_ref(), &t)["spec"]["kubernetesVersion"], "1.31.1");
}

pub async fn generation_follows_spec(url: &str) {
    let store = open(url).await;
    let t = Key::tenant("a");
    store.create(t.clone(), tenant_draft("1.31.0", None)).await.expect("create");
    let mut labelled = tenant_draft("1.31.0", None);
    labelled.labels.insert("team".into(), "blue".into());
    let same = store.update(t.clone(), labelled.clone(), 1).await.expect("labels");
    assert_eq!((same.resource_version, same.generation), (2, 1));
    let status = store.update_status(t.clone(), json!({"phase": "active", "ready": true}), Some(2)).await;
    assert_eq!((status.as_ref().map(|o| (o.resource_version, o.generation))).expect("status"), (3, 1));
    labelled.spec["kubernetesVersion"] = json!("1.32.0");
    let changed = store.update(t.clone(), labelled, 3).await.expect("spec");
    assert_eq!((changed.resource_version, changed.generation), (4, 2));
    let tenant = body(store.as_ref(), &t);
    assert_eq!(tenant["metadata"]["labels"]["team"], "blue");
    assert_eq!(tenant["status"]["phase"], "active");
}

pub async fn concurrent_updates_have_one_winner(url: &str) {
    let store = open(url).await;
    let t = Key::tenant("a");
    store.create(t.clone(), tenant_draft("1.31.0", None)).await.expect("create");
    let attempts = (0..32).map(|i| {
        let store = store.clone();
        let t = t.clone();
        tokio::spawn(async move { store.update(t, tenant_draft(&format!("1.31.{}", i + 1), None), 1).await })
    });
    let mut wins = 0;
    for attempt in attempts {
        match attempt.await.expect("task") {
            Ok(_) => wins += 1,
            Err(StoreError::Conflict { .. }) => {}
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(wins, 1);
    assert_eq!(store.get(&t).expect("tenant").resource_version, 2);
}

pub async fn node_group_resources_are_tenant_spec(url: &str) {
    let store = open(url).await;
    let t = Key::tenant("a");
    store.create(t.clone(), tenant_draft("1.31.0", Some(vec![group("a", 1)]))).await.expect("create");
    let g = Key::child(Kind::NodeGroup, "a", "b");
    store.create(g.clone(), Draft { spec: group("b", 1), ..Draft::default() }).await.expect("group");
    let tenant = body(store.as_ref(), &t);
    assert_eq!(group_names(&tenant), ["a", "b"]);
    assert_eq!(
        (tenant["metadata"]["resourceVersion"].as_u64(), tenant["metadata"]["generation"].as_u64()),
        (Some(2), Some(2))
    );
    store.update(g.clone(), Draft { spec: group("b", 3), ..Draft::default() }, 1).await.expect("scale");
    assert_eq!(body(store.as_ref(), &t)["spec"]["nodeGroups"][1]["count"], 3);
    store.update_status(g.clone(), json!({"replicas": 3, "readyReplicas": 1}), None).await.expect("status");
    assert_eq!(store.get(&t).expect("tenant").resource_version, 3, "status of a group leaves the tenant");
    assert_eq!(store.delete(g.clone()).await.expect("delete"), Deleted::Removed);
    assert_eq!(group_names(&body(store.as_ref(), &t)), ["a"]);
    assert_eq!(store.get(&t).expect("tenant").generation, 4);
}

pub async fn tenant_update_replaces_groups(url: &str) {
    let store = open(url).await;
    let t = Key::tenant("a");
    store
        .create(t.clone(), tenant_draft("1.31.0", Some(vec![group("a", 1), group("b", 1)])))
        .await
        .expect("create");
    let kept = store.update(t.clone(), tenant_draft("1.31.0", None), 1).await.expect("no groups");
    assert_eq!(kept.generation, 1);
    assert_eq!(group_names(&body(store.as_ref(), &t)), ["a", "b"]);
    let replaced =
        store.update(t.clone(), tenant_draft("1.31.0", Some(vec![group("b", 2), group("c", 1)])), 2);
    assert_eq!(replaced.await.expect("replace").generation, 2);
    assert_eq!(group_names(&body(store.as_ref(), &t)), ["b", "c"]);
    assert!(store.get(&Key::child(Kind::NodeGroup, "a", "a")).is_none());
    assert_eq!(store.get(&Key::child(Kind::NodeGroup, "a", "b")).expect("b").generation, 2);
    let emptied = store.update(t.clone(), tenant_draft("1.31.0", Some(vec![])), 3).await.expect("empty");
    assert_eq!(emptied.generation, 3);
    assert_eq!(store.list(Kind::NodeGroup, Some("a".into()), Page::default()).total, 0);
}

pub async fn tenant_deletion_and_finalizers(url: &str) {
    let store = open(url).await;
    let t = Key::tenant("a");
    store.create(t.clone(), tenant_draft("1.31.0", Some(vec![group("a", 1)]))).await.expect("create");
    let patch = Draft { spec: json!({"format": "strategic", "patches": [{}]}), ..Draft::default() };
    store.create(Key::child(Kind::ConfigPatch, "a", "p"), patch.clone()).await.expect("patch");
    let Deleted::Marked(marked) = store.delete(t.clone()).await.expect("delete") else { panic!("removed") };
    assert!(marked.deleting);
    let tenant = body(store.as_ref(), &t);
    assert_eq!(tenant["metadata"]["finalizers"], json!([FINALIZER_MACHINES, FINALIZER_SECRETS]));
    assert!(tenant["metadata"]["deletionTimestamp"].is_string());
    let again = store.delete(t.clone()).await.expect("delete again");
    assert_eq!(again, Deleted::Marked(marked.clone()), "a second delete changes nothing");
    let refused = store.update(t.clone(), tenant_draft("1.31.1", None), marked.resource_version).await;
    assert!(matches!(refused, Err(StoreError::Refused(_))), "{refused:?}");
    let mut annotated = tenant_draft("1.31.0", None);
    annotated.annotations.insert("service.io/note".into(), "leaving".into());
    let annotated =
        store.update(t.clone(), annotated, marked.resource_version).await.expect("annotations change");
    assert!(annotated.deleting, "still being deleted");
    assert_eq!(body(store.as_ref(), &t)["metadata"]["annotations"]["service.io/note"], "leaving");
    let child = store.create(Key::child(Kind::ConfigPatch, "a", "q"), patch).await;
    assert!(matches!(child, Err(StoreError::Refused(_))), "{child:?}");
    let mut watch = store.watch(Kind::NodeGroup, Some(store.revision())).await.expect("watch");
    let left = store.remove_finalizer(t.clone(), FINALIZER_MACHINES.into()).await.expect("first");
    assert!(left.is_some());
    assert!(store.remove_finalizer(t.clone(), FINALIZER_SECRETS.into()).await.expect("second").is_none());
    assert!(store.get(&t).is_none());
    assert_eq!(store.list(Kind::NodeGroup, Some("a".into()), Page::default()).total, 0);
    assert!(store.get(&Key::child(Kind::ConfigPatch, "a", "p")).is_none());
    assert_eq!(event_of(next_event(&mut watch).await).0, EventType::Deleted);
    store.create(t.clone(), tenant_draft("1.31.0", None)).await.expect("the name is free again");
}

pub async fn machine_deletion(url: &str) {
    let store = open(url).await;
    store.create(Key::tenant("a"), tenant_draft("1.31.0", None)).await.expect("tenant");
    let m = Key::child(Kind::Machine, "a", "m-1");
    let created =
        store.create(m.clone(), Draft { spec: json!({"providerType": "metal"}), ..Draft::default() });
    created.await.expect("machine");
    assert_eq!(body(store.as_ref(), &m)["status"]["stage"], "initializing");
    assert!(matches!(store.delete(m.clone()).await.expect("delete"), Deleted::Marked(_)));
    assert!(store.remove_finalizer(m.clone(), FINALIZER_MACHINES.into()).await.expect("clear").is_none());
    assert!(store.get(&m).is_none());
}

pub async fn reopen_sees_everything(url: &str) {
    let store = open(url).await;
    store.create(Key::tenant("a"), tenant_draft("1.31.0", Some(vec![group("g", 1)]))).await.expect("a");
    store.update(Key::tenant("a"), tenant_draft("1.31.1", None), 1).await.expect("update");
    store.delete(Key::tenant("a")).await.expect("delete");
    let again = open(url).await;
    assert_eq!(again.revision(), store.revision());
    for kind in Kind::ALL {
        let before = store.list(kind, None, Page { limit: 1000, offset: 0 });
        let after = again.list(kind, None, Page { limit: 1000, offset: 0 });
        assert_eq!(before, after, "{kind} survives a restart");
    }
}

pub async fn projections(url: &str) {
    let store = open(url).await;
    assert_eq!(store.projection(None).await.expect("read"), None);
    let item = cms_model::Projected {
        tenant: "a".into(),
        kind: "Machine".into(),
        tf_type: "terraform_data".into(),
        name: "cp-0".into(),
        spec: json!({"address": "10.0.0.1"}),
    };
    let missing = store.set_projection("a".into(), vec![item.clone()]).await;
    assert!(matches!(missing, Err(StoreError::NotFound(_))), "{missing:?}");
    store.create(Key::tenant("a"), tenant_draft("1.31.0", None)).await.expect("a");
    assert_eq!(store.projection(Some("a".into())).await.expect("read"), None);
    store.set_projection("a".into(), vec![item.clone()]).await.expect("write");
    assert_eq!(store.projection(Some("a".into())).await.expect("read"), Some(vec![item.clone()]));
    assert_eq!(store.projection(None).await.expect("read"), Some(vec![item]));
}

/// Writes queued together share a transaction (a batch of more than one is
/// committed, as [`crate::BATCH_SIZE`] records), yet each fails or succeeds
/// on its own, and what commits matches what a fresh load reads back.
pub async fn batched_writes_fail_alone(url: &str) {
    let sizes = BatchSizes::default();
    let _recording = metrics::set_default_local_recorder(&sizes);
    let store = open(url).await;
    let base = Key::tenant("base");
    store.create(base.clone(), tenant_draft("1.31.0", Some(vec![group("g", 1)]))).await.expect("create");
    let mut tasks = Vec::new();
    for i in 0..24 {
        let (store, key) = (store.clone(), Key::tenant(format!("t{}", i % 12)));
        let draft = tenant_draft("1.31.0", Some(vec![group("g", 1), group("h", 2)]));
        tasks.push(tokio::spawn(async move { ("create", store.create(key, draft).await.map(|_| ())) }));
    }
    for i in 0..8 {
        let (store, key) = (store.clone(), base.clone());
        let draft = tenant_draft(&format!("1.31.{}", i + 1), Some(vec![group("g", i + 2)]));
        tasks.push(tokio::spawn(async move { ("update", store.update(key, draft, 1).await.map(|_| ())) }));
    }
    for i in 0..4 {
        let (store, key) = (store.clone(), Key::child(Kind::NodeGroup, "missing", format!("g{i}")));
        let draft = Draft { spec: group(&format!("g{i}"), 1), ..Draft::default() };
        tasks.push(tokio::spawn(async move { ("orphan", store.create(key, draft).await.map(|_| ())) }));
    }
    let mut outcomes = std::collections::BTreeMap::<String, usize>::new();
    for task in tasks {
        let (what, result) = task.await.expect("task");
        let outcome = match result {
            Ok(()) => "ok",
            Err(StoreError::AlreadyExists(_)) => "exists",
            Err(StoreError::Conflict { .. }) => "conflict",
            Err(StoreError::NotFound(_)) => "not found",
            Err(other) => panic!("unexpected {other:?}"),
        };
        *outcomes.entry(format!("{what} {outcome}")).or_default() += 1;
    }
    let expected = [
        ("create exists", 12),
        ("create ok", 12),
        ("orphan not found", 4),
        ("update conflict", 7),
        ("update ok", 1),
    ];
    assert_eq!(outcomes, expected.map(|(k, v)| (k.to_string(), v)).into_iter().collect());
    let committed = sizes.seen();
    assert!(
        committed.iter().any(|&size| size > 1.0),
        "writes waiting together commit in one batch: {committed:?}"
    );
    assert_eq!(store.get(&base).expect("base").resource_version, 2);
    // 2 events for the base and its group, 12 × 3 for the new tenants, 2 for
    // the update.
    assert_eq!(store.revision(), 2 + 36 + 2);
    let fresh = open(url).await;
    assert_eq!(fresh.revision(), store.revision());
    for kind in [Kind::Tenant, Kind::NodeGroup] {
        let ours = store.list(kind, None, Page { limit: 1000, offset: 0 });
        let theirs = fresh.list(kind, None, Page { limit: 1000, offset: 0 });
        let render = |listing: &crate::api::Listing| -> Vec<Vec<u8>> {
            listing.items.iter().map(|object| object.json.to_vec()).collect()
        };
        assert_eq!(render(&ours), render(&theirs), "{kind:?}s as cached and as stored");
    }
}

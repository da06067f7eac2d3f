//! A configured host is never sent its config the insecure way: when the
//! tenant's way finds a node the tenant's OS CA did not sign, nothing is
//! applied, the config stays due, and the machine's `status.message` says
//! why until a pass finds the node again. A new address is a new host,
//! unless a configured host of the tenant is there: one whose `Reset` timed
//! out, or one another machine held (hosts reordered).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use cms_model::{Kind, Machine};
use cms_store::{Draft, Key, Store};
use cms_tenancy::{Bootstrapped, MockNodeClient, NodeError};
use serde_json::json;

use super::{create, fixture_with, machines, renderer, spec};
use crate::reconcile;

#[tokio::test]
async fn a_configured_host_that_fails_the_tenants_ca_gets_nothing_and_its_status_says_why() {
    let impostor = Arc::new(AtomicBool::new(false));
    let applied = Arc::new(Mutex::new(Vec::new()));
    let mut nodes = MockNodeClient::new();
    let (record, on) = (applied.clone(), impostor.clone());
    nodes.expect_apply_config().returning(move |node, _, configured| {
        if on.load(Ordering::SeqCst) {
            assert!(configured, "a configured host is asked the tenant's way only");
            return Err(NodeError::Untrusted { endpoint: node.management_address.clone() });
        }
        record.lock().unwrap().push((node.machine.clone(), configured));
        Ok(())
    });
    nodes.expect_version().returning(|_| Ok("1.14.0".into()));
    nodes.expect_bootstrap().times(1).returning(|_| Ok(Bootstrapped::Now));
    let extra = Arc::new(Mutex::new(String::new()));
    let f = fixture_with(Arc::new(nodes), renderer(extra.clone())).await;
    create(f.store.as_ref(), "acme", 1).await;
    reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(applied.lock().unwrap().len(), 2, "both hosts took their first config");
    assert!(machines(f.store.as_ref(), "acme").iter().all(|m| m.status.message.is_none()));

    impostor.store(true, Ordering::SeqCst);
    *extra.lock().unwrap() = "cluster:\n  allowSchedulingOnControlPlanes: true\n".into();
    reconcile("acme", &f.ctx).await.unwrap();
    let machines_now = machines(f.store.as_ref(), "acme");
    for machine in &machines_now {
        let message = machine.status.message.as_deref().unwrap_or_default();
        assert!(message.contains("does not answer as this tenant's node"), "{message}");
        assert!(message.contains("a replaced host or an impostor"), "{message}");
        assert_eq!(machine.status.stage, crate::STAGE_UNRECOGNIZED);
        assert!(!machine.spec.connected);
        assert!(machine.metadata.annotations.contains_key(crate::CONFIG_HASH_ANNOTATION), "still configured");
    }
    let before: Vec<_> = machines_now.iter().map(|m| m.metadata.annotations.clone()).collect();
    let status = super::tenant(f.store.as_ref(), "acme").status;
    assert_eq!(status.phase, cms_model::Phase::Active, "it was ready once");
    let address = machines_now[0].spec.management_address.clone().unwrap_or_default();
    assert_eq!(
        status.message.as_deref(),
        Some(
            format!(
                "2 of 2 machines awaiting a confirmed replacement: cp-0: the host at {address} does not \
                 answer as this tenant's node (and 1 more); if a host was replaced, delete its machine to \
                 confirm it"
            )
            .as_str()
        ),
        "the first blocker"
    );

    // The host is back: the changed config goes the tenant's way, the message clears.
    impostor.store(false, Ordering::SeqCst);
    reconcile("acme", &f.ctx).await.unwrap();
    let applied = applied.lock().unwrap();
    assert_eq!(applied.len(), 4);
    assert!(applied[2..].iter().all(|(_, configured)| *configured));
    let after = machines(f.store.as_ref(), "acme");
    assert!(after.iter().all(|m| m.status.message.is_none()), "{after:?}");
    assert!(after.iter().zip(&before).all(|(m, old)| m.metadata.annotations != *old), "new hashes");
}

#[tokio::test]
async fn a_machine_given_a_new_address_is_a_new_host_asked_in_maintenance_mode() {
    let applied = Arc::new(Mutex::new(Vec::new()));
    let mut nodes = MockNodeClient::new();
    let record = applied.clone();
    nodes.expect_apply_config().returning(move |node, _, configured| {
        record.lock().unwrap().push((node.management_address.clone(), configured));
        Ok(())
    });
    nodes.expect_version().returning(|_| Ok("1.14.0".into()));
    nodes.expect_bootstrap().times(1).returning(|_| Ok(Bootstrapped::Now));
    let f = fixture_with(Arc::new(nodes), renderer(Arc::default())).await;
    create(f.store.as_ref(), "acme", 1).await;
    reconcile("acme", &f.ctx).await.unwrap();

    let current = f.store.get(&Key::tenant("acme")).unwrap();
    let annotations = current.parse::<cms_model::Tenant>().unwrap().metadata.annotations;
    let mut spec = spec(1);
    spec["nodeGroups"][1]["providerConfig"]["hosts"] = json!([{"address": "10.0.9.1"}]);
    f.store
        .update(
            Key::tenant("acme"),
            Draft { spec, annotations, ..Draft::default() },
            current.resource_version,
        )
        .await
        .unwrap();
    reconcile("acme", &f.ctx).await.unwrap();
    let applied = applied.lock().unwrap();
    assert_eq!(applied.last(), Some(&("10.0.9.1:50000".to_string(), false)), "{applied:?}");
    let worker =
        machines(f.store.as_ref(), "acme").into_iter().find(|m| m.metadata.name == "workers-0").unwrap();
    assert!(worker.metadata.annotations.contains_key(crate::CONFIG_HASH_ANNOTATION), "configured anew");
}

/// Every `ApplyConfiguration`: the address asked, and whether it was asked
/// as a configured host (never in maintenance mode).
type Applied = Arc<Mutex<Vec<(String, bool)>>>;

/// Nodes that take configs and answer, but never acknowledge a `Reset`.
fn never_resetting(applied: Applied) -> Arc<MockNodeClient> {
    let mut nodes = MockNodeClient::new();
    nodes.expect_apply_config().returning(move |node, _, configured| {
        applied.lock().unwrap().push((node.management_address.clone(), configured));
        Ok(())
    });
    nodes.expect_version().returning(|_| Ok("1.14.0".into()));
    nodes.expect_bootstrap().returning(|_| Ok(Bootstrapped::Now));
    nodes.expect_reset().returning(|_, _| Err(super::refused("connection refused")));
    Arc::new(nodes)
}

/// Changes the tenant's spec, keeping the service's annotations.
async fn respec(store: &dyn Store, spec: serde_json::Value) {
    let current = store.get(&Key::tenant("acme")).unwrap();
    let annotations = current.parse::<cms_model::Tenant>().unwrap().metadata.annotations;
    let draft = Draft { spec, annotations, ..Draft::default() };
    store.update(Key::tenant("acme"), draft, current.resource_version).await.unwrap();
}

/// Moves a leaving machine's step back past [`crate::RESET_TIMEOUT`].
async fn backdate(store: &dyn Store, id: &str) {
    let key = Key::child(Kind::Machine, "acme", id);
    let object = store.get(&key).unwrap();
    let machine: Machine = object.parse().unwrap();
    let mut annotations = machine.metadata.annotations.clone();
    let leaving = annotations.get_mut(crate::LEAVING_ANNOTATION).unwrap();
    let step = leaving.split_once(' ').unwrap().0.to_string();
    let since = chrono::Utc::now() - crate::RESET_TIMEOUT - std::time::Duration::from_secs(60);
    *leaving = format!("{step} {}", since.to_rfc3339());
    let spec = serde_json::to_value(&machine.spec).unwrap();
    let draft = Draft { labels: machine.metadata.labels, annotations, spec, ..Draft::default() };
    store.update(key, draft, object.resource_version).await.unwrap();
}

fn machine(store: &dyn Store, id: &str) -> Option<Machine> {
    machines(store, "acme").into_iter().find(|m| m.metadata.name == id)
}

/// Two workers, then a scale-down whose `Reset` of workers-1 (10.0.1.2)
/// never answers, until it is let go after the timeout.
async fn a_reset_that_times_out() -> (super::Fixture, Applied) {
    let applied = Applied::default();
    let f = fixture_with(never_resetting(applied.clone()), renderer(Arc::default())).await;
    create(f.store.as_ref(), "acme", 2).await;
    reconcile("acme", &f.ctx).await.unwrap();
    assert!(applied.lock().unwrap().iter().all(|(_, configured)| !configured), "first configs");
    respec(f.store.as_ref(), spec(1)).await;
    reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(machine(f.store.as_ref(), "workers-1").unwrap().status.stage, "resetting");
    backdate(f.store.as_ref(), "workers-1").await;
    (f, applied)
}

#[tokio::test]
async fn a_reset_that_times_out_leaves_a_host_then_only_asked_with_the_tenants_credentials() {
    let (f, applied) = a_reset_that_times_out().await;
    // Let go: the next apply removes the machine, the tenant remembers the host.
    reconcile("acme", &f.ctx).await.unwrap();
    assert!(machine(f.store.as_ref(), "workers-1").is_none());
    let annotations = super::tenant(f.store.as_ref(), "acme").metadata.annotations;
    assert_eq!(
        annotations.get(crate::CONFIGURED_HOSTS_ANNOTATION).map(String::as_str),
        Some("10.0.1.2:50000")
    );

    // A scale-up gives the host to a new machine: configured, asked over mTLS only.
    let before = applied.lock().unwrap().len();
    respec(f.store.as_ref(), spec(2)).await;
    reconcile("acme", &f.ctx).await.unwrap();
    let after = applied.lock().unwrap()[before..].to_vec();
    assert_eq!(after, [("10.0.1.2:50000".to_string(), true)]);
    let worker = machine(f.store.as_ref(), "workers-1").unwrap();
    let hash = worker.metadata.annotations.get(crate::CONFIG_HASH_ANNOTATION).unwrap();
    assert_ne!(hash, crate::CONFIG_UNKNOWN, "its own config now");
    let annotations = super::tenant(f.store.as_ref(), "acme").metadata.annotations;
    assert!(!annotations.contains_key(crate::CONFIGURED_HOSTS_ANNOTATION), "held again");

    // An operator DELETEs the machine: it leaves first (its `Reset` is not
    // answered, so until the timeout), then starts anew.
    let before = applied.lock().unwrap().len();
    f.store.delete(Key::child(Kind::Machine, "acme", "workers-1")).await.unwrap();
    reconcile("acme", &f.ctx).await.unwrap();
    let leaving = machine(f.store.as_ref(), "workers-1").unwrap();
    assert_eq!(leaving.status.stage, "resetting");
    assert!(leaving.metadata.deletion_timestamp.is_some());
    assert_eq!(applied.lock().unwrap().len(), before, "nothing is sent before it left");
    backdate(f.store.as_ref(), "workers-1").await;
    reconcile("acme", &f.ctx).await.unwrap();
    let after = applied.lock().unwrap()[before..].to_vec();
    assert_eq!(after, [("10.0.1.2:50000".to_string(), false)]);
    let annotations = super::tenant(f.store.as_ref(), "acme").metadata.annotations;
    assert!(!annotations.contains_key(crate::CONFIGURED_HOSTS_ANNOTATION));
}

#[tokio::test]
async fn a_host_let_go_without_a_reset_rejoins_with_the_tenants_credentials() {
    let (f, applied) = a_reset_that_times_out().await;
    // Wanted again before the apply removed it: it leaves, then rejoins.
    respec(f.store.as_ref(), spec(2)).await;
    reconcile("acme", &f.ctx).await.unwrap();
    let left = machine(f.store.as_ref(), "workers-1").unwrap();
    assert_eq!(left.status.stage, "deleting", "{:?}", super::tenant(f.store.as_ref(), "acme").status.message);
    assert!(left.metadata.annotations.contains_key(crate::CONFIG_HASH_ANNOTATION), "never wiped");
    let before = applied.lock().unwrap().len();
    reconcile("acme", &f.ctx).await.unwrap();
    let after = applied.lock().unwrap()[before..].to_vec();
    assert_eq!(after, [("10.0.1.2:50000".to_string(), true)]);
}

#[tokio::test]
async fn swapped_hosts_are_never_asked_in_maintenance_mode() {
    let applied = Applied::default();
    let f = fixture_with(never_resetting(applied.clone()), renderer(Arc::default())).await;
    create(f.store.as_ref(), "acme", 2).await;
    reconcile("acme", &f.ctx).await.unwrap();
    let before = applied.lock().unwrap().len();

    let mut swapped = spec(2);
    swapped["nodeGroups"][1]["providerConfig"]["hosts"] =
        json!([{"address": "10.0.1.2"}, {"address": "10.0.1.1"}, {"address": "10.0.1.3"}]);
    respec(f.store.as_ref(), swapped).await;
    reconcile("acme", &f.ctx).await.unwrap();
    let mut after = applied.lock().unwrap()[before..].to_vec();
    after.sort();
    // Each host gets its new machine's config, over mTLS.
    assert_eq!(after, [("10.0.1.1:50000".to_string(), true), ("10.0.1.2:50000".to_string(), true)]);
    for id in ["workers-0", "workers-1"] {
        let worker = machine(f.store.as_ref(), id).unwrap();
        let hash = worker.metadata.annotations.get(crate::CONFIG_HASH_ANNOTATION);
        assert!(hash.is_some_and(|hash| hash != crate::CONFIG_UNKNOWN), "{id}: {hash:?}");
    }
}

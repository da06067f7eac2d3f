//! Replacements through the API: a machine an operator DELETEs walks the
//! leaving steps (drained, out of etcd, reset) before the apply replaces
//! it and its fresh record takes its config in maintenance mode; a host
//! that does not answer as the tenant's node gets nothing until its
//! machine is deleted, and is then replaced without a `Reset`.

use std::sync::{Arc, Mutex};

use cms_model::Kind;
use cms_store::Key;

use super::hosts::{Hosts, converged, machine, spec};
use super::{Fixture, condition, fixture_with, renderer, tenant};
use crate::settle::fingerprint;
use crate::{CONFIG_HASH_ANNOTATION, ETCD_HEALTHY, LEAVING_ANNOTATION, STAGE_UNRECOGNIZED, reconcile};

/// The `apply` runs of the tool since the `from`th invocation, each with
/// the addresses it replaced.
fn replaced(f: &Fixture, from: usize) -> Vec<Vec<String>> {
    let args = f.engine.args.lock().unwrap();
    let applies = args[from..].iter().filter(|args| args[0] == "apply");
    let replacing = |args: &Vec<String>| -> Vec<String> {
        args.iter().filter_map(|arg| arg.strip_prefix("-replace=")).map(str::to_string).collect()
    };
    applies.map(replacing).collect()
}

#[tokio::test]
async fn a_deleted_control_plane_is_drained_leaves_etcd_and_is_reset_before_it_is_replaced() {
    let hosts = Arc::new(Hosts::default());
    let f = fixture_with(hosts.clone(), renderer(Arc::default())).await;
    hosts.link(&f);
    let store = f.store.as_ref();
    converged(&f, spec(3, 1, 1, "1.31.1")).await;
    let old = machine(store, "cp-1");
    // A PodDisruptionBudget holds the drain for one round.
    f.kube.pods.lock().unwrap().insert("node-cp-1".into(), vec!["kube-system/coredns-1".into()]);
    *f.kube.refusals.lock().unwrap() = 1;

    f.store.delete(Key::child(Kind::Machine, "acme", "cp-1")).await.unwrap();
    let invocations = f.engine.args.lock().unwrap().len();
    reconcile("acme", &f.ctx).await.unwrap();
    let draining = machine(store, "cp-1");
    assert!(draining.metadata.deletion_timestamp.is_some());
    assert_eq!(draining.status.stage, "draining");
    assert!(draining.metadata.annotations[LEAVING_ANNOTATION].starts_with("draining "));
    assert_eq!(*f.kube.calls.lock().unwrap(), ["cordon node-cp-1"]);
    assert!(f.etcd.journal.lock().unwrap().is_empty(), "still an etcd member, not reset");
    assert_eq!(hosts.calls_to("cp-1"), ["maintenance cp-1"], "only its first config");
    assert!(replaced(&f, invocations).is_empty(), "no apply while it leaves");
    let message = tenant(store, "acme").status.message.unwrap();
    assert!(message.contains("cp-1: draining node node-cp-1: 1 pods left"), "{message}");

    // Drained: it leaves etcd, then is reset, its Node goes, and the apply
    // replaces it; the fresh record takes its config in maintenance mode.
    reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(*f.etcd.journal.lock().unwrap(), ["leave cp-1", "reset cp-1"]);
    assert_eq!(
        *f.kube.calls.lock().unwrap(),
        ["cordon node-cp-1", "evict kube-system/coredns-1", "delete node-cp-1"]
    );
    assert_eq!(replaced(&f, invocations), [vec!["terraform_data.cp-1".to_string()]]);
    assert_eq!(hosts.calls_to("cp-1"), ["maintenance cp-1", "reset cp-1", "maintenance cp-1"]);
    let fresh = machine(store, "cp-1");
    assert!(fresh.metadata.deletion_timestamp.is_none());
    assert_ne!(fresh.metadata.created_at, old.metadata.created_at, "a new record");
    assert!(!fresh.metadata.annotations.contains_key(LEAVING_ANNOTATION));
    let config = hosts.config("10.0.0.2:50000").unwrap();
    assert_eq!(fresh.metadata.annotations.get(CONFIG_HASH_ANNOTATION), Some(&fingerprint(&config)));
    assert!(fresh.spec.connected);

    // The fresh node joins etcd and registers its Node: ready again.
    f.etcd.left.lock().unwrap().clear();
    f.kube.deleted.lock().unwrap().clear();
    reconcile("acme", &f.ctx).await.unwrap();
    let status = tenant(store, "acme").status;
    assert!(status.ready, "{status:?}");
    assert!(condition(&status, ETCD_HEALTHY).message.starts_with("3 of 3 members answer"));
    assert_eq!(hosts.calls_to("cp-1").len(), 3, "nothing more sent to it");
}

#[tokio::test]
async fn an_unrecognized_host_gets_nothing_until_its_machine_is_deleted_then_is_replaced_without_a_reset() {
    let hosts = Arc::new(Hosts::default());
    let extra = Arc::new(Mutex::new(String::new()));
    let f = fixture_with(hosts.clone(), renderer(extra.clone())).await;
    hosts.link(&f);
    let store = f.store.as_ref();
    converged(&f, spec(1, 2, 1, "1.31.1")).await;
    let taken = machine(store, "workers-0").metadata.annotations[CONFIG_HASH_ANNOTATION].clone();

    // workers-0's host is swapped for a blank one, and the config changes.
    hosts.swap("10.0.1.1:50000");
    *extra.lock().unwrap() = "cluster:\n  allowSchedulingOnControlPlanes: true\n".into();
    let invocations = f.engine.args.lock().unwrap().len();
    for _ in 0..3 {
        reconcile("acme", &f.ctx).await.unwrap();
        let waiting = machine(store, "workers-0");
        assert_eq!(waiting.status.stage, STAGE_UNRECOGNIZED);
        assert!(!waiting.spec.connected && !waiting.status.ready);
        let message = waiting.status.message.unwrap_or_default();
        assert!(message.contains("does not answer as this tenant's node"), "{message}");
        assert!(message.contains("cms delete machine workers-0 -t acme"), "{message}");
        assert_eq!(waiting.metadata.annotations[CONFIG_HASH_ANNOTATION], taken, "nothing taken");
    }
    assert_eq!(hosts.calls_to("workers-0"), ["maintenance workers-0"], "nothing reached the new host");
    assert_eq!(hosts.config("10.0.1.1:50000"), None);
    assert_eq!(hosts.calls_to("workers-1").last().map(String::as_str), Some("apply workers-1"), "the others");
    assert!(replaced(&f, invocations).is_empty(), "not replaced without a DELETE");
    assert!(!tenant(store, "acme").status.ready);

    // The operator confirms the replacement.
    f.store.delete(Key::child(Kind::Machine, "acme", "workers-0")).await.unwrap();
    reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(replaced(&f, invocations), [vec!["terraform_data.workers-0".to_string()]]);
    assert_eq!(hosts.calls_to("workers-0"), ["maintenance workers-0", "maintenance workers-0"], "no Reset");
    assert!(!f.etcd.journal.lock().unwrap().iter().any(|change| change.ends_with("workers-0")));
    let config = hosts.config("10.0.1.1:50000").unwrap();
    assert!(config.contains("allowSchedulingOnControlPlanes"), "the current config: {config}");
    let fresh = machine(store, "workers-0");
    assert!(fresh.metadata.deletion_timestamp.is_none());
    assert_eq!(fresh.metadata.annotations.get(CONFIG_HASH_ANNOTATION), Some(&fingerprint(&config)));
    assert_eq!(
        (fresh.status.stage.as_str(), fresh.status.ready, fresh.status.message.as_deref()),
        ("ready", true, None)
    );
    assert!(tenant(store, "acme").status.ready);
}

//! The cluster after the bootstrap: etcd's health and members, the
//! Kubernetes API and Nodes, and machines leaving safely.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use cms_model::{Kind, NodeGroup};
use cms_store::{Draft, Key, Store};
use cms_tenancy::{Bootstrapped, MockNodeClient, NodeClient};
use serde_json::{Value, json};

use super::{Fixture, condition, fixture, machines, refused, tenant};
use crate::reconcile;

type Resets = Arc<Mutex<Vec<(String, bool)>>>;

/// Nodes that take configs, answer and reset; resets are recorded.
fn answering(resets: Resets) -> Arc<dyn NodeClient> {
    let mut nodes = MockNodeClient::new();
    nodes.expect_apply_config().returning(|_, _, _| Ok(()));
    nodes.expect_version().returning(|_| Ok("1.14.0".into()));
    nodes.expect_bootstrap().returning(|_| Ok(Bootstrapped::Now));
    nodes.expect_reset().returning(move |node, graceful| {
        resets.lock().unwrap().push((node.machine.clone(), graceful));
        Ok(())
    });
    Arc::new(nodes)
}

fn spec(control_planes: u32, workers: u32) -> Value {
    let hosts = |count: usize, base: u8| -> Vec<Value> {
        (0..count).map(|i| json!({"address": format!("10.0.{base}.{}", i + 1)})).collect()
    };
    json!({"kubernetesVersion": "1.31.1", "nodeGroups": [
        {"name": "cp", "role": "controlplane", "count": control_planes, "providerClass": "metal:bare", "providerConfig": {"hosts": hosts(3, 0)}},
        {"name": "workers", "role": "worker", "count": workers, "providerClass": "metal:bare", "providerConfig": {"hosts": hosts(3, 1)}},
    ]})
}

async fn scale(store: &dyn Store, control_planes: u32, workers: u32) {
    let current = store.get(&Key::tenant("acme")).unwrap();
    let annotations = current.parse::<cms_model::Tenant>().unwrap().metadata.annotations;
    let draft = Draft { spec: spec(control_planes, workers), annotations, ..Draft::default() };
    store.update(Key::tenant("acme"), draft, current.resource_version).await.unwrap();
}

async fn converged(control_planes: u32, workers: u32) -> (Fixture, Resets) {
    let resets = Resets::default();
    let f = fixture(answering(resets.clone())).await;
    let draft = Draft { spec: spec(control_planes, workers), ..Draft::default() };
    f.store.create(Key::tenant("acme"), draft).await.unwrap();
    reconcile("acme", &f.ctx).await.unwrap();
    let status = tenant(f.store.as_ref(), "acme").status;
    assert!(status.ready, "{status:?}");
    (f, resets)
}

fn ids(f: &Fixture) -> Vec<String> {
    machines(f.store.as_ref(), "acme").into_iter().map(|m| m.metadata.name).collect()
}

fn stage(f: &Fixture, id: &str) -> String {
    let machine = machines(f.store.as_ref(), "acme").into_iter().find(|m| m.metadata.name == id).unwrap();
    machine.status.stage
}

#[tokio::test]
async fn the_tenant_is_ready_only_when_etcd_the_api_and_every_node_are() {
    let f = fixture(answering(Resets::default())).await;
    f.kube.down.store(true, Ordering::SeqCst);
    f.kube.not_ready.lock().unwrap().insert("node-workers-0".into());
    let draft = Draft { spec: spec(3, 1), ..Draft::default() };
    f.store.create(Key::tenant("acme"), draft).await.unwrap();

    reconcile("acme", &f.ctx).await.unwrap();
    let status = tenant(f.store.as_ref(), "acme").status;
    assert!(!status.ready);
    assert_eq!(condition(&status, crate::BOOTSTRAPPED).status, "True");
    let etcd = condition(&status, crate::ETCD_HEALTHY);
    assert_eq!((etcd.status.as_str(), etcd.reason.as_str()), ("True", "Healthy"), "{etcd:?}");
    assert_eq!(etcd.message, "3 of 3 members answer, leader on cp-0");
    let members = status.etcd.clone().unwrap().members;
    let on: Vec<_> = members.iter().map(|m| m.machine.clone().unwrap()).collect();
    assert_eq!(on, ["cp-0", "cp-1", "cp-2"]);
    assert!(members.iter().all(|m| m.healthy && !m.id.is_empty()));
    let api = condition(&status, crate::KUBERNETES_API_READY);
    assert_eq!(api.status, "False");
    assert!(api.message.contains("connection refused"), "{api:?}");
    assert_eq!(condition(&status, crate::NODES_READY).status, "False");
    assert!(
        machines(f.store.as_ref(), "acme").iter().all(|m| !m.status.ready && m.status.stage == "joining")
    );

    f.kube.down.store(false, Ordering::SeqCst);
    reconcile("acme", &f.ctx).await.unwrap();
    let status = tenant(f.store.as_ref(), "acme").status;
    assert!(!status.ready);
    assert_eq!(condition(&status, crate::KUBERNETES_API_READY).status, "True");
    let nodes = condition(&status, crate::NODES_READY);
    assert_eq!(nodes.status, "False");
    assert_eq!(
        nodes.message,
        "1 of 4 nodes not Ready: node node-workers-0 (machine workers-0) is NotReady: KubeletNotReady: \
         container runtime is down"
    );
    assert_eq!(
        status.message.as_deref(),
        Some(
            "1 of 4 machines without a Ready Kubernetes Node: workers-0: node node-workers-0 is NotReady: \
             KubeletNotReady: container runtime is down"
        )
    );
    let group: NodeGroup =
        f.store.get(&Key::child(Kind::NodeGroup, "acme", "workers")).unwrap().parse().unwrap();
    assert_eq!((group.status.replicas, group.status.ready_replicas), (1, 0));
    let group: NodeGroup = f.store.get(&Key::child(Kind::NodeGroup, "acme", "cp")).unwrap().parse().unwrap();
    assert_eq!((group.status.replicas, group.status.ready_replicas), (3, 3));

    f.kube.not_ready.lock().unwrap().clear();
    reconcile("acme", &f.ctx).await.unwrap();
    let status = tenant(f.store.as_ref(), "acme").status;
    assert!(status.ready, "{status:?}");
    assert_eq!(condition(&status, crate::NODES_READY).message, "4 of 4 nodes Ready");
    assert_eq!(condition(&status, crate::MACHINES_READY).message, "4 of 4 machines ready");
    assert!(machines(f.store.as_ref(), "acme").iter().all(|m| m.status.ready && m.status.stage == "ready"));
}

#[tokio::test]
async fn control_planes_leave_etcd_one_at_a_time_before_they_go() {
    let (f, resets) = converged(3, 0).await;
    scale(f.store.as_ref(), 1, 0).await;
    let runs = f.ctx.tofu.runs();
    for _ in 0..4 {
        reconcile("acme", &f.ctx).await.unwrap();
    }
    assert_eq!(*f.etcd.changes.lock().unwrap(), ["leave cp-2", "leave cp-1"]);
    assert_eq!(*resets.lock().unwrap(), [("cp-2".to_string(), false), ("cp-1".to_string(), false)]);
    // Each is drained before it leaves etcd, as a worker is.
    let calls = ["cordon node-cp-2", "delete node-cp-2", "cordon node-cp-1", "delete node-cp-1"];
    assert_eq!(*f.kube.calls.lock().unwrap(), calls);
    assert_eq!(ids(&f), ["cp-0"]);
    assert!(f.ctx.tofu.runs() > runs, "the apply ran once both had left");
    let status = tenant(f.store.as_ref(), "acme").status;
    assert!(status.ready, "{status:?}");
    assert_eq!(status.etcd.unwrap().members.len(), 1);
}

#[tokio::test]
async fn a_control_plane_waits_to_leave_while_another_member_is_silent() {
    let (f, resets) = converged(3, 0).await;
    f.etcd.silent.lock().unwrap().insert("cp-1".into());
    scale(f.store.as_ref(), 2, 0).await;
    let runs = f.ctx.tofu.runs();
    reconcile("acme", &f.ctx).await.unwrap();
    reconcile("acme", &f.ctx).await.unwrap();
    assert!(f.etcd.changes.lock().unwrap().is_empty());
    assert!(resets.lock().unwrap().is_empty());
    assert_eq!(stage(&f, "cp-2"), "leaving-etcd");
    assert_eq!(f.ctx.tofu.runs(), runs, "nothing is destroyed meanwhile");
    let status = tenant(f.store.as_ref(), "acme").status;
    assert!(!status.ready);
    let message = status.message.unwrap();
    assert!(
        message.contains("cp-2: waiting to leave etcd without losing quorum: member on cp-1"),
        "{message}"
    );

    f.etcd.silent.lock().unwrap().clear();
    reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(*f.etcd.changes.lock().unwrap(), ["leave cp-2"]);
    assert_eq!(ids(&f), ["cp-0", "cp-1"]);
}

#[tokio::test]
async fn a_silent_control_plane_is_removed_by_another_member() {
    let (f, _) = converged(3, 0).await;
    scale(f.store.as_ref(), 2, 0).await;
    // cp-2 stops answering after the scale-down began: it is removed by id.
    f.etcd.silent.lock().unwrap().insert("cp-2".into());
    reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(*f.etcd.changes.lock().unwrap(), ["remove cp-2 by cp-0"]);
}

#[tokio::test]
async fn a_worker_is_drained_then_reset_and_its_node_deleted() {
    let (f, resets) = converged(1, 2).await;
    f.kube
        .pods
        .lock()
        .unwrap()
        .insert("node-workers-1".into(), vec!["default/web-1".into(), "default/web-2".into()]);
    *f.kube.refusals.lock().unwrap() = 1;
    scale(f.store.as_ref(), 1, 1).await;
    reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(stage(&f, "workers-1"), "draining");
    let message = tenant(f.store.as_ref(), "acme").status.message.unwrap();
    assert!(message.contains("draining node node-workers-1: 2 pods left"), "{message}");
    assert!(message.contains("held by a PodDisruptionBudget"), "{message}");
    assert!(resets.lock().unwrap().is_empty());

    reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(
        *f.kube.calls.lock().unwrap(),
        ["cordon node-workers-1", "evict default/web-1", "evict default/web-2", "delete node-workers-1"]
    );
    assert_eq!(*resets.lock().unwrap(), [("workers-1".to_string(), true)]);
    assert_eq!(ids(&f), ["cp-0", "workers-0"]);
    assert!(tenant(f.store.as_ref(), "acme").status.ready);
}

#[tokio::test]
async fn a_deleted_tenant_resets_every_configured_host_once() {
    let (f, resets) = converged(1, 2).await;
    f.store.delete(Key::tenant("acme")).await.unwrap();
    reconcile("acme", &f.ctx).await.unwrap();
    let mut reset: Vec<_> = resets.lock().unwrap().clone();
    reset.sort();
    let all = |ids: &[&str]| ids.iter().map(|id| (id.to_string(), false)).collect::<Vec<_>>();
    assert_eq!(reset, all(&["cp-0", "workers-0", "workers-1"]));
    assert!(f.store.get(&Key::tenant("acme")).is_none(), "gone after the resets and the destroy");
}

#[tokio::test]
async fn a_host_that_does_not_reset_holds_the_deletion() {
    let mut nodes = MockNodeClient::new();
    nodes.expect_apply_config().returning(|_, _, _| Ok(()));
    nodes.expect_version().returning(|_| Ok("1.14.0".into()));
    nodes.expect_bootstrap().returning(|_| Ok(Bootstrapped::Now));
    nodes.expect_reset().returning(|_, _| Err(refused("connection refused")));
    let f = fixture(Arc::new(nodes)).await;
    let draft = Draft { spec: spec(1, 0), ..Draft::default() };
    f.store.create(Key::tenant("acme"), draft).await.unwrap();
    reconcile("acme", &f.ctx).await.unwrap();
    f.store.delete(Key::tenant("acme")).await.unwrap();
    assert_eq!(reconcile("acme", &f.ctx).await.unwrap(), crate::Action::Requeue(crate::LEAVE_POLL));
    let kept = tenant(f.store.as_ref(), "acme");
    assert!(kept.status.message.unwrap().contains("waiting for hosts to reset: resetting cp-0"));
}

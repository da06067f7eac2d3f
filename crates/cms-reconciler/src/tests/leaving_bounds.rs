//! The bounds of leaving and where its state lives: a drain that does not
//! finish lets the machine go after [`crate::DRAIN_TIMEOUT`], and a leave
//! stopped half-way is carried on from its stored step and time, after a
//! restart (a new process over the same database) or by another replica
//! under its own lease of the tenant.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cms_model::Kind;
use cms_store::{Key, Leases, SqlStore, Store, StoreOptions};

use super::fakes::{Etcd, Kube};
use super::hosts::{Hosts, backdate, converged, machine, respec, spec};
use super::{Fixture, fixture_with, renderer, tenant};
use crate::{Action, Context, DRAIN_TIMEOUT, LEAVING_ANNOTATION, LeaseOptions, reconcile};

/// Past the drain timeout.
fn past_the_drain() -> chrono::Duration {
    chrono::Duration::from_std(DRAIN_TIMEOUT).unwrap() + chrono::Duration::minutes(1)
}

/// A PodDisruptionBudget that never lets the pod on `node` go.
fn held_forever(f: &Fixture, node: &str) {
    f.kube.pods.lock().unwrap().insert(node.into(), vec!["default/web-1".into()]);
    *f.kube.refusals.lock().unwrap() = u32::MAX;
}

/// Whether the machine `id` is still in the store.
fn present(f: &Fixture, id: &str) -> bool {
    f.store.get(&Key::child(Kind::Machine, "acme", id)).is_some()
}

/// A context as a new process (or another replica) builds it over the
/// same store: a tool of its own with its workspaces under `root` (the
/// state is the engine's, shared), this replica's lease holder name when
/// there are `leases`, and the same world outside (hosts, etcd, the
/// Kubernetes API).
fn fresh(f: &Fixture, root: &Path, leases: Option<(Arc<dyn Leases>, &str)>) -> Context {
    let tofu = super::fake_tofu(root.to_path_buf(), Duration::from_secs(5), f.engine.clone());
    let leases = leases.map(|(leases, holder)| LeaseOptions {
        leases,
        holder: holder.into(),
        ttl: Duration::from_secs(30),
    });
    Context { tofu, leases, ..f.ctx.clone() }
}

/// A fixture over `hosts` whose store is also the leases. The replicas
/// share this one instance: a SQLite store's cache follows only its own
/// writes (on PostgreSQL each replica's follows the others').
async fn with_leases(hosts: &Arc<Hosts>) -> (Fixture, Arc<dyn Leases>) {
    let base = fixture_with(hosts.clone(), renderer(Arc::default())).await;
    let url = format!("sqlite://{}/cms.db?mode=rwc", base._dir.path().display());
    let sql = SqlStore::open(&StoreOptions::new(url)).await.unwrap();
    let store: Arc<dyn Store> = sql.clone();
    let etcd = Arc::new(Etcd::new(hosts.clone(), store.clone()));
    let kube = Arc::new(Kube::over(store.clone()));
    let ctx = Context { store: store.clone(), nodes: etcd.clone(), kube: kube.clone(), ..base.ctx.clone() };
    let Fixture { _dir, engine, .. } = base;
    (Fixture { _dir, store, engine, etcd, kube, ctx }, sql)
}

/// One reconcile the way the controller runs it with leases: under the
/// tenant's lease, every write fenced by it.
async fn leased_pass(ctx: &Context) -> Action {
    let options = ctx.leases.as_ref().unwrap();
    let lease = options.leases.acquire_lease("tenant/acme".into(), options.holder.clone(), options.ttl).await;
    let lease = lease.unwrap().expect("the tenant's lease is free");
    let work = |fenced: Context| async move { reconcile("acme", &fenced).await.unwrap() };
    crate::controller::while_held("acme", lease, ctx, options, work).await.unwrap()
}

#[tokio::test]
async fn a_drain_that_never_finishes_lets_the_machine_go_after_the_drain_timeout() {
    let hosts = Arc::new(Hosts::default());
    let f = fixture_with(hosts.clone(), renderer(Arc::default())).await;
    hosts.link(&f);
    let store = f.store.as_ref();
    converged(&f, spec(1, 2, 1, "1.31.1")).await;
    held_forever(&f, "node-workers-1");

    respec(store, spec(1, 1, 1, "1.31.1")).await;
    for _ in 0..3 {
        reconcile("acme", &f.ctx).await.unwrap();
        let draining = machine(store, "workers-1");
        assert_eq!(draining.status.stage, "draining");
        let message = tenant(store, "acme").status.message.unwrap_or_default();
        assert!(
            message.contains("workers-1: draining node node-workers-1: 1 pods left (default/web-1 held by a PodDisruptionBudget)"),
            "{message}"
        );
    }
    assert_eq!(*f.kube.calls.lock().unwrap(), ["cordon node-workers-1"]);
    assert!(
        !hosts.calls_to("workers-1").contains(&"reset workers-1".to_string()),
        "not reset while it drains"
    );

    // Past the drain timeout: it goes on, the pod never evicted.
    backdate(store, "workers-1", LEAVING_ANNOTATION, past_the_drain()).await;
    reconcile("acme", &f.ctx).await.unwrap();
    assert!(!present(&f, "workers-1"), "left, and removed by the apply");
    assert_eq!(hosts.calls_to("workers-1").last().map(String::as_str), Some("reset workers-1"));
    assert_eq!(*f.kube.calls.lock().unwrap(), ["cordon node-workers-1", "delete node-workers-1"]);
    assert_eq!(f.kube.pods.lock().unwrap()["node-workers-1"], ["default/web-1"], "no eviction forced");
    assert!(tenant(store, "acme").status.ready);
}

#[tokio::test]
async fn a_half_finished_leave_goes_on_from_its_stored_step_after_a_restart() {
    let hosts = Arc::new(Hosts::default());
    let f = fixture_with(hosts.clone(), renderer(Arc::default())).await;
    hosts.link(&f);
    let store = f.store.as_ref();
    converged(&f, spec(1, 2, 1, "1.31.1")).await;
    held_forever(&f, "node-workers-1");
    respec(store, spec(1, 1, 1, "1.31.1")).await;
    reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(machine(store, "workers-1").status.stage, "draining");

    // The drain timed out, then the host stopped answering its `Reset`.
    backdate(store, "workers-1", LEAVING_ANNOTATION, past_the_drain()).await;
    hosts.off.lock().unwrap().insert("workers-1".into());
    reconcile("acme", &f.ctx).await.unwrap();
    let resetting = machine(store, "workers-1");
    assert_eq!(resetting.status.stage, "resetting");
    assert!(resetting.metadata.annotations[LEAVING_ANNOTATION].starts_with("resetting "));
    let message = tenant(store, "acme").status.message.unwrap_or_default();
    assert!(message.contains("workers-1: resetting: "), "{message}");

    // The server is killed and started again, the host answers again; the
    // PodDisruptionBudget still holds. The new process goes on from
    // `resetting`: no second drain, one `Reset`.
    let restarted = fresh(&f, &f._dir.path().join("workspaces"), None);
    hosts.off.lock().unwrap().clear();
    reconcile("acme", &restarted).await.unwrap();
    assert!(!present(&f, "workers-1"), "left, and removed by the apply");
    let resets = hosts.calls_to("workers-1").iter().filter(|call| call.starts_with("reset ")).count();
    assert_eq!(resets, 1);
    assert_eq!(*f.kube.calls.lock().unwrap(), ["cordon node-workers-1", "delete node-workers-1"]);
    assert!(tenant(store, "acme").status.ready);
}

#[tokio::test]
async fn another_replica_under_its_own_lease_carries_on_a_half_finished_leave() {
    let hosts = Arc::new(Hosts::default());
    let (f, leases) = with_leases(&hosts).await;
    hosts.link(&f);
    let store = f.store.as_ref();
    converged(&f, spec(3, 1, 1, "1.31.1")).await;
    held_forever(&f, "node-cp-2");
    // cp-0's member stops answering: cp-2 may not leave etcd yet.
    f.etcd.silent.lock().unwrap().insert("cp-0".into());

    let here = tempfile::tempdir().unwrap();
    let first = fresh(&f, here.path(), Some((leases.clone(), "replica-a")));
    respec(store, spec(2, 1, 1, "1.31.1")).await;
    leased_pass(&first).await;
    assert_eq!(machine(store, "cp-2").status.stage, "draining");
    backdate(store, "cp-2", LEAVING_ANNOTATION, past_the_drain()).await;
    leased_pass(&first).await;
    let waiting = machine(store, "cp-2");
    assert_eq!(waiting.status.stage, "leaving-etcd");
    let message = tenant(store, "acme").status.message.unwrap_or_default();
    assert!(message.contains("cp-2: waiting to leave etcd without losing quorum"), "{message}");
    assert!(f.etcd.journal.lock().unwrap().is_empty(), "still a member, not reset");

    // Another replica, its own workspaces and lease holder name, takes the
    // tenant up once cp-0 answers again; the drain is not begun anew.
    let there = tempfile::tempdir().unwrap();
    let second = fresh(&f, there.path(), Some((leases, "replica-b")));
    f.etcd.silent.lock().unwrap().clear();
    leased_pass(&second).await;
    assert!(!present(&f, "cp-2"), "left, and removed by the apply");
    assert_eq!(*f.etcd.journal.lock().unwrap(), ["leave cp-2", "reset cp-2"]);
    assert_eq!(*f.kube.calls.lock().unwrap(), ["cordon node-cp-2", "delete node-cp-2"]);
    leased_pass(&second).await;
    let status = tenant(store, "acme").status;
    assert!(status.ready, "{status:?}");
}

//! Control planes roll with the etcd leader last: it hands over
//! (`EtcdForfeitLeadership`) just before its own `Upgrade`; when no member
//! names a leader they go in name order and the status says so; a leader
//! that cannot hand over is waited for.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::upgrades::{Upgradable, upgradable_tenant};
use super::{Fixture, condition, fixture, tenant};
use crate::reconcile;

/// A tenant of 3 control planes and 3 workers, converged on 1.14.0, then
/// asked for 1.14.1.
async fn rolling(nodes: &Arc<Upgradable>, leader: Option<&str>) -> Fixture {
    let f = fixture(nodes.clone()).await;
    *f.etcd.leader.lock().unwrap() = leader.map(str::to_string);
    upgradable_tenant(&f, "1.14.0").await;
    reconcile("acme", &f.ctx).await.unwrap();
    assert!(tenant(f.store.as_ref(), "acme").status.ready);
    upgradable_tenant(&f, "1.14.1").await;
    f
}

/// The upgrades and hand-overs of control planes, in order.
fn control_plane_steps(f: &Fixture) -> Vec<String> {
    let changes = f.etcd.changes.lock().unwrap();
    changes.iter().filter(|change| change.contains("cp-")).cloned().collect()
}

#[tokio::test]
async fn the_etcd_leader_hands_over_and_is_upgraded_last() {
    let nodes = Arc::new(Upgradable::default());
    let f = rolling(&nodes, Some("cp-1")).await;
    for _ in 0..30 {
        reconcile("acme", &f.ctx).await.unwrap();
    }
    assert!(tenant(f.store.as_ref(), "acme").status.ready, "the rollout finishes");
    assert_eq!(
        control_plane_steps(&f),
        ["upgrade cp-0", "upgrade cp-2", "forfeit cp-1", "upgrade cp-1"],
        "the leader last, after it handed over"
    );
    assert_eq!(f.etcd.leader.lock().unwrap().as_deref(), Some("cp-0"), "an upgraded member leads now");
    assert_eq!(nodes.upgrades.lock().unwrap().len(), 6);
}

#[tokio::test]
async fn without_a_known_leader_control_planes_go_in_name_order_and_the_status_says_so() {
    let nodes = Arc::new(Upgradable::default());
    let f = rolling(&nodes, Some("cp-1")).await;
    f.etcd.no_leader.store(true, Ordering::SeqCst);
    reconcile("acme", &f.ctx).await.unwrap();
    let status = tenant(f.store.as_ref(), "acme").status;
    let message = condition(&status, crate::UPGRADING).message;
    assert!(message.contains("upgrading cp-0"), "{message}");
    assert!(message.contains("control planes go in name order: the etcd leader is unknown"), "{message}");
    for _ in 0..30 {
        reconcile("acme", &f.ctx).await.unwrap();
    }
    assert!(tenant(f.store.as_ref(), "acme").status.ready);
    assert_eq!(control_plane_steps(&f), ["upgrade cp-0", "upgrade cp-1", "upgrade cp-2"], "no hand-over");
}

#[tokio::test]
async fn a_silent_etcd_member_holds_every_control_plane_then_the_leader_goes_last() {
    let nodes = Arc::new(Upgradable::default());
    let f = rolling(&nodes, Some("cp-1")).await;
    // cp-1's member stops answering; the others still name it the leader.
    f.etcd.silent.lock().unwrap().insert("cp-1".into());
    for _ in 0..15 {
        reconcile("acme", &f.ctx).await.unwrap();
    }
    // etcd is not whole: no control plane goes.
    assert!(control_plane_steps(&f).is_empty(), "{:?}", control_plane_steps(&f));
    let status = tenant(f.store.as_ref(), "acme").status;
    let message = condition(&status, crate::UPGRADING).message;
    assert!(message.contains("waiting for etcd before the next control plane"), "{message}");
    assert!(nodes.upgrades.lock().unwrap().iter().all(|machine| machine.starts_with("cp")), "workers wait");

    f.etcd.silent.lock().unwrap().clear();
    for _ in 0..30 {
        reconcile("acme", &f.ctx).await.unwrap();
    }
    assert!(tenant(f.store.as_ref(), "acme").status.ready);
    assert_eq!(control_plane_steps(&f), ["upgrade cp-0", "upgrade cp-2", "forfeit cp-1", "upgrade cp-1"]);
}

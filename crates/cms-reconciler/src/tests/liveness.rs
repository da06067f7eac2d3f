//! Liveness: every pass asks every configured machine for its version; one
//! that stops answering is `off` (not connected) and named in the tenant's
//! `MachinesConnected`, until it answers again.

use std::sync::Arc;

use super::hosts::{Hosts, converged, machine, spec};
use super::{condition, fixture_with, renderer, tenant};
use crate::{MACHINES_CONNECTED, STAGE_OFF, reconcile};

#[tokio::test]
async fn a_machine_that_stops_answering_is_off_until_it_answers_again() {
    let hosts = Arc::new(Hosts::default());
    let f = fixture_with(hosts.clone(), renderer(Arc::default())).await;
    hosts.link(&f);
    let store = f.store.as_ref();
    converged(&f, spec(1, 2, 1, "1.31.1")).await;
    let answering = condition(&tenant(store, "acme").status, MACHINES_CONNECTED);
    assert_eq!((answering.status.as_str(), answering.reason.as_str()), ("True", "Answering"));

    hosts.off.lock().unwrap().insert("workers-1".into());
    reconcile("acme", &f.ctx).await.unwrap();
    let off = machine(store, "workers-1");
    assert!(!off.spec.connected);
    assert_eq!(off.status.stage, STAGE_OFF);
    assert!(!off.status.ready);
    let message = off.status.message.unwrap_or_default();
    assert!(message.starts_with("off: not answering: "), "{message}");
    assert!(message.contains("connection refused"), "{message}");
    for id in ["cp-0", "workers-0"] {
        let other = machine(store, id);
        assert!(other.spec.connected && other.status.ready && other.status.stage == "ready", "{other:?}");
    }
    let status = tenant(store, "acme").status;
    let connected = condition(&status, MACHINES_CONNECTED);
    assert_eq!((connected.status.as_str(), connected.reason.as_str()), ("False", "Off"));
    assert_eq!(connected.message, "machines off (not answering the node API): workers-1");
    assert!(!status.ready);

    // Still off: it stays off, and named.
    reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(machine(store, "workers-1").status.stage, STAGE_OFF);
    assert_eq!(condition(&tenant(store, "acme").status, MACHINES_CONNECTED).status, "False");

    // It answers again: connected, and ready once its Node is.
    hosts.off.lock().unwrap().clear();
    reconcile("acme", &f.ctx).await.unwrap();
    let back = machine(store, "workers-1");
    assert!(back.spec.connected);
    assert_eq!((back.status.stage.as_str(), back.status.ready), ("ready", true));
    assert_eq!(back.status.message, None);
    let status = tenant(store, "acme").status;
    let connected = condition(&status, MACHINES_CONNECTED);
    assert_eq!(
        (connected.status.as_str(), connected.message.as_str()),
        ("True", "every configured machine answers")
    );
    assert!(status.ready, "{status:?}");
}

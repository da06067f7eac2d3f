//! What one probe finds.

use std::time::{Duration, Instant};

use cms_fake_node::{FakeNode, FakeNodeOptions, Method};
use cms_prober::{NO_CREDENTIALS, NO_REACHABLE_MACHINES, ProberError};
use cms_talos::SecretsBundle;

use crate::{World, dead_address, fake};

#[tokio::test]
async fn reachable_with_the_version_and_the_machine_count() {
    let world = World::new().await;
    let bundle = world.tenant("demo").await;
    let (cp, worker) = (fake(&bundle, "v1.13.4").await, fake(&bundle, "v1.13.4").await);
    world.machine("demo", "cp-1", "controlplane", Some(cp.addr().to_string())).await;
    world.machine("demo", "w-1", "worker", Some(worker.addr().to_string())).await;
    world.machine("demo", "w-2", "worker", None).await;
    let health = world.prober().tenant("demo").await.unwrap();
    assert!(health.reachable, "{health:?}");
    assert_eq!(health.talos_version.as_deref(), Some("1.13.4"));
    assert_eq!(health.machine_count, Some(3));
    assert!(health.probed_at.is_some() && health.error.is_none());
    assert_eq!(cp.calls().len(), 1);
    assert_eq!(cp.calls()[0].method, Method::Version);
    // Both were asked at once; the control plane's answer decided the probe.
    assert!(worker.calls().len() <= 1, "{:?}", worker.calls());
}

#[tokio::test]
async fn a_control_planes_version_wins_over_a_worker_that_answered_first() {
    let world = World::new().await;
    let bundle = world.tenant("demo").await;
    let worker = fake(&bundle, "v1.14.0").await;
    let failing = FakeNode::start(
        FakeNodeOptions::new(bundle.os_ca().clone()).failure(tonic::Code::Unavailable, "etcd is down"),
    )
    .await
    .unwrap();
    let slow = FakeNode::start(
        FakeNodeOptions::new(bundle.os_ca().clone()).version("v1.13.4").latency(Duration::from_millis(800)),
    )
    .await
    .unwrap();
    // The worker's name sorts first: the order comes from the roles.
    world.machine("demo", "a-worker", "worker", Some(worker.addr().to_string())).await;
    world.machine("demo", "b-cp", "controlplane", Some(failing.addr().to_string())).await;
    world.machine("demo", "c-cp", "controlplane", Some(slow.addr().to_string())).await;
    let started = Instant::now();
    let health = world.prober().tenant("demo").await.unwrap();
    let took = started.elapsed();
    assert!(health.reachable, "{health:?}");
    assert_eq!(health.talos_version.as_deref(), Some("1.13.4"), "the slow control plane's version");
    assert!(took >= Duration::from_millis(800) && took < Duration::from_secs(2), "{took:?}");
    assert_eq!((failing.calls().len(), slow.calls().len(), worker.calls().len()), (1, 1, 1));
}

#[tokio::test]
async fn all_machines_down_is_no_reachable_machines_within_the_bound() {
    let world = World::new().await;
    let bundle = world.tenant("demo").await;
    let hanging =
        FakeNode::start(FakeNodeOptions::new(bundle.os_ca().clone()).latency(Duration::from_secs(30)))
            .await
            .unwrap();
    world.machine("demo", "cp-1", "controlplane", Some(hanging.addr().to_string())).await;
    world.machine("demo", "cp-2", "controlplane", Some(dead_address().await)).await;
    world.machine("demo", "w-1", "worker", Some(hanging.addr().to_string())).await;
    let started = Instant::now();
    let health = world.prober().tenant("demo").await.unwrap();
    let took = started.elapsed();
    assert_eq!(health.error.as_deref(), Some(NO_REACHABLE_MACHINES), "{health:?}");
    assert!(!health.reachable && health.talos_version.is_none() && health.probed_at.is_none());
    assert_eq!(health.machine_count, Some(3));
    // Asked at once: the hanging machines take one deadline (2 s) together.
    assert!(took >= Duration::from_secs(2) && took < Duration::from_secs(3), "{took:?}");
    assert_eq!(hanging.calls().len(), 2);
}

#[tokio::test]
async fn a_tenant_without_credentials() {
    let world = World::new().await;
    world.tenant_without_credentials("bare").await;
    let node = fake(&SecretsBundle::generate("1.14.0").unwrap(), "v1.14.0").await;
    world.machine("bare", "cp-1", "controlplane", Some(node.addr().to_string())).await;
    let health = world.prober().tenant("bare").await.unwrap();
    assert_eq!(health.error.as_deref(), Some(NO_CREDENTIALS), "{health:?}");
    assert!(!health.reachable);
    assert!(node.calls().is_empty());
}

#[tokio::test]
async fn a_node_whose_certificate_comes_from_another_ca_is_not_reachable() {
    let world = World::new().await;
    let ours = world.tenant("demo").await;
    let theirs = SecretsBundle::generate("1.14.0").unwrap();
    // The impostor trusts our client certificates; only its own certificate is wrong.
    let impostor =
        FakeNode::start(FakeNodeOptions::new(theirs.os_ca().clone()).client_ca(ours.os_ca().clone()))
            .await
            .unwrap();
    world.machine("demo", "cp-1", "controlplane", Some(impostor.addr().to_string())).await;
    let health = world.prober().tenant("demo").await.unwrap();
    assert_eq!(health.error.as_deref(), Some(NO_REACHABLE_MACHINES), "{health:?}");
    assert!(impostor.calls().is_empty(), "the handshake failed before any call");
}

#[tokio::test]
async fn no_machines_and_unknown_tenants() {
    let world = World::new().await;
    world.tenant("empty").await;
    let health = world.prober().tenant("empty").await.unwrap();
    assert_eq!(health.error.as_deref(), Some(NO_REACHABLE_MACHINES));
    assert_eq!(health.machine_count, Some(0));
    let err = world.prober().tenant("nobody").await.unwrap_err();
    assert!(matches!(err, ProberError::TenantNotFound(name) if name == "nobody"));
}

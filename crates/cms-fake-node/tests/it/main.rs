//! The node API client against the fake node: real gRPC over real mTLS.

mod booted;
mod cluster;
mod identity;
mod kube;
mod kubectl;
mod logs;
mod reboots;
mod snapshot;
mod upstream;

use std::time::{Duration, Instant};

use cms_fake_node::{FakeNode, FakeNodeOptions, Method, Payload};
use cms_model::UserRole;
use cms_nodeapi::{
    ApplyMode, ApplyRequest, NodeApi, NodeApiError, NodeCredentials, NodeTarget, TalosNodeClient,
    UpgradeRequest,
};
use cms_talos::SecretsBundle;

pub(crate) const TTL: Duration = Duration::from_secs(600);

pub(crate) fn bundle() -> SecretsBundle {
    SecretsBundle::generate("1.14.0").expect("a bundle")
}

pub(crate) fn client() -> TalosNodeClient {
    TalosNodeClient::new(Duration::from_secs(2))
}

pub(crate) fn admin(bundle: &SecretsBundle) -> NodeCredentials {
    NodeCredentials::for_tenant(bundle, UserRole::Admin, TTL).expect("credentials")
}

pub(crate) fn target(node: &FakeNode) -> NodeTarget {
    NodeTarget::parse(&node.addr().to_string()).expect("a target")
}

#[tokio::test]
async fn version_over_mutual_tls() {
    let bundle = bundle();
    let node =
        FakeNode::start(FakeNodeOptions::new(bundle.os_ca().clone()).version("v1.13.2")).await.unwrap();
    let version = client().version(&target(&node), &admin(&bundle)).await.unwrap();
    assert_eq!(version.tag, "v1.13.2");
    assert_eq!(version.talos_version(), "1.13.2");
    let calls = node.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].method, Method::Version);
    assert_eq!(calls[0].payload, Payload::Empty);
    assert!(calls[0].client_certificate);
    assert_eq!(calls[0].node, None);
}

#[tokio::test]
async fn apply_configuration_and_upgrade_carry_their_payload() {
    let bundle = bundle();
    let node = FakeNode::start(FakeNodeOptions::new(bundle.os_ca().clone())).await.unwrap();
    let target = target(&node).with_node("10.0.0.7");
    let config = b"version: v1alpha1\nmachine:\n  type: worker\n".to_vec();
    let apply = ApplyRequest { config: config.clone(), mode: ApplyMode::NoReboot, dry_run: true };
    let outcome = client().apply_configuration(&target, &admin(&bundle), apply).await.unwrap();
    assert!(outcome.mode_details.contains(&config.len().to_string()), "{outcome:?}");
    let upgrade =
        UpgradeRequest { image: installer_image("1.14.1"), preserve: true, stage: false, force: false };
    let outcome = client().upgrade(&target, &admin(&bundle), upgrade).await.unwrap();
    assert!(!outcome.ack.is_empty());

    let calls = node.calls();
    assert_eq!(
        calls.iter().map(|c| c.method).collect::<Vec<_>>(),
        [Method::ApplyConfiguration, Method::Upgrade]
    );
    assert!(calls.iter().all(|call| call.node.as_deref() == Some("10.0.0.7")));
    assert!(calls[0].seq < calls[1].seq && calls[0].at <= calls[1].at);
    let Payload::ApplyConfiguration(request) = &calls[0].payload else { panic!("{:?}", calls[0]) };
    assert_eq!((request.data.as_slice(), request.mode, request.dry_run), (config.as_slice(), 2, true));
    let Payload::Upgrade(request) = &calls[1].payload else { panic!("{:?}", calls[1]) };
    assert_eq!(request.image, "ghcr.io/siderolabs/installer:v1.14.1");
    assert!(request.preserve && !request.stage && !request.force);
}

#[tokio::test]
async fn maintenance_mode_applies_without_a_client_certificate() {
    let bundle = bundle();
    let node = FakeNode::start(FakeNodeOptions::new(bundle.os_ca().clone()).maintenance()).await.unwrap();
    let apply = ApplyRequest { config: b"machine: {}".to_vec(), mode: ApplyMode::Reboot, dry_run: false };
    client().apply_configuration(&target(&node), &NodeCredentials::maintenance(), apply).await.unwrap();
    let calls = node.calls();
    assert_eq!(calls.len(), 1);
    assert!(!calls[0].client_certificate);
    let Payload::ApplyConfiguration(request) = &calls[0].payload else { panic!("{:?}", calls[0]) };
    assert_eq!((request.data.as_slice(), request.mode), (b"machine: {}".as_slice(), 0));
}

#[tokio::test]
async fn a_server_certificate_from_another_ca_is_refused() {
    let (ours, theirs) = (bundle(), bundle());
    let node = FakeNode::start(FakeNodeOptions::new(theirs.os_ca().clone()).client_ca(ours.os_ca().clone()))
        .await
        .unwrap();
    let err = client().version(&target(&node), &admin(&ours)).await.unwrap_err();
    assert!(matches!(err, NodeApiError::Connect { .. }), "{err:?}");
    assert!(node.calls().is_empty());
}

#[tokio::test]
async fn the_node_refuses_clients_of_another_ca_and_clients_without_a_certificate() {
    let (ours, theirs) = (bundle(), bundle());
    let node = FakeNode::start(FakeNodeOptions::new(ours.os_ca().clone()).client_ca(theirs.os_ca().clone()))
        .await
        .unwrap();
    assert!(client().version(&target(&node), &admin(&ours)).await.is_err());
    let strict = FakeNode::start(FakeNodeOptions::new(ours.os_ca().clone())).await.unwrap();
    assert!(client().version(&target(&strict), &NodeCredentials::maintenance()).await.is_err());
    assert!(node.calls().is_empty() && strict.calls().is_empty());
}

#[tokio::test]
async fn failures_latency_and_stopping() {
    let bundle = bundle();
    let node = FakeNode::start(FakeNodeOptions::new(bundle.os_ca().clone())).await.unwrap();
    let (target, credentials) = (target(&node), admin(&bundle));
    node.set_failure(Some(cms_fake_node::Failure { code: tonic::Code::Unavailable, message: "down".into() }));
    let err = client().version(&target, &credentials).await.unwrap_err();
    assert!(err.to_string().contains("down"), "{err}");
    node.set_failure(None);
    node.set_version("v1.12.0");
    assert_eq!(client().version(&target, &credentials).await.unwrap().tag, "v1.12.0");

    node.set_latency(Duration::from_secs(5));
    let started = Instant::now();
    let slow = TalosNodeClient::new(Duration::from_millis(300));
    assert!(slow.version(&target, &credentials).await.is_err());
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    assert_eq!(node.calls().len(), 3);

    node.stop();
    let err = client().version(&target, &credentials).await.unwrap_err();
    assert!(matches!(err, NodeApiError::Connect { .. }), "{err:?}");
}

/// The default installer image of a Talos version, as the service names it.
pub(crate) fn installer_image(version: &str) -> String {
    cms_model::installer_image(&Default::default(), None, version)
}

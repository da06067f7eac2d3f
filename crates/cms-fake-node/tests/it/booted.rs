//! Cloud instances: fake nodes that boot with their machine config as user
//! data, so they start configured, take only mTLS clients, and reach their
//! cluster's Kubernetes API at boot or once it appears.

use cms_fake_node::{FakeEtcd, FakeKube, FakeKubeOptions, FakeNode, FakeNodeOptions, Method};
use cms_nodeapi::{
    ApplyMode, ApplyRequest, BootstrapRequest, NodeApi, NodeCredentials, ResetRequest, WipeMode,
};

use crate::{admin, bundle, client, target};

const CONTROL_PLANE: &str = "version: v1alpha1\nmachine:\n  type: controlplane\n";
const WORKER: &str = "version: v1alpha1\nmachine:\n  type: worker\n";

#[tokio::test]
async fn a_booted_control_plane_bootstraps_without_taking_a_config() {
    let bundle = bundle();
    let etcd = FakeEtcd::default();
    let kube = FakeKube::start(FakeKubeOptions::new(bundle.kubernetes_ca().clone())).await.unwrap();
    let options = |hostname: &str, config: &str| {
        FakeNodeOptions::new(bundle.os_ca().clone())
            .maintenance()
            .booted(config)
            .hostname(hostname)
            .etcd(etcd.clone())
            .kube(kube.clone())
    };
    let cp = FakeNode::start(options("cp-0", CONTROL_PLANE)).await.unwrap();
    let worker = FakeNode::start(options("w-0", WORKER)).await.unwrap();

    let mut nodes: Vec<_> = kube.nodes().into_iter().map(|node| (node.name, node.control_plane)).collect();
    nodes.sort();
    assert_eq!(nodes, [("cp-0".to_string(), true), ("w-0".to_string(), false)], "registered at boot");
    assert!(etcd.members().is_empty(), "etcd waits for its bootstrap");

    let unauthenticated = client().version(&target(&cp), &NodeCredentials::maintenance()).await;
    assert!(unauthenticated.is_err(), "a booted node is out of maintenance mode");
    let (client, admin) = (client(), admin(&bundle));
    assert!(client.bootstrap(&target(&worker), &admin, BootstrapRequest::default()).await.is_err());
    client.bootstrap(&target(&cp), &admin, BootstrapRequest::default()).await.expect("the bootstrap");
    let members: Vec<_> = etcd.members().into_iter().map(|member| member.hostname).collect();
    assert_eq!(members, ["cp-0"]);
    assert_eq!(etcd.members()[0].address, cp.addr().ip());
    let methods: Vec<_> = cp.calls().iter().map(|call| call.method).collect();
    assert_eq!(methods, [Method::Bootstrap], "booting is no call");
    assert!(cp.calls()[0].client_certificate);
}

#[tokio::test]
async fn a_kubernetes_api_that_appears_later_gets_the_configured_nodes() {
    let bundle = bundle();
    let booted = FakeNodeOptions::new(bundle.os_ca().clone()).booted(CONTROL_PLANE).hostname("cp-0");
    let cp = FakeNode::start(booted).await.unwrap();
    let waiting = FakeNodeOptions::new(bundle.os_ca().clone()).maintenance().hostname("spare");
    let spare = FakeNode::start(waiting).await.unwrap();

    let kube = FakeKube::start(FakeKubeOptions::new(bundle.kubernetes_ca().clone())).await.unwrap();
    cp.set_kube(kube.clone());
    spare.set_kube(kube.clone());
    let nodes: Vec<_> = kube.nodes().into_iter().map(|node| (node.name, node.control_plane)).collect();
    assert_eq!(nodes, [("cp-0".to_string(), true)], "a node without a config has no kubelet yet");

    let (client, admin) = (client(), admin(&bundle));
    let apply = ApplyRequest { config: WORKER.as_bytes().to_vec(), mode: ApplyMode::Auto, dry_run: false };
    client.apply_configuration(&target(&spare), &NodeCredentials::maintenance(), apply).await.unwrap();
    assert_eq!(kube.nodes().len(), 2, "the spare registers once configured");

    let reset = ResetRequest { graceful: true, reboot: true, wipe: WipeMode::All };
    client.reset(&target(&cp), &admin, reset).await.expect("the reset");
    let ready: Vec<_> = kube.nodes().into_iter().map(|node| (node.name, node.ready)).collect();
    assert_eq!(ready, [("cp-0".to_string(), false), ("spare".to_string(), true)]);
    let other = FakeKube::start(FakeKubeOptions::new(bundle.kubernetes_ca().clone())).await.unwrap();
    cp.set_kube(other.clone());
    assert!(other.nodes().is_empty(), "a reset node has no config to register with");
}

//! The reconciler's node API seam, [`TenantNodeClient`], against fake nodes
//! over real mTLS: an etcd snapshot streamed out of one cluster and into a
//! control plane of another, which starts etcd from it, and the leader
//! handing over; a configured host's impostor that gets nothing.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cms_fake_node::{FakeEtcd, FakeNode, FakeNodeOptions, Method, Payload, snapshot_bytes};
use cms_model::UserRole;
use cms_nodeapi::NodeCredentials;
use cms_talos::SecretsBundle;
use cms_tenancy::{
    NodeClient, NodeError, NodeRef, TenancyError, TenantCredentials, TenantNodeClient, UploadStream,
    talos_node_api,
};
use futures_util::StreamExt;

/// The credentials of one tenant's bundle.
struct Credentials(SecretsBundle);

#[async_trait]
impl TenantCredentials for Credentials {
    async fn credentials(&self, _tenant: &str) -> Result<NodeCredentials, TenancyError> {
        NodeCredentials::for_tenant(&self.0, UserRole::Admin, Duration::from_secs(600))
            .map_err(|err| TenancyError::Credentials(err.to_string()))
    }
}

async fn control_plane(
    bundle: &SecretsBundle,
    etcd: &FakeEtcd,
    nodes: &dyn NodeClient,
    name: &str,
) -> (FakeNode, NodeRef) {
    let options =
        FakeNodeOptions::new(bundle.os_ca().clone()).hostname(name).etcd(etcd.clone()).snapshot_size(200_000);
    let fake = FakeNode::start(options).await.expect("a fake node");
    let node =
        NodeRef { tenant: "acme".into(), machine: name.into(), management_address: fake.addr().to_string() };
    let config = "version: v1alpha1\nmachine:\n  type: controlplane\n";
    nodes.apply_config(&node, config, true).await.expect("configured");
    (fake, node)
}

#[tokio::test]
async fn a_snapshot_moves_to_a_fresh_cluster_chunk_by_chunk_and_etcd_starts_from_it() {
    let bundle = SecretsBundle::generate("1.14.0").expect("a bundle");
    let nodes =
        TenantNodeClient::new(talos_node_api(Duration::from_secs(5)), Arc::new(Credentials(bundle.clone())));
    let old = FakeEtcd::default();
    let (_cp0, cp0) = control_plane(&bundle, &old, &nodes, "cp-0").await;
    let (_cp1, cp1) = control_plane(&bundle, &old, &nodes, "cp-1").await;
    nodes.bootstrap(&cp0).await.expect("etcd starts");

    assert_eq!(nodes.etcd_forfeit_leadership(&cp1).await.unwrap(), None, "cp-1 does not lead");
    assert_eq!(nodes.etcd_forfeit_leadership(&cp0).await.unwrap().as_deref(), Some("cp-1"));
    assert_eq!(old.leader_hostname().as_deref(), Some("cp-1"));

    let mut chunks = Vec::new();
    let mut snapshot = nodes.etcd_snapshot(&cp1).await.expect("a snapshot");
    while let Some(chunk) = snapshot.next().await {
        chunks.push(chunk.expect("a chunk"));
    }
    assert!(chunks.len() > 1, "the snapshot came in chunks");
    assert_eq!(chunks.concat(), snapshot_bytes(200_000));

    let fresh = FakeEtcd::default();
    let (restored, target) = control_plane(&bundle, &fresh, &nodes, "cp-new").await;
    let upload: UploadStream = Box::pin(futures_util::stream::iter(chunks.into_iter().map(Ok)));
    nodes.etcd_recover(&target, upload).await.expect("uploaded");
    nodes.bootstrap_recover(&target, false).await.expect("etcd starts from the snapshot");
    let sha = restored.recovered_sha256().expect("the node kept the snapshot");
    assert_eq!(fresh.restored_from(), Some(sha.clone()));
    let calls = restored.calls();
    let upload = calls.iter().find(|call| call.method == Method::EtcdRecover).expect("an upload");
    let Payload::EtcdRecover(facts) = &upload.payload else { panic!("{upload:?}") };
    assert_eq!((facts.bytes, &facts.sha256, facts.complete), (200_000, &sha, true));
    let bootstrap = calls.iter().rfind(|call| call.method == Method::Bootstrap).expect("a bootstrap");
    assert_eq!(
        bootstrap.to_json()["payload"],
        serde_json::json!({"recoverEtcd": true, "recoverSkipHashCheck": false})
    );

    let again = nodes.bootstrap_recover(&target, false).await.unwrap_err();
    assert!(
        again.to_string().contains("AlreadyExists") || again.to_string().contains("not empty"),
        "{again}"
    );
}

/// A configured host's address taken by an impostor: a node whose
/// certificate another CA signed, in maintenance mode (it takes clients
/// without a certificate) or not. The config is never sent, and the error
/// says why.
#[tokio::test]
async fn an_impostor_on_a_configured_hosts_address_gets_no_config() {
    let bundle = SecretsBundle::generate("1.14.0").expect("a bundle");
    let foreign = SecretsBundle::generate("1.14.0").expect("another bundle");
    let nodes =
        TenantNodeClient::new(talos_node_api(Duration::from_secs(5)), Arc::new(Credentials(bundle.clone())));
    let config = "version: v1alpha1\nmachine:\n  type: worker\n";
    for options in [
        FakeNodeOptions::new(foreign.os_ca().clone()).maintenance(),
        FakeNodeOptions::new(foreign.os_ca().clone()).client_ca(bundle.os_ca().clone()),
    ] {
        let impostor = FakeNode::start(options).await.expect("a fake node");
        let node = NodeRef {
            tenant: "acme".into(),
            machine: "w-0".into(),
            management_address: impostor.addr().to_string(),
        };
        let err = nodes.apply_config(&node, config, true).await.expect_err("the impostor is refused");
        assert!(matches!(err, NodeError::Untrusted { .. }), "{err:?}");
        assert!(err.to_string().contains("is not signed by the tenant's OS CA"), "{err}");
        assert!(impostor.calls().is_empty(), "nothing reached the impostor: {:?}", impostor.calls());
        assert!(matches!(nodes.version(&node).await, Err(NodeError::Untrusted { .. })));
    }
}

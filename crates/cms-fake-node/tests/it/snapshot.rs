//! etcd's backup and restore and its leadership, from the real client to
//! fake nodes over mTLS: a snapshot streamed in chunks, the same bytes
//! uploaded to a node of a fresh cluster and started from, a broken
//! upload kept nowhere, and the leader handing over.

use std::time::Duration;

use cms_fake_node::proto::machine::BootstrapRequest as BootstrapMessage;
use cms_fake_node::{FakeEtcd, FakeNode, FakeNodeOptions, Method, Payload, SNAPSHOT_CHUNK, snapshot_bytes};
use cms_nodeapi::{
    ApplyMode, ApplyRequest, BootstrapRequest, NodeApi, NodeApiError, TalosNodeClient, UploadStream,
};
use cms_talos::SecretsBundle;
use futures_util::StreamExt;
use sha2::{Digest, Sha256};

use crate::{admin, bundle, client, target};

/// More than an HTTP/2 flow-control window (the transfer must keep going
/// after the call returned its stream), and not a multiple of the chunk
/// size: the last chunk is short.
const SIZE: usize = 48 * SNAPSHOT_CHUNK + 1234;

async fn control_plane(bundle: &SecretsBundle, etcd: &FakeEtcd, hostname: &str) -> FakeNode {
    let options = FakeNodeOptions::new(bundle.os_ca().clone())
        .hostname(hostname)
        .etcd(etcd.clone())
        .snapshot_size(SIZE);
    let node = FakeNode::start(options).await.expect("a fake node");
    let config = b"version: v1alpha1\nmachine:\n  type: controlplane\n".to_vec();
    let apply = ApplyRequest { config, mode: ApplyMode::Auto, dry_run: false };
    client().apply_configuration(&target(&node), &admin(bundle), apply).await.expect("configured");
    node
}

fn code(err: &NodeApiError) -> tonic::Code {
    match err {
        NodeApiError::Status { status, .. } => status.code(),
        other => panic!("expected a gRPC status, got {other}"),
    }
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn upload(chunks: Vec<Vec<u8>>) -> UploadStream {
    Box::pin(futures_util::stream::iter(chunks.into_iter().map(Ok)))
}

#[tokio::test]
async fn a_snapshot_streams_in_chunks_and_a_fresh_cluster_starts_from_the_same_bytes() {
    let bundle = bundle();
    let (client, admin) = (client(), admin(&bundle));
    let old = FakeEtcd::default();
    let source = control_plane(&bundle, &old, "cp-0").await;
    let refused = client.etcd_snapshot(&target(&source), &admin).await.err().expect("no etcd yet");
    assert_eq!(code(&refused), tonic::Code::FailedPrecondition);
    client.bootstrap(&target(&source), &admin, BootstrapRequest::default()).await.unwrap();

    let mut stream = client.etcd_snapshot(&target(&source), &admin).await.expect("a snapshot");
    let mut chunks = Vec::new();
    while let Some(chunk) = stream.next().await {
        chunks.push(chunk.expect("a chunk"));
    }
    let mut lengths = vec![SNAPSHOT_CHUNK; 48];
    lengths.push(1234);
    assert_eq!(chunks.iter().map(Vec::len).collect::<Vec<_>>(), lengths);
    let whole = chunks.concat();
    assert_eq!(whole, snapshot_bytes(SIZE));

    // A fresh cluster: the control plane takes the upload, then starts etcd from it.
    let fresh = FakeEtcd::default();
    let target_node = control_plane(&bundle, &fresh, "cp-new").await;
    let early = BootstrapRequest { recover_etcd: true, recover_skip_hash_check: false };
    let err = client.bootstrap(&target(&target_node), &admin, early).await.unwrap_err();
    assert_eq!(code(&err), tonic::Code::FailedPrecondition, "no snapshot uploaded yet");
    client.etcd_recover(&target(&target_node), &admin, upload(chunks)).await.expect("uploaded");
    assert_eq!(target_node.recovered_sha256(), Some(sha256(&whole)));
    let recover = BootstrapRequest { recover_etcd: true, recover_skip_hash_check: true };
    client.bootstrap(&target(&target_node), &admin, recover).await.expect("recovered");
    assert_eq!(fresh.restored_from(), Some(sha256(&whole)));
    assert_eq!(fresh.bootstrapped_by().as_deref(), Some("cp-new"));

    let calls = target_node.calls();
    let uploads: Vec<_> = calls.iter().filter(|call| call.method == Method::EtcdRecover).collect();
    let Payload::EtcdRecover(facts) = &uploads[0].payload else { panic!("{uploads:?}") };
    assert_eq!(
        (facts.bytes, facts.sha256.as_str(), facts.complete),
        (SIZE as u64, sha256(&whole).as_str(), true)
    );
    assert_eq!(uploads[0].to_json()["payload"]["bytes"], SIZE as u64);
    let bootstraps: Vec<_> = calls
        .iter()
        .filter(|call| call.method == Method::Bootstrap)
        .map(|call| call.payload.clone())
        .collect();
    assert_eq!(
        bootstraps.last(),
        Some(&Payload::Bootstrap(BootstrapMessage { recover_etcd: true, recover_skip_hash_check: true }))
    );

    // A node whose etcd runs refuses an upload.
    let refused =
        client.etcd_recover(&target(&source), &admin, upload(vec![vec![1, 2, 3]])).await.unwrap_err();
    assert_eq!(code(&refused), tonic::Code::FailedPrecondition);
    assert_eq!(source.recovered_sha256(), None);
}

#[tokio::test]
async fn a_broken_upload_is_aborted_and_kept_nowhere() {
    let bundle = bundle();
    let node = control_plane(&bundle, &FakeEtcd::default(), "cp-0").await;
    let chunks: Vec<std::io::Result<Vec<u8>>> =
        vec![Ok(vec![7; 1000]), Err(std::io::Error::other("the backup file is truncated"))];
    let broken: UploadStream = Box::pin(futures_util::stream::iter(chunks));
    let err = client().etcd_recover(&target(&node), &admin(&bundle), broken).await.unwrap_err();
    assert!(matches!(err, NodeApiError::Upload(_)), "{err:?}");

    // The node saw a stream that broke off, not one that ended.
    let mut waited = 0;
    let call = loop {
        if let Some(call) = node.calls().into_iter().find(|call| call.method == Method::EtcdRecover) {
            break call;
        }
        waited += 1;
        assert!(waited < 100, "the node never recorded the upload");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let Payload::EtcdRecover(facts) = call.payload else { panic!("{call:?}") };
    assert!(!facts.complete, "{facts:?}");
    assert_eq!(node.recovered_sha256(), None);
}

#[tokio::test]
async fn the_leader_hands_over_and_others_stay_as_they_are() {
    let bundle = bundle();
    let (client, admin) = (client(), admin(&bundle));
    let etcd = FakeEtcd::default();
    let cps = [
        control_plane(&bundle, &etcd, "cp-0").await,
        control_plane(&bundle, &etcd, "cp-1").await,
        control_plane(&bundle, &etcd, "cp-2").await,
    ];
    client.bootstrap(&target(&cps[0]), &admin, BootstrapRequest::default()).await.unwrap();
    let cp2 = etcd.members().into_iter().find(|member| member.hostname == "cp-2").unwrap().id;
    etcd.set_leader(cp2);
    let status = client.etcd_status(&target(&cps[0]), &admin).await.unwrap();
    assert_eq!(status.leader, cp2, "EtcdStatus names the leader the test set");

    assert_eq!(client.etcd_forfeit_leadership(&target(&cps[1]), &admin).await.unwrap(), None);
    assert_eq!(etcd.leader(), Some(cp2), "a follower's forfeit changes nothing");
    let next = client.etcd_forfeit_leadership(&target(&cps[2]), &admin).await.unwrap().expect("a new leader");
    assert_ne!(next, "cp-2");
    assert_eq!(etcd.leader_hostname(), Some(next));
    let status = client.etcd_status(&target(&cps[2]), &admin).await.unwrap();
    assert_ne!(status.leader, cp2);
    assert!(cps[2].calls().iter().any(|call| call.method == Method::EtcdForfeitLeadership));
}

#[tokio::test]
async fn a_snapshot_that_does_not_start_in_time_stalls() {
    let bundle = bundle();
    let etcd = FakeEtcd::default();
    let node = control_plane(&bundle, &etcd, "cp-0").await;
    client().bootstrap(&target(&node), &admin(&bundle), BootstrapRequest::default()).await.unwrap();
    node.set_latency(Duration::from_secs(5));
    let slow = TalosNodeClient::new(Duration::from_millis(300));
    let err = slow.etcd_snapshot(&target(&node), &admin(&bundle)).await.err().expect("a stall");
    assert!(matches!(err, NodeApiError::Stalled { .. }), "{err:?}");
}

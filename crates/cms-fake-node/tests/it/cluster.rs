//! The calls that make machines one cluster, from the real client to fake
//! nodes sharing one fake etcd: one bootstrap, members that join as control
//! planes take their config, leaving, removal by id and reset.

use cms_fake_node::proto::machine::BootstrapRequest as BootstrapMessage;
use cms_fake_node::{FakeEtcd, FakeNode, FakeNodeOptions, Method, Payload};
use cms_nodeapi::{ApplyMode, ApplyRequest, BootstrapRequest, NodeApi, NodeApiError, ResetRequest, WipeMode};
use cms_talos::SecretsBundle;

use crate::{admin, bundle, client, target};

async fn node(bundle: &SecretsBundle, etcd: &FakeEtcd, hostname: &str) -> FakeNode {
    let options = FakeNodeOptions::new(bundle.os_ca().clone()).hostname(hostname).etcd(etcd.clone());
    FakeNode::start(options).await.expect("a fake node")
}

async fn configure(bundle: &SecretsBundle, node: &FakeNode, role: &str) {
    let config = format!("version: v1alpha1\nmachine:\n  type: {role}\n").into_bytes();
    let apply = ApplyRequest { config, mode: ApplyMode::Auto, dry_run: false };
    client().apply_configuration(&target(node), &admin(bundle), apply).await.expect("applied");
}

fn code(err: NodeApiError) -> tonic::Code {
    match err {
        NodeApiError::Status { status, .. } => status.code(),
        other => panic!("expected a gRPC status, got {other}"),
    }
}

#[tokio::test]
async fn one_bootstrap_then_control_planes_join_leave_and_are_removed() {
    let bundle = bundle();
    let etcd = FakeEtcd::default();
    let cps = [
        node(&bundle, &etcd, "cp-0").await,
        node(&bundle, &etcd, "cp-1").await,
        node(&bundle, &etcd, "cp-2").await,
    ];
    let worker = node(&bundle, &etcd, "w-0").await;
    let (client, admin) = (client(), admin(&bundle));
    for cp in &cps[..2] {
        configure(&bundle, cp, "controlplane").await;
    }
    configure(&bundle, &worker, "worker").await;

    let refused = client.bootstrap(&target(&worker), &admin, BootstrapRequest::default()).await.unwrap_err();
    assert_eq!(code(refused), tonic::Code::FailedPrecondition, "a worker does not bootstrap");
    let no_etcd = client.etcd_member_list(&target(&cps[0]), &admin).await.unwrap_err();
    assert_eq!(code(no_etcd), tonic::Code::FailedPrecondition, "no etcd before the bootstrap");

    client.bootstrap(&target(&cps[0]), &admin, BootstrapRequest::default()).await.expect("the bootstrap");
    let again = client.bootstrap(&target(&cps[1]), &admin, BootstrapRequest::default()).await.unwrap_err();
    assert_eq!(code(again), tonic::Code::AlreadyExists, "a second bootstrap fails as Talos's does");
    assert_eq!(etcd.bootstrapped_by().as_deref(), Some("cp-0"));
    assert_eq!(
        cps[0].calls().iter().find(|call| call.method == Method::Bootstrap).map(|call| call.payload.clone()),
        Some(Payload::Bootstrap(BootstrapMessage { recover_etcd: false, recover_skip_hash_check: false }))
    );

    configure(&bundle, &cps[2], "controlplane").await;
    let members = client.etcd_member_list(&target(&cps[1]), &admin).await.expect("the members");
    let mut hosts: Vec<_> = members.iter().map(|member| member.hostname.as_str()).collect();
    hosts.sort();
    assert_eq!(hosts, ["cp-0", "cp-1", "cp-2"], "the control planes are members; the worker is not");
    assert!(members.iter().all(|member| member.peer_urls[0].ends_with(":2380")));
    let status = client.etcd_status(&target(&cps[2]), &admin).await.expect("a status");
    let cp0 = members.iter().find(|member| member.hostname == "cp-0").unwrap().id;
    assert_eq!(status.leader, cp0, "the bootstrapped member leads");
    assert_ne!(status.member_id, cp0);

    client.etcd_leave_cluster(&target(&cps[2]), &admin).await.expect("cp-2 leaves");
    let cp1 = members.iter().find(|member| member.hostname == "cp-1").unwrap().id;
    let own = client.etcd_remove_member_by_id(&target(&cps[0]), &admin, cp0).await.unwrap_err();
    assert_eq!(code(own), tonic::Code::InvalidArgument, "a member does not remove itself");
    client.etcd_remove_member_by_id(&target(&cps[0]), &admin, cp1).await.expect("cp-0 removes cp-1");
    let left: Vec<_> = etcd.members().into_iter().map(|member| member.hostname).collect();
    assert_eq!(left, ["cp-0"]);
    assert_eq!(etcd.sizes(), [2, 3, 2, 1]);

    let reset = ResetRequest { graceful: true, reboot: true, wipe: WipeMode::All };
    client.reset(&target(&worker), &admin, reset).await.expect("the worker resets");
    let [cp0_node, cp1_node, cp2_node] = cps;
    drop((cp1_node, cp2_node));
    assert!(!etcd.lost_quorum(), "every member left before its node stopped");
    drop(cp0_node);
    assert!(etcd.lost_quorum(), "the last member stopped while still a member");
    let calls = worker.calls();
    assert_eq!(calls.last().map(|call| call.method), Some(Method::Reset));
}

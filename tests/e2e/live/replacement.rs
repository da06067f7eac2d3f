//! Replacements: a host at a configured address that answers in
//! maintenance mode is a replaced host or an impostor, and gets nothing
//! until an operator confirms the replacement with a machine DELETE; a
//! machine replaced through the API is drained, leaves etcd, is reset and
//! rebuilt, in that order.

use std::net::SocketAddr;

use cms_e2e::cluster::{ClusterNode, hostname};
use cms_fake_node::{FakeNode, FakeNodeOptions};
use cms_talos::SecretsBundle;

use super::{Live, seq};
use crate::provisioning::{CONVERGE, Engine, eventually};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_in_maintenance_mode_at_a_configured_address_waits_for_the_operator() {
    let engine = Engine::new();
    let mut live = Live::start(&engine, "impostor", (3, 1), |options| options).await;
    // cp-2's host is swapped for one in maintenance mode, with no config
    // and a certificate of its own.
    let index = live.cluster.nodes.iter().position(|node| node.host.machine == "cp-2").unwrap();
    let ClusterNode { host, node } = live.cluster.nodes.remove(index);
    node.stop();
    let stranger = SecretsBundle::generate("1.9.6").expect("a bundle");
    let options = FakeNodeOptions::new(stranger.os_ca().clone())
        .listen(SocketAddr::new(host.ip, 50000))
        .maintenance()
        .hostname(host.hostname())
        .etcd(live.cluster.etcd.clone())
        .kube(live.cluster.kube.clone());
    let node = FakeNode::start(options).await.expect("the new host starts");
    live.cluster.nodes.push(ClusterNode { host, node });

    let machine = eventually("cp-2 awaiting the operator", CONVERGE, || async {
        let machine = live.machine("cp-2").await?;
        (machine["status"]["stage"] == "awaiting-replacement").then_some(machine)
    })
    .await;
    let message = machine["status"]["message"].as_str().unwrap();
    assert!(message.contains("a replaced host or an impostor"), "{message}");
    assert!(message.contains("cms delete machine cp-2 -t impostor"), "{message}");
    assert_eq!(machine["spec"]["connected"], false);
    // It waits: pass after pass, nothing reaches the host.
    crate::metrics::reconciled(&live.api(), 3).await;
    let new_host = live.cluster.node("cp-2");
    assert!(new_host.calls().is_empty(), "nothing was sent: {:?}", new_host.calls());

    // The operator confirms: the old member goes, then the host takes its config.
    live.api().delete("/api/v1/tenants/impostor/machines/cp-2").await.expect(202);
    live.settled("cp-2 rebuilt on the new host", |_, machines| {
        machines
            .iter()
            .all(|m| m["status"]["stage"] == "ready" && m["metadata"].get("deletionTimestamp").is_none())
    })
    .await;
    let new_host = live.cluster.node("cp-2");
    let applies = new_host.calls_of("ApplyConfiguration");
    assert_eq!(applies.len(), 1, "{applies:?}");
    assert_eq!(applies[0]["clientCertificate"], false, "in maintenance mode");
    assert!(new_host.calls_of("Reset").is_empty(), "a host that is not the tenant's is not reset");
    let removals = live.cluster.calls_of("EtcdRemoveMemberByID");
    assert_eq!(removals.len(), 1, "another member removed cp-2's old one: {removals:?}");
    assert!(seq(&removals[0].1) < seq(&applies[0]), "the old member left before the host was configured");
    let members = live.cluster.etcd.members();
    assert_eq!(members.len(), 3, "{members:?}");
    assert!(members.iter().any(|member| member.hostname == hostname("cp-2")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_replaced_through_the_api_leaves_etcd_before_its_reset() {
    let engine = Engine::new();
    let live = Live::start(&engine, "replace", (3, 1), |options| options).await;
    live.api().delete("/api/v1/tenants/replace/machines/cp-1").await.expect(202);
    eventually("cp-1 leaving", CONVERGE, || async {
        live.cluster.node("cp-1").calls_of("EtcdLeaveCluster").first().cloned()
    })
    .await;
    live.settled("cp-1 rebuilt", |_, machines| {
        machines
            .iter()
            .all(|m| m["status"]["stage"] == "ready" && m["metadata"].get("deletionTimestamp").is_none())
    })
    .await;
    let node = live.cluster.node("cp-1");
    let leave = seq(&node.calls_of("EtcdLeaveCluster")[0]);
    let resets = node.calls_of("Reset");
    assert_eq!(resets.len(), 1, "{resets:?}");
    assert!(leave < seq(&resets[0]), "it left etcd before its reset");
    let applies = node.calls_of("ApplyConfiguration");
    let rebuilt = applies.last().expect("configured again");
    assert!(seq(&resets[0]) < seq(rebuilt), "rebuilt after the reset");
    assert_eq!(rebuilt["clientCertificate"], false, "from maintenance mode");
    let cordoned = live.cluster.kube.requests().into_iter().any(|request| {
        request.method == "PATCH" && request.path.starts_with(&format!("/api/v1/nodes/{}", hostname("cp-1")))
    });
    assert!(cordoned, "the control plane was drained before it left");
    assert_eq!(live.cluster.etcd.members().len(), 3);
}

//! Liveness: every pass asks every machine, so a node that stops answering
//! is `connected: false` at stage `off` within one resync, named by the
//! tenant's `MachinesConnected` condition, and comes back when it answers.
//! And the health probe asks machines at once, under one deadline.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use cms_e2e::cluster::ClusterNode;
use cms_fake_node::{FakeNode, FakeNodeOptions, Method};

use super::{Live, condition};
use crate::provisioning::{Engine, eventually};

/// One resync of the e2e server (`CMS_RESYNC_INTERVAL`, 1 s), with room for
/// the pass itself.
const WITHIN_A_RESYNC: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_node_is_off_within_a_resync_and_comes_back() {
    let engine = Engine::new();
    let mut live = Live::start(&engine, "liveness", (1, 2), |options| options).await;
    let index = live.cluster.nodes.iter().position(|node| node.host.machine == "workers-1").unwrap();
    let ClusterNode { host, node } = live.cluster.nodes.remove(index);
    let config = node.config().expect("the node runs its config");
    node.stop();

    let machine = eventually("workers-1 off", WITHIN_A_RESYNC, || async {
        let machine = live.machine("workers-1").await?;
        (machine["spec"]["connected"] == false && machine["status"]["stage"] == "off").then_some(machine)
    })
    .await;
    assert_eq!(machine["status"]["ready"], false);
    let message = machine["status"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("off: not answering"), "{message}");
    let tenant = eventually("the condition naming it", WITHIN_A_RESYNC, || async {
        let tenant = live.tenant().await;
        (condition(&tenant, "MachinesConnected")?["status"] == "False").then_some(tenant)
    })
    .await;
    let connected = condition(&tenant, "MachinesConnected").unwrap();
    assert!(connected["message"].as_str().unwrap().contains("workers-1"), "{connected}");
    assert_eq!(tenant["status"]["ready"], false);
    let others = live.machines().await;
    assert!(
        others
            .iter()
            .filter(|m| m["metadata"]["name"] != "workers-1")
            .all(|m| m["spec"]["connected"] == true)
    );

    // The host answers again, with the config it ran.
    let options = FakeNodeOptions::new(live.bundle.os_ca().clone())
        .listen(SocketAddr::new(host.ip, 50000))
        .hostname(host.hostname())
        .etcd(live.cluster.etcd.clone())
        .kube(live.cluster.kube.clone())
        .booted(config);
    let node = FakeNode::start(options).await.expect("the node starts again");
    live.cluster.nodes.push(ClusterNode { host, node });
    let tenant = live
        .settled("workers-1 back", |_, machines| {
            machines.iter().all(|m| m["spec"]["connected"] == true && m["status"]["stage"] == "ready")
        })
        .await;
    assert_eq!(condition(&tenant, "MachinesConnected").unwrap()["status"], "True", "{tenant}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_with_five_machines_that_hang_answers_its_health_within_one_deadline() {
    let engine = Engine::new();
    let live = Live::start(&engine, "hanging", (1, 4), |options| options).await;
    // Every machine now takes a call and never answers it.
    for node in &live.cluster.nodes {
        node.node.hold(Some(Method::Version));
    }
    let started = Instant::now();
    let health = live.api().get("/api/v1/tenants/hanging/health").await.expect(200);
    let took = started.elapsed();
    assert_eq!(health["reachable"], false, "after {:?}: {health}", started.elapsed());
    // The prober's deadline is 2 s; machine by machine, five would take 10 s.
    assert!(took < Duration::from_secs(5), "the probe took {took:?}: {health}");
}

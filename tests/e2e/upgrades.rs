//! Rolling Talos upgrades through the real server, with fake nodes that
//! emulate one: after `Upgrade` a node is down (rebooting) for a while,
//! then answers with the installer image's tag, or it fails on demand. The
//! etcd leader the test chooses goes last, after it handed over.

use std::time::Duration;

use cms_e2e::cluster::{ClusterNode, FakeCluster, hostname};
use cms_e2e::nodes::StoreWriter;
use cms_e2e::{Api, Server};
use serde_json::{Value, json};

use crate::provisioning::cluster::fake_hosts;
use crate::provisioning::{CONVERGE, Engine, converged, eventually, metal_tenant};

/// How long an upgraded fake node stays down.
const REBOOT: Duration = Duration::from_secs(1);

/// A node of the tenant: its machine id, role and fake.
struct Node {
    id: String,
    control_plane: bool,
    fake: ClusterNode,
}

impl Node {
    fn upgrades(&self) -> Vec<Value> {
        self.fake.calls().into_iter().filter(|call| call["method"] == "Upgrade").collect()
    }
}

/// A tenant of 3 control planes and 3 workers (2 upgraded at once) on
/// Talos 1.14.0, converged on fake nodes; `extra` adds arguments to the
/// fake of one machine.
async fn cluster(engine: &Engine, name: &str, fail_upgrade: &[(&str, &str)]) -> (Server, Vec<Node>) {
    let server = engine.options().start().await;
    let api = server.api();
    let mut body = metal_tenant(name, 3, 3);
    body["spec"]["talosVersion"] = json!("1.14.0");
    body["spec"]["nodeGroups"][1]["maxParallelism"] = json!(2);
    api.post("/api/v1/tenants", &body).await.expect(201);
    let bundle = StoreWriter::open(server.data_dir()).await.bundle(name).await;
    let cluster = FakeCluster::start(&bundle, &fake_hosts(3, 3), |host, options| {
        let options = options.upgrade_delay(REBOOT);
        match fail_upgrade.iter().find(|(machine, _)| *machine == host.machine) {
            Some((_, message)) => options.upgrade_failure(*message),
            None => options,
        }
    })
    .await;
    // The nodes keep the cluster's etcd and Kubernetes API alive.
    let nodes = cluster
        .nodes
        .into_iter()
        .map(|fake| Node { id: fake.host.machine.clone(), control_plane: fake.host.control_plane, fake })
        .collect();
    converged(&api, name).await;
    (server, nodes)
}

/// Makes the etcd member of `machine` lead the cluster's etcd.
fn lead(nodes: &[Node], machine: &str) {
    let etcd = nodes[0].fake.node.etcd();
    let member = etcd.members().into_iter().find(|member| member.hostname == hostname(machine));
    etcd.set_leader(member.unwrap_or_else(|| panic!("{machine} is an etcd member")).id);
}

async fn set_talos_version(api: &Api, name: &str, version: &str) {
    let mut tenant = api.get(&format!("/api/v1/tenants/{name}")).await.expect(200);
    tenant["spec"]["talosVersion"] = json!(version);
    api.put(&format!("/api/v1/tenants/{name}"), &tenant).await.expect(200);
}

fn at(call: &Value) -> u128 {
    u128::from(call["atMillis"].as_u64().expect("a call time"))
}

fn condition(tenant: &Value, kind: &str) -> Option<Value> {
    tenant["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == kind).cloned()
}

/// Waits until every machine runs `version` and the tenant is ready again.
async fn rolled_out(api: &Api, name: &str, version: &str) {
    eventually(&format!("every machine at {version}"), CONVERGE, || async {
        let tenant = converged(api, name).await;
        let machines = api.get(&format!("/api/v1/tenants/{name}/machines")).await.expect(200);
        let all = machines["items"].as_array()?.iter().all(|m| m["status"]["talosVersion"] == version);
        (all && tenant["status"]["phase"] == "active").then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_planes_one_at_a_time_then_workers_within_max_parallelism() {
    let engine = Engine::new();
    let (server, nodes) = cluster(&engine, "rolling", &[]).await;
    let api = server.api();
    set_talos_version(&api, "rolling", "1.14.1").await;

    // The status shows the rollout while it runs.
    let progress = eventually("the rollout in the status", CONVERGE, || async {
        let tenant = api.get("/api/v1/tenants/rolling").await.expect(200);
        let upgrading = condition(&tenant, "Upgrading")?;
        (tenant["status"]["phase"] == "updating" && upgrading["status"] == "True").then_some(upgrading)
    })
    .await;
    let message = progress["message"].as_str().unwrap();
    assert!(message.contains("of 6 machines at the desired Talos version"), "{message}");
    let in_flight = eventually("a machine in the stage upgrading", CONVERGE, || async {
        let machines = api.get("/api/v1/tenants/rolling/machines").await.expect(200);
        machines["items"].as_array()?.iter().find(|m| m["status"]["stage"] == "upgrading").cloned()
    })
    .await;
    assert_eq!(in_flight["status"]["ready"], false);
    rolled_out(&api, "rolling", "1.14.1").await;

    let mut downs: Vec<(u128, u128, bool)> = Vec::new();
    for node in &nodes {
        let upgrades = node.upgrades();
        assert_eq!(upgrades.len(), 1, "{} was upgraded once: {upgrades:?}", node.id);
        assert_eq!(upgrades[0]["payload"]["image"], "ghcr.io/siderolabs/installer:v1.14.1");
        assert_eq!(upgrades[0]["clientCertificate"], true);
        let start = at(&upgrades[0]);
        downs.push((start, start + REBOOT.as_millis(), node.control_plane));
    }
    downs.sort_unstable();
    // Control planes first, and never two down at once.
    let first_worker = downs.iter().position(|(_, _, cp)| !cp).unwrap();
    assert_eq!(first_worker, 3, "every control plane before any worker: {downs:?}");
    for pair in downs[..3].windows(2) {
        assert!(pair[0].1 <= pair[1].0, "two control planes down at once: {downs:?}");
    }
    assert!(downs[2].1 <= downs[3].0, "the workers wait for the last control plane: {downs:?}");
    // Workers: at most two down at any instant.
    for (start, _, _) in &downs[3..] {
        let down = downs[3..].iter().filter(|(s, e, _)| s <= start && start < e).count();
        assert!(down <= 2, "more workers down than maxParallelism: {downs:?}");
    }
    let tenant = api.get("/api/v1/tenants/rolling").await.expect(200);
    assert_eq!(condition(&tenant, "Upgrading").unwrap()["reason"], "Done", "{tenant}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_node_pauses_the_rollout_with_the_reason() {
    let engine = Engine::new();
    let (server, nodes) = cluster(&engine, "paused", &[("cp-1", "the disk is full")]).await;
    let api = server.api();
    // cp-0 leads etcd, so it goes last and cp-1 first.
    lead(&nodes, "cp-0");
    set_talos_version(&api, "paused", "1.14.1").await;
    let tenant = eventually("the rollout to pause", CONVERGE, || async {
        let tenant = api.get("/api/v1/tenants/paused").await.expect(200);
        let upgrading = condition(&tenant, "Upgrading")?;
        (upgrading["reason"] == "Paused").then_some(tenant)
    })
    .await;
    let reason = tenant["status"]["message"].as_str().unwrap();
    assert!(reason.contains("cp-1") && reason.contains("the disk is full"), "{reason}");
    assert_eq!(tenant["status"]["phase"], "updating");
    assert_eq!(tenant["status"]["ready"], false);
    assert_eq!(tenant["metadata"]["annotations"]["service.io/rollout-paused"], "2 Upgrading");

    // It goes no further: no other node is touched while it is paused,
    // pass after pass.
    crate::metrics::reconciled(&api, 3).await;
    let touched: Vec<&str> =
        nodes.iter().filter(|node| !node.upgrades().is_empty()).map(|node| node.id.as_str()).collect();
    assert_eq!(touched, ["cp-1"], "only the failing control plane, the first");
    assert_eq!(nodes[1].upgrades().len(), 1, "the failing node is not retried while paused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_etcd_leader_hands_over_and_is_upgraded_last() {
    let engine = Engine::new();
    let (server, nodes) = cluster(&engine, "leader", &[]).await;
    let api = server.api();
    // Not the first by name, nor the member that bootstrapped.
    lead(&nodes, "cp-1");
    set_talos_version(&api, "leader", "1.14.1").await;
    rolled_out(&api, "leader", "1.14.1").await;

    let seq = |call: &Value| call["seq"].as_u64().expect("a call sequence number");
    let mut upgrades: Vec<(u64, &str)> = nodes
        .iter()
        .filter(|node| node.control_plane)
        .map(|node| (seq(&node.upgrades()[0]), node.id.as_str()))
        .collect();
    upgrades.sort_unstable();
    let order: Vec<&str> = upgrades.iter().map(|(_, id)| *id).collect();
    assert_eq!(order, ["cp-0", "cp-2", "cp-1"], "the leader last, the others in name order");

    let forfeits: Vec<(&str, Value)> = nodes
        .iter()
        .flat_map(|node| {
            node.fake.calls_of("EtcdForfeitLeadership").into_iter().map(|call| (node.id.as_str(), call))
        })
        .collect();
    assert_eq!(forfeits.len(), 1, "one hand-over: {forfeits:?}");
    let (machine, forfeit) = &forfeits[0];
    assert_eq!(*machine, "cp-1", "the leader hands over");
    assert_eq!(forfeit["clientCertificate"], true);
    assert!(upgrades[1].0 < seq(forfeit), "after the other control planes' upgrades: {upgrades:?}");
    assert!(seq(forfeit) < upgrades[2].0, "before its own upgrade: {upgrades:?}");
    let etcd = nodes[0].fake.node.etcd();
    assert_ne!(etcd.leader_hostname(), Some(hostname("cp-1")), "another member leads now");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_survives_kill_9_and_upgrades_no_machine_twice() {
    let engine = Engine::new();
    let (server, nodes) = cluster(&engine, "restarted", &[]).await;
    let api = server.api();
    set_talos_version(&api, "restarted", "1.14.1").await;
    eventually("the first upgrade", CONVERGE, || async { (!nodes[0].upgrades().is_empty()).then_some(()) })
        .await;
    let stopped = server.kill().await;
    let server = stopped.restart().await;
    let api = server.api();
    rolled_out(&api, "restarted", "1.14.1").await;
    for node in &nodes {
        assert_eq!(node.upgrades().len(), 1, "{} was upgraded exactly once", node.id);
    }
}

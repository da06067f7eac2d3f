//! A config change that Talos takes only with a reboot: every fake node
//! refuses it without one (`NO_REBOOT`), as Talos does, so the service
//! rolls it: one machine at a time, control planes first, the etcd leader
//! last, each back before the next.

use std::time::{Duration, SystemTime};

use cms_fake_node::FakeNode;
use serde_json::json;

use super::{Live, condition, patch};
use crate::provisioning::{CONVERGE, Engine, eventually};

/// How long a rebooting fake node stays down.
const REBOOT: Duration = Duration::from_secs(2);
/// `ApplyConfigurationRequest.Mode`, as Talos numbers it.
const MODE_REBOOT: u64 = 0;
const MODE_NO_REBOOT: u64 = 2;

fn reboots(node: &FakeNode) -> Vec<SystemTime> {
    node.reboots()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_that_needs_a_reboot_lands_on_every_machine_one_at_a_time_leader_last() {
    let engine = Engine::new();
    let live = Live::start(&engine, "reboots", (3, 2), |options| options.reboot_delay(REBOOT)).await;
    let api = live.api();
    // cp-0 bootstrapped etcd; cp-1 leads it now, so it goes last.
    live.lead("cp-1");
    // `machine.env` is not among what Talos applies at once.
    let env = patch("proxy", json!({"machine": {"env": {"HTTP_PROXY": "http://proxy.example:3128"}}}));
    api.post("/api/v1/tenants/reboots/configpatches", &env).await.expect(201);
    live.update(|tenant| tenant["spec"]["configPatches"] = json!([{"name": "proxy"}])).await;

    // The status shows which machine reboots, and why.
    let progress = eventually("the reboots in the status", CONVERGE, || async {
        let tenant = live.tenant().await;
        let rebooting = condition(&tenant, "Rebooting")?;
        (rebooting["status"] == "True" && tenant["status"]["phase"] == "updating").then_some(rebooting)
    })
    .await;
    let message = progress["message"].as_str().unwrap();
    assert!(message.contains("of 5 machines run their config"), "{message}");
    assert!(message.contains("needs a reboot"), "{message}");
    let in_flight = eventually("a machine at stage rebooting", CONVERGE, || async {
        live.machines().await.into_iter().find(|machine| machine["status"]["stage"] == "rebooting")
    })
    .await;
    assert_eq!(in_flight["status"]["ready"], false);

    let tenant = live
        .settled("every node running the patch", |_, _| {
            live.cluster.nodes.iter().all(|node| node.node.config().is_some_and(|c| c.contains("HTTP_PROXY")))
        })
        .await;
    assert_eq!(condition(&tenant, "Rebooting").unwrap()["reason"], "Done", "{tenant}");
    for machine in live.machines().await {
        let annotations = &machine["metadata"]["annotations"];
        assert!(annotations.get("service.io/reboot-pending").is_none(), "{machine}");
        assert!(annotations.get("service.io/rebooting-for").is_none(), "{machine}");
        assert_eq!(machine["status"]["stage"], "ready");
    }

    // Each machine refused the change without a reboot, then took it with one, once.
    let mut order: Vec<(SystemTime, &str)> = Vec::new();
    for node in &live.cluster.nodes {
        let id = node.host.machine.as_str();
        let applies = node.calls_of("ApplyConfiguration");
        let with_env: Vec<_> = applies
            .iter()
            .filter(|call| call["payload"]["data"].as_str().unwrap().contains("HTTP_PROXY"))
            .collect();
        assert!(with_env.iter().any(|call| call["payload"]["mode"] == MODE_NO_REBOOT), "{id}: {with_env:?}");
        let rebooting: Vec<_> =
            with_env.iter().filter(|call| call["payload"]["mode"] == MODE_REBOOT).collect();
        assert_eq!(rebooting.len(), 1, "{id} took the change with one reboot");
        assert_eq!(rebooting[0]["clientCertificate"], true);
        let times = reboots(&node.node);
        assert_eq!(times.len(), 1, "{id} rebooted once: {times:?}");
        order.push((times[0], id));
    }
    order.sort_unstable();
    let ids: Vec<&str> = order.iter().map(|(_, id)| *id).collect();
    assert_eq!(
        ids,
        ["cp-0", "cp-2", "cp-1", "workers-0", "workers-1"],
        "control planes first, the leader last"
    );
    for pair in order.windows(2) {
        let gap = pair[1].0.duration_since(pair[0].0).unwrap_or_default();
        assert!(gap >= REBOOT, "{} rebooted while {} was down: {order:?}", pair[1].1, pair[0].1);
    }
    let forfeits = live.cluster.calls_of("EtcdForfeitLeadership");
    assert_eq!(forfeits.len(), 1, "the leader hands over once: {forfeits:?}");
    assert_eq!(forfeits[0].0, "cp-1");
}

//! Kubernetes upgrades roll as `talosctl upgrade-k8s` does: the
//! control-plane components one control plane at a time, each only once
//! the API answers again; then the kubelets one machine at a time, each
//! only once the Node before is Ready with the new version. A step of more
//! than one minor version is refused.

use std::time::{Duration, Instant};

use cms_e2e::cluster::hostname;
use serde_json::json;

use super::{Live, condition};
use crate::provisioning::{CONVERGE, Engine};

/// How long the test holds the API (or a Node) not ready after a step.
const HOLD: Duration = Duration::from_secs(3);

fn at(version: Option<String>, want: &str) -> bool {
    version.is_some_and(|version| version.trim_start_matches('v') == want)
}

/// Samples the fake nodes until `done` holds, failing after the converge time.
async fn until(live: &Live, what: &str, done: impl Fn(&Live) -> bool) {
    let deadline = Instant::now() + CONVERGE;
    while !done(live) {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn components_at(live: &Live, version: &str) -> Vec<String> {
    let nodes = live.cluster.nodes.iter().filter(|node| node.host.control_plane);
    nodes
        .filter(|node| at(node.node.api_server_version(), version))
        .map(|node| node.host.machine.clone())
        .collect()
}

fn kubelets_at(live: &Live, version: &str) -> Vec<String> {
    let nodes = live.cluster.nodes.iter();
    nodes
        .filter(|node| at(node.node.kubelet_version(), version))
        .map(|node| node.host.machine.clone())
        .collect()
}

/// Samples for `HOLD`, asserting that `check` keeps holding.
async fn holds(live: &Live, what: &str, check: impl Fn(&Live) -> bool) {
    let until = Instant::now() + HOLD;
    while Instant::now() < until {
        assert!(check(live), "{what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn components_then_kubelets_one_node_at_a_time_and_no_minor_skipped() {
    let engine = Engine::new();
    let live = Live::start(&engine, "kube", (3, 2), |options| options).await;
    let api = live.api();

    // More than one minor at a time is refused, here and on a tenant at 1.30.
    let skip = live.update(|tenant| tenant["spec"]["kubernetesVersion"] = json!("1.33.0")).await;
    assert_eq!(skip["status"], 422, "{skip}");
    assert!(skip["error"].as_str().unwrap().contains("spec.kubernetesVersion"), "{skip}");
    let old = json!({"metadata": {"name": "old"}, "spec": {"kubernetesVersion": "1.30.4"}});
    api.post("/api/v1/tenants", &old).await.expect(201);
    // The reconciler writes its annotations meanwhile: read again on 409.
    let mut reply = None;
    for _ in 0..20 {
        let mut old = api.get("/api/v1/tenants/old").await.expect(200);
        old["spec"]["kubernetesVersion"] = json!("1.32.0");
        let answer = api.put("/api/v1/tenants/old", &old).await;
        if answer.status != 409 {
            reply = Some(answer);
            break;
        }
    }
    let refused = reply.expect("an answer other than 409").expect_error(422, "Invalid");
    assert!(refused.contains("1.31"), "the message names the allowed step: {refused}");

    assert!(components_at(&live, "1.31.1").len() == 3 && kubelets_at(&live, "1.31.1").len() == 5);
    live.update(|tenant| tenant["spec"]["kubernetesVersion"] = json!("1.32.0")).await;

    // The first control plane's components move; while the API does not
    // answer, no other control plane moves, nor any kubelet.
    until(&live, "the first control plane's components", |live| !components_at(live, "1.32.0").is_empty())
        .await;
    live.cluster.kube.set_api_ready(false);
    holds(&live, "one control plane moves while the API is not ready", |live| {
        components_at(live, "1.32.0").len() == 1 && kubelets_at(live, "1.32.0").is_empty()
    })
    .await;
    live.cluster.kube.set_api_ready(true);
    until(&live, "every control plane's components", |live| components_at(live, "1.32.0").len() == 3).await;

    // Then the kubelets: while the first Node is NotReady, no other kubelet moves.
    until(&live, "the first kubelet", |live| !kubelets_at(live, "1.32.0").is_empty()).await;
    let first = kubelets_at(&live, "1.32.0").remove(0);
    assert!(first.starts_with("cp-"), "control planes' kubelets first, not {first}");
    live.cluster.kube.set_node_ready(&hostname(&first), false);
    holds(&live, "one kubelet moves while its Node is NotReady", |live| {
        kubelets_at(live, "1.32.0").len() == 1
    })
    .await;
    live.cluster.kube.set_node_ready(&hostname(&first), true);

    let tenant = live
        .settled("every machine observed at 1.32.0", |tenant, machines| {
            machines.len() == 5
                && machines.iter().all(|m| m["status"]["kubernetesVersion"] == "1.32.0")
                && tenant["metadata"]["annotations"]["service.io/kubernetes-version"] == "1.32.0"
        })
        .await;
    let upgrading = condition(&tenant, "KubernetesUpgrading").expect("the upgrade's condition");
    assert_eq!(upgrading["reason"], "Done", "{tenant}");
    assert_eq!(components_at(&live, "1.32.0").len(), 3);
    assert_eq!(kubelets_at(&live, "1.32.0").len(), 5);
    let nodes = live.cluster.kube.nodes();
    assert!(nodes.iter().all(|node| node.kubelet_version.trim_start_matches('v') == "1.32.0"), "{nodes:?}");
    // Configs went without a reboot.
    assert!(live.cluster.nodes.iter().all(|node| node.node.reboots().is_empty()));
}

//! The real kubectl against the fake Kubernetes API, with a kubeconfig cut
//! from the tenant's secrets as the service cuts it.

use std::path::Path;
use std::process::{Command, Output};

use cms_fake_node::{FakeKube, FakeKubeOptions};
use cms_model::UserRole;

use crate::{TTL, bundle};

/// Runs `kubectl --kubeconfig DIR/kubeconfig --cache-dir DIR/cache ARGS`
/// off the runtime's threads; fails when kubectl is not installed.
async fn kubectl(dir: &Path, args: &[&str]) -> String {
    let mut command = command();
    command.arg("--kubeconfig").arg(dir.join("kubeconfig")).arg("--cache-dir").arg(dir.join("cache"));
    command.args(args).env("HOME", dir);
    let shown = format!("kubectl {}", args.join(" "));
    let output: Output =
        tokio::task::spawn_blocking(move || command.output()).await.expect("kubectl ran").unwrap_or_else(
            |err| panic!("these tests need kubectl 1.32 on the PATH, and running it failed: {err}"),
        );
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{shown} failed ({}):\n{stdout}\n{stderr}", output.status);
    stdout.into_owned()
}

#[allow(clippy::disallowed_methods)] // The test drives the real kubectl, as users of the service do.
fn command() -> Command {
    Command::new("kubectl")
}

/// The words of the line that starts with `name`.
fn row(output: &str, name: &str) -> Vec<String> {
    let line = output
        .lines()
        .find(|line| line.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no row for {name} in:\n{output}"));
    line.split_whitespace().map(str::to_string).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_gets_and_cordons_the_nodes() {
    let bundle = bundle();
    let kube =
        FakeKube::start(FakeKubeOptions::new(bundle.kubernetes_ca().clone())).await.expect("a fake API");
    kube.add_node("cp-0", "10.0.0.10".parse().unwrap(), true);
    kube.add_node("w-0", "10.0.0.20".parse().unwrap(), false);
    kube.add_node("w-1", "10.0.0.21".parse().unwrap(), false);
    kube.set_node_ready("w-1", false);

    let dir = tempfile::tempdir().expect("a temporary directory");
    let config =
        cms_talos::kubeconfig(&bundle, "acme", &kube.endpoint(), UserRole::Admin, TTL).expect("a kubeconfig");
    std::fs::write(dir.path().join("kubeconfig"), config).expect("the kubeconfig written");

    let plain = kubectl(dir.path(), &["get", "nodes"]).await;
    let header: Vec<&str> = plain.lines().next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(header, ["NAME", "STATUS", "ROLES", "AGE", "VERSION"], "{plain}");
    assert_eq!(row(&plain, "cp-0")[1..3], ["Ready", "control-plane"], "{plain}");
    assert_eq!(row(&plain, "w-0")[1..3], ["Ready", "<none>"], "{plain}");
    assert_eq!(row(&plain, "w-1")[1..3], ["NotReady", "<none>"], "{plain}");
    assert_eq!(row(&plain, "w-1")[4], "v1.32.0", "{plain}");

    let wide = kubectl(dir.path(), &["get", "nodes", "-o", "wide"]).await;
    assert!(wide.lines().next().unwrap_or_default().contains("INTERNAL-IP"), "{wide}");
    assert_eq!(row(&wide, "w-0")[5], "10.0.0.20", "{wide}");
    assert_eq!(row(&wide, "w-1")[1], "NotReady", "{wide}");

    let cordoned = kubectl(dir.path(), &["cordon", "w-0"]).await;
    assert!(cordoned.contains("node/w-0 cordoned"), "{cordoned}");
    assert!(kube.nodes().iter().any(|node| node.name == "w-0" && node.unschedulable));
    let after = kubectl(dir.path(), &["get", "nodes"]).await;
    assert_eq!(row(&after, "w-0")[1], "Ready,SchedulingDisabled", "{after}");

    let json = kubectl(dir.path(), &["get", "node", "cp-0", "-o", "json"]).await;
    let node: serde_json::Value = serde_json::from_str(&json).expect("a Node");
    assert_eq!(node["status"]["addresses"][0]["address"], "10.0.0.10");

    let requests = kube.requests();
    assert!(requests.iter().any(|request| request.path.starts_with("/api/v1/nodes")), "{requests:?}");
    assert!(requests.iter().all(|request| request.client.as_deref() == Some("admin")), "{requests:?}");
}

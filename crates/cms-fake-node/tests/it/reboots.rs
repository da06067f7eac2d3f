//! Configs that need a reboot and configs Talos applies at once, reboots
//! and boot times, and the kubelet and API server versions a node's config
//! names, from the real client to a configured fake node.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cms_fake_node::{FakeKube, FakeKubeOptions, FakeNode, FakeNodeOptions};
use cms_nodeapi::{ApplyMode, ApplyRequest, NodeApi, NodeApiError, UpgradeRequest};

use crate::installer_image;
use cms_talos::SecretsBundle;
use tonic::Code;

use crate::{admin, bundle, client, target};

const REBOOT: Duration = Duration::from_secs(1);

/// A worker of Talos 1.13: one `v1alpha1` document.
const WORKER: &str = "\
version: v1alpha1
debug: false
machine:
  type: worker
  token: 8fm2v3.q7k1c9x0b2n4m6l8
  certSANs:
  - 127.0.0.1
  kubelet:
    image: ghcr.io/siderolabs/kubelet:v1.32.0
    defaultRuntimeSeccompProfileEnabled: true
  install:
    disk: /dev/sda
    image: ghcr.io/siderolabs/installer:v1.13.0
  features:
    diskQuotaSupport: true
cluster:
  controlPlane:
    endpoint: https://127.0.0.1:6443
  clusterName: acme
  token: abcdef.0123456789abcdef
";

/// A control plane of Talos 1.14: a `v1alpha1` document and typed ones.
const CONTROL_PLANE: &str = "\
version: v1alpha1
debug: false
machine:
  type: controlplane
  token: 8fm2v3.q7k1c9x0b2n4m6l8
  certSANs:
  - 127.0.0.1
  features:
    diskQuotaSupport: true
cluster:
  token: abcdef.0123456789abcdef
---
apiVersion: v1alpha1
kind: KubeletConfig
image: ghcr.io/siderolabs/kubelet:v1.32.0
---
apiVersion: v1alpha1
kind: KubeAPIServerConfig
image: registry.k8s.io/kube-apiserver:v1.32.0
";

/// A node that booted with `config`, registered with a fake Kubernetes API.
async fn booted(bundle: &SecretsBundle, config: &str) -> (FakeNode, FakeKube) {
    let kube = FakeKube::start(FakeKubeOptions::new(bundle.kubernetes_ca().clone())).await.unwrap();
    let options = FakeNodeOptions::new(bundle.os_ca().clone())
        .hostname("n-0")
        .booted(config)
        .kube(kube.clone())
        .reboot_delay(REBOOT)
        .upgrade_delay(REBOOT);
    (FakeNode::start(options).await.unwrap(), kube)
}

fn apply(config: &str, mode: ApplyMode) -> ApplyRequest {
    ApplyRequest { config: config.as_bytes().to_vec(), mode, dry_run: false }
}

/// The Node's readiness and kubelet version.
fn node_state(kube: &FakeKube) -> (bool, String) {
    let node = kube.nodes().into_iter().next().expect("a registered Node");
    (node.ready, node.kubelet_version)
}

/// Waits until the node answers again.
async fn back(node: &FakeNode, bundle: &SecretsBundle) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while client().version(&target(node), &admin(bundle)).await.is_err() {
        assert!(Instant::now() < deadline, "the node never came back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn seconds(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).unwrap().as_secs()
}

#[tokio::test]
async fn no_reboot_refuses_a_change_that_needs_one_and_applies_the_kubelet_at_once() {
    let bundle = bundle();
    let (node, kube) = booted(&bundle, WORKER).await;
    let (client, admin) = (client(), admin(&bundle));
    assert_eq!(node_state(&kube), (true, "v1.32.0".to_string()), "the kubelet of the booted config");

    let files = WORKER.replace(
        "  features:\n",
        "  files:\n  - path: /var/x\n    op: create\n    content: x\n  features:\n",
    );
    let err = client
        .apply_configuration(&target(&node), &admin, apply(&files, ApplyMode::NoReboot))
        .await
        .unwrap_err();
    assert!(err.is_reboot_required(), "{err}");
    assert!(err.to_string().contains(".machine.files added"), "{err}");
    assert_eq!(node.config().as_deref(), Some(WORKER), "nothing was applied");

    let kubelet = WORKER.replace("kubelet:v1.32.0", "kubelet:v1.33.1");
    let outcome = client
        .apply_configuration(&target(&node), &admin, apply(&kubelet, ApplyMode::NoReboot))
        .await
        .unwrap();
    assert_eq!(
        (outcome.mode, outcome.mode_details.as_str()),
        (ApplyMode::NoReboot, "Applied configuration without a reboot")
    );
    assert_eq!(node_state(&kube), (true, "v1.33.1".to_string()), "the kubelet restarted with its new image");
    assert_eq!(node.kubelet_version().as_deref(), Some("v1.33.1"));
    assert!(node.reboots().is_empty());

    let outcome =
        client.apply_configuration(&target(&node), &admin, apply(&kubelet, ApplyMode::Auto)).await.unwrap();
    assert_eq!(outcome.mode, ApplyMode::NoReboot, "no change: AUTO needs no reboot");
    let typed_only = "apiVersion: v1alpha1\nkind: KubeletConfig\nimage: ghcr.io/siderolabs/kubelet:v1.34.0\n";
    let err = client
        .apply_configuration(&target(&node), &admin, apply(typed_only, ApplyMode::Auto))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("doesn't contain v1alpha1"), "{err}");
}

#[tokio::test]
async fn auto_reboots_for_a_change_that_needs_it_and_the_node_comes_back_with_it() {
    let bundle = bundle();
    let (node, kube) = booted(&bundle, WORKER).await;
    let (client, admin) = (client(), admin(&bundle));
    let first_boot = client.boot_time(&target(&node), &admin).await.unwrap();
    assert_eq!(first_boot, seconds(node.boot_time()));

    let new = WORKER
        .replace("diskQuotaSupport: true", "diskQuotaSupport: false")
        .replace("kubelet:v1.32.0", "kubelet:v1.33.1");
    let outcome =
        client.apply_configuration(&target(&node), &admin, apply(&new, ApplyMode::Auto)).await.unwrap();
    assert_eq!(outcome.mode, ApplyMode::Reboot);
    assert!(outcome.mode_details.starts_with("Applied configuration with a reboot: "), "{outcome:?}");
    assert!(outcome.mode_details.contains(".machine.features.diskQuotaSupport changed"), "{outcome:?}");
    assert_eq!(node.reboots().len(), 1);
    let down = client.version(&target(&node), &admin).await.unwrap_err();
    let unavailable =
        matches!(&down, NodeApiError::Status { status, .. } if status.code() == Code::Unavailable);
    assert!(unavailable, "{down}");
    assert_eq!(node_state(&kube), (false, "v1.32.0".to_string()), "NotReady while it reboots");
    assert_eq!(node.config().as_deref(), Some(WORKER), "the new config runs after the reboot");

    back(&node, &bundle).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while !node_state(&kube).0 {
        assert!(Instant::now() < deadline, "the Node never turned Ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(node_state(&kube), (true, "v1.33.1".to_string()));
    assert_eq!(node.config().as_deref(), Some(new.as_str()));
    assert!(node.boot_time() > node.reboots()[0], "booted after the reboot began");
    let boot = client.boot_time(&target(&node), &admin).await.unwrap();
    assert_eq!(boot, seconds(node.boot_time()));
    assert!(boot >= first_boot);
}

#[tokio::test]
async fn reboot_mode_always_reboots_and_staged_waits_for_the_next_reboot() {
    let bundle = bundle();
    let (node, kube) = booted(&bundle, WORKER).await;
    let (client, admin) = (client(), admin(&bundle));

    let outcome =
        client.apply_configuration(&target(&node), &admin, apply(WORKER, ApplyMode::Reboot)).await.unwrap();
    assert_eq!(
        (outcome.mode, outcome.mode_details.as_str()),
        (ApplyMode::Reboot, "Applied configuration with a reboot")
    );
    back(&node, &bundle).await;
    assert_eq!(node.reboots().len(), 1);

    let staged = WORKER.replace("kubelet:v1.32.0", "kubelet:v1.33.1");
    let outcome =
        client.apply_configuration(&target(&node), &admin, apply(&staged, ApplyMode::Staged)).await.unwrap();
    assert_eq!(outcome.mode, ApplyMode::Staged);
    assert_eq!(node.config().as_deref(), Some(WORKER), "staged, not applied");
    let dry = ApplyRequest { dry_run: true, ..apply(&staged, ApplyMode::Auto) };
    let outcome = client.apply_configuration(&target(&node), &admin, dry).await.unwrap();
    assert_eq!(outcome.mode, ApplyMode::NoReboot);
    assert!(outcome.mode_details.starts_with("Dry run summary:"), "{outcome:?}");
    assert!(outcome.mode_details.contains("v1alpha1.machine.kubelet.image changed"), "{outcome:?}");
    assert_eq!(node.config().as_deref(), Some(WORKER), "a dry run applies nothing");
    assert_eq!(node_state(&kube).1, "v1.32.0");

    let upgrade =
        UpgradeRequest { image: installer_image("1.13.1"), preserve: false, stage: false, force: false };
    client.upgrade(&target(&node), &admin, upgrade).await.unwrap();
    back(&node, &bundle).await;
    assert_eq!(node.reboots().len(), 2, "an upgrade is a reboot");
    assert_eq!(node.config().as_deref(), Some(staged.as_str()), "the staged config runs after the reboot");
    assert_eq!(client.version(&target(&node), &admin).await.unwrap().tag, "v1.13.1");
}

#[tokio::test]
async fn control_planes_name_their_api_server_version() {
    let bundle = bundle();
    let (cp, kube) = booted(&bundle, CONTROL_PLANE).await;
    assert_eq!(cp.api_server_version().as_deref(), Some("v1.32.0"));
    assert_eq!(node_state(&kube), (true, "v1.32.0".to_string()));
    let (client, admin) = (client(), admin(&bundle));
    let moved = CONTROL_PLANE.replace(":v1.32.0", ":v1.33.1");
    let outcome =
        client.apply_configuration(&target(&cp), &admin, apply(&moved, ApplyMode::NoReboot)).await.unwrap();
    assert_eq!(outcome.mode, ApplyMode::NoReboot, "typed documents apply at once");
    assert_eq!(cp.api_server_version().as_deref(), Some("v1.33.1"));
    assert_eq!(node_state(&kube), (true, "v1.33.1".to_string()));

    let (worker, _) = booted(&bundle, WORKER).await;
    assert_eq!(worker.api_server_version(), None, "a worker runs no API server");
    assert_eq!(worker.kubelet_version().as_deref(), Some("v1.32.0"));
}

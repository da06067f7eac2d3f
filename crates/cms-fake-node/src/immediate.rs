//! Whether Talos can apply a new machine config to a running node without
//! a reboot, as `CanApplyImmediate` of machined's v1alpha1 runtime decides
//! (`internal/app/machined/pkg/runtime/v1alpha1/v1alpha1_runtime.go`).
//!
//! Talos compares the `v1alpha1` documents of the running and the new
//! config after copying into the new one the parts it applies at once:
//! `debug` and `cluster` whole; when both have `machine`, its `ca`,
//! `acceptedCAs`, `time`, `certSANs`, `install`, `network`, `sysfs`,
//! `sysctls`, `logging`, `controlPlane`, `kubelet`, `kernel`, `registries`,
//! `pods`, `seccompProfiles`, `nodeAnnotations`, `nodeLabels` and
//! `nodeTaints`; and when both have `machine.features`, its
//! `kubernetesTalosAPIAccess`, `kubePrism`, `hostDNS`, `imageCache` and
//! `nodeAddressSortAlgorithm`. Any other difference needs a reboot (the
//! machine type, `machine.files`, `machine.env`, `machine.udev`, the other
//! features...). The other documents of a multi-document config
//! (`KubeletConfig`, `KubeAPIServerConfig`, ...) are not compared: changes
//! to them always apply at once. A running config without a `v1alpha1`
//! document needs a reboot, as in Talos. [`changes`] lists what differs
//! between two configs, document by document, for a dry run's summary.

use serde_json::{Map, Value};

use crate::config::MachineConfig;

/// The top-level keys of the `v1alpha1` document applied at once.
const DOCUMENT_KEYS: &[&str] = &["debug", "cluster"];

/// The keys of `machine` applied at once.
const MACHINE_KEYS: &[&str] = &[
    "ca",
    "acceptedCAs",
    "time",
    "certSANs",
    "install",
    "network",
    "sysfs",
    "sysctls",
    "logging",
    "controlPlane",
    "kubelet",
    "kernel",
    "registries",
    "pods",
    "seccompProfiles",
    "nodeAnnotations",
    "nodeLabels",
    "nodeTaints",
];

/// The keys of `machine.features` applied at once.
const FEATURE_KEYS: &[&str] =
    &["kubernetesTalosAPIAccess", "kubePrism", "hostDNS", "imageCache", "nodeAddressSortAlgorithm"];

/// Why changing the running config `running` to `new` needs a reboot, with
/// the paths that differ, or `None` when Talos applies it at once.
pub(crate) fn reboot_needed(running: &str, new: &str) -> Option<String> {
    let running = MachineConfig::parse(running).ok();
    let Some(running) = running.as_ref().and_then(MachineConfig::v1alpha1) else {
        return Some("current config is not v1alpha1".into());
    };
    let new = MachineConfig::parse(new).ok();
    let Some(new) = new.as_ref().and_then(MachineConfig::v1alpha1) else {
        return Some("new config is not v1alpha1".into());
    };
    let (mut running, mut new) = (running.clone(), new.clone());
    strip(&mut running, &mut new);
    let mut paths = Vec::new();
    differences("", &running, &new, &mut paths);
    if paths.is_empty() {
        return None;
    }
    Some(format!("this config change can't be applied in immediate mode\ndiff:\n{}", paths.join("\n")))
}

/// The paths where the documents of two configs differ, for a dry run's
/// diff: each document is named by its kind (and `name`, if it has one),
/// the `v1alpha1` one as `v1alpha1`.
pub(crate) fn changes(running: &str, new: &str) -> Vec<String> {
    let (running, new) = (by_document(running), by_document(new));
    let mut paths = Vec::new();
    differences("", &running, &new, &mut paths);
    paths.into_iter().map(|path| path.trim_start_matches('.').to_string()).collect()
}

/// A config's documents in one mapping, by name.
fn by_document(config: &str) -> Value {
    let documents: Vec<Value> = serde_saphyr::from_multiple(config).unwrap_or_default();
    let named = documents.into_iter().filter(|doc| !doc.is_null()).map(|doc| {
        let kind = doc["kind"].as_str().unwrap_or("v1alpha1");
        let name = match doc["name"].as_str() {
            Some(name) => format!("{kind}/{name}"),
            None => kind.to_string(),
        };
        (name, doc)
    });
    Value::Object(named.collect())
}

/// Drops from both documents what Talos applies at once.
fn strip(running: &mut Value, new: &mut Value) {
    let (Some(running), Some(new)) = (running.as_object_mut(), new.as_object_mut()) else {
        return;
    };
    remove(running, new, DOCUMENT_KEYS);
    let (Some(running), Some(new)) = (object(running, "machine"), object(new, "machine")) else {
        return;
    };
    remove(running, new, MACHINE_KEYS);
    if let (Some(running), Some(new)) = (object(running, "features"), object(new, "features")) {
        remove(running, new, FEATURE_KEYS);
    }
}

/// The mapping under `key`, when there is one (Talos's non-nil pointer).
fn object<'a>(map: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    map.get_mut(key).and_then(Value::as_object_mut)
}

fn remove(running: &mut Map<String, Value>, new: &mut Map<String, Value>, keys: &[&str]) {
    for key in keys {
        running.remove(*key);
        new.remove(*key);
    }
}

/// Appends the paths (`.machine.files`, `.machine.env.http_proxy`, ...)
/// where the two values differ, each with how; a missing key and `null`
/// are the same.
fn differences(path: &str, running: &Value, new: &Value, paths: &mut Vec<String>) {
    match (running, new) {
        (Value::Object(running), Value::Object(new)) => {
            let mut keys: Vec<&String> = running.keys().chain(new.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let (before, after) = (&running.get(key), &new.get(key));
                let (before, after) = (before.unwrap_or(&Value::Null), after.unwrap_or(&Value::Null));
                differences(&format!("{path}.{key}"), before, after, paths);
            }
        }
        (Value::Array(running), Value::Array(new)) if running.len() == new.len() => {
            for (index, (before, after)) in running.iter().zip(new).enumerate() {
                differences(&format!("{path}[{index}]"), before, after, paths);
            }
        }
        (Value::Null, Value::Null) => {}
        (Value::Null, _) => paths.push(format!("{path} added")),
        (_, Value::Null) => paths.push(format!("{path} removed")),
        (before, after) if before != after => paths.push(format!("{path} changed")),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker of Talos 1.13 as the renderer writes it: one document.
    const LEGACY_WORKER: &str = "\
version: v1alpha1
debug: false
machine:
  type: worker
  token: 8fm2v3.q7k1c9x0b2n4m6l8
  ca:
    crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==
  certSANs:
  - 10.0.0.21
  kubelet:
    image: ghcr.io/siderolabs/kubelet:v1.32.0
    defaultRuntimeSeccompProfileEnabled: true
    disableManifestsDirectory: true
  install:
    disk: /dev/sda
    image: ghcr.io/siderolabs/installer:v1.13.0
    wipe: false
    grubUseUKICmdline: true
  features:
    diskQuotaSupport: true
    kubePrism:
      enabled: true
      port: 7445
    hostDNS:
      enabled: true
      forwardKubeDNSToHost: true
cluster:
  id: Y2x1c3Rlci1pZA==
  secret: Y2x1c3Rlci1zZWNyZXQ=
  controlPlane:
    endpoint: https://10.0.0.10:6443
  clusterName: acme
  network:
    dnsDomain: cluster.local
    podSubnets:
    - 10.244.0.0/16
    serviceSubnets:
    - 10.96.0.0/12
  token: abcdef.0123456789abcdef
  ca:
    crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==
  discovery:
    enabled: true
";

    /// A control plane of Talos 1.14: a trimmed `v1alpha1` document and
    /// typed ones.
    const MULTIDOC_CONTROL_PLANE: &str = "\
version: v1alpha1
debug: false
machine:
  type: controlplane
  token: 8fm2v3.q7k1c9x0b2n4m6l8
  ca:
    crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==
    key: LS0tLS1CRUdJTiBFRDI1NTE5IFBSSVZBVEUgS0VZLS0tLS0K
  certSANs:
  - 10.0.0.10
  features:
    diskQuotaSupport: true
cluster:
  token: abcdef.0123456789abcdef
  etcd:
    ca:
      crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==
      key: LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tCg==
---
apiVersion: v1alpha1
kind: KubeClusterConfig
clusterName: acme
endpoint: https://10.0.0.10:6443
---
apiVersion: v1alpha1
kind: KubeletConfig
image: ghcr.io/siderolabs/kubelet:v1.32.0
defaultRuntimeSeccompProfileEnabled: true
---
apiVersion: v1alpha1
kind: KubePrismConfig
port: 7445
---
apiVersion: v1alpha1
kind: KubeAPIServerConfig
image: registry.k8s.io/kube-apiserver:v1.32.0
certExtraSANs:
- 10.0.0.10
";

    fn check(running: &str, edit: impl Fn(&str) -> String, expected: Option<&[&str]>) {
        let new = edit(running);
        assert_ne!(running, new, "the edit changed nothing");
        let reason = reboot_needed(running, &new);
        match expected {
            None => assert_eq!(reason, None),
            Some(paths) => {
                let reason = reason.expect("a reboot is needed");
                assert!(
                    reason.starts_with("this config change can't be applied in immediate mode"),
                    "{reason}"
                );
                let listed: Vec<&str> = reason.lines().skip(2).collect();
                assert_eq!(listed, paths, "{reason}");
            }
        }
    }

    #[test]
    fn the_same_config_needs_no_reboot() {
        assert_eq!(reboot_needed(LEGACY_WORKER, LEGACY_WORKER), None);
        assert_eq!(reboot_needed(MULTIDOC_CONTROL_PLANE, MULTIDOC_CONTROL_PLANE), None);
    }

    #[test]
    fn kubelet_install_cluster_and_allowed_features_apply_at_once() {
        let kubelet = |c: &str| c.replace("kubelet:v1.32.0", "kubelet:v1.33.1");
        check(LEGACY_WORKER, kubelet, None);
        check(LEGACY_WORKER, |c| c.replace("installer:v1.13.0", "installer:v1.13.2"), None);
        check(LEGACY_WORKER, |c| c.replace("https://10.0.0.10:6443", "https://10.0.0.99:6443"), None);
        check(LEGACY_WORKER, |c| c.replace("  - 10.0.0.21\n", "  - 10.0.0.21\n  - 10.0.0.22\n"), None);
        check(LEGACY_WORKER, |c| c.replace("      port: 7445\n", "      port: 7446\n"), None);
        let labels = |c: &str| c.replace("  features:\n", "  nodeLabels:\n    zone: a\n  features:\n");
        check(LEGACY_WORKER, labels, None);
        check(LEGACY_WORKER, |c| c.replace("debug: false", "debug: true"), None);
    }

    #[test]
    fn other_machine_settings_need_a_reboot_naming_their_path() {
        check(
            LEGACY_WORKER,
            |c| c.replace("type: worker", "type: controlplane"),
            Some(&[".machine.type changed"]),
        );
        let files = |c: &str| {
            c.replace(
                "  features:\n",
                "  files:\n  - path: /var/etc/x\n    op: create\n    content: x\n  features:\n",
            )
        };
        check(LEGACY_WORKER, files, Some(&[".machine.files added"]));
        let quota = |c: &str| c.replace("    diskQuotaSupport: true\n", "");
        check(LEGACY_WORKER, quota, Some(&[".machine.features.diskQuotaSupport removed"]));
        let both = |c: &str| c.replace("type: worker", "type: controlplane").replace("8fm2v3", "9aa111");
        check(LEGACY_WORKER, both, Some(&[".machine.token changed", ".machine.type changed"]));
    }

    #[test]
    fn features_are_compared_whole_when_one_side_has_none() {
        let no_features = LEGACY_WORKER.replace(
            "  features:\n    diskQuotaSupport: true\n    kubePrism:\n      enabled: true\n      port: 7445\n    hostDNS:\n      enabled: true\n      forwardKubeDNSToHost: true\n",
            "",
        );
        let only_kube_prism =
            no_features.replace("cluster:\n", "  features:\n    kubePrism:\n      enabled: true\ncluster:\n");
        assert_eq!(
            reboot_needed(&no_features, &only_kube_prism).unwrap().lines().nth(2),
            Some(".machine.features added"),
        );
    }

    #[test]
    fn in_a_multidoc_config_only_the_v1alpha1_document_is_compared() {
        let kubelet = |c: &str| c.replace("kubelet:v1.32.0", "kubelet:v1.33.1");
        check(MULTIDOC_CONTROL_PLANE, kubelet, None);
        check(
            MULTIDOC_CONTROL_PLANE,
            |c| c.replace("kube-apiserver:v1.32.0", "kube-apiserver:v1.33.1"),
            None,
        );
        check(MULTIDOC_CONTROL_PLANE, |c| c.replace("port: 7445", "port: 7446"), None);
        let added =
            |c: &str| format!("{c}---\napiVersion: v1alpha1\nkind: KubeCoreDNSConfig\nenabled: true\n");
        check(MULTIDOC_CONTROL_PLANE, added, None);
        check(
            MULTIDOC_CONTROL_PLANE,
            |c| c.replace("- 10.0.0.10\n  features", "- 10.0.0.11\n  features"),
            None,
        );
        let etcd = |c: &str| c.replace("  etcd:\n", "  etcd:\n    advertisedSubnets:\n    - 10.0.0.0/24\n");
        check(MULTIDOC_CONTROL_PLANE, etcd, None);
        let worker = |c: &str| c.replace("type: controlplane", "type: worker");
        check(MULTIDOC_CONTROL_PLANE, worker, Some(&[".machine.type changed"]));
        let quota = |c: &str| c.replace("diskQuotaSupport: true", "diskQuotaSupport: false");
        check(MULTIDOC_CONTROL_PLANE, quota, Some(&[".machine.features.diskQuotaSupport changed"]));
    }

    #[test]
    fn a_dry_run_lists_the_changes_by_document() {
        assert!(changes(MULTIDOC_CONTROL_PLANE, MULTIDOC_CONTROL_PLANE).is_empty());
        let new = MULTIDOC_CONTROL_PLANE
            .replace("kubelet:v1.32.0", "kubelet:v1.33.1")
            .replace("debug: false", "debug: true");
        assert_eq!(
            changes(MULTIDOC_CONTROL_PLANE, &new),
            ["KubeletConfig.image changed", "v1alpha1.debug changed"]
        );
    }

    #[test]
    fn a_running_config_without_v1alpha1_needs_a_reboot() {
        let reason = reboot_needed("apiVersion: v1alpha1\nkind: KubeletConfig\n", LEGACY_WORKER);
        assert_eq!(reason.as_deref(), Some("current config is not v1alpha1"));
    }
}

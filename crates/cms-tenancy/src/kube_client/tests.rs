//! The pure parts of [`super::TenantKube`]: reading Nodes, choosing the pods
//! a drain moves, and describing failures.

use ::kube::core::Status;
use serde_json::{Value, json};

use super::*;

fn node(value: Value) -> Node {
    serde_json::from_value(value).expect("a Node")
}

fn pod(value: Value) -> Pod {
    serde_json::from_value(value).expect("a Pod")
}

#[test]
fn a_ready_node_has_its_addresses_and_no_reason() {
    let read = kube_node(node(json!({
        "metadata": {"name": "cp-1"},
        "spec": {"unschedulable": true},
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": "10.0.0.5"},
                {"type": "Hostname", "address": "cp-1"},
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.32.0", "architecture": "amd64", "bootID": "", "containerRuntimeVersion": "",
                "kernelVersion": "", "kubeProxyVersion": "", "machineID": "", "operatingSystem": "linux",
                "osImage": "Talos", "systemUUID": "",
            },
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"},
            ],
        },
    })));
    assert_eq!(
        read,
        KubeNode {
            name: "cp-1".into(),
            addresses: vec!["10.0.0.5".into(), "cp-1".into()],
            ready: true,
            reason: String::new(),
            unschedulable: true,
            kubelet_version: Some("1.32.0".into()),
            ..KubeNode::default()
        }
    );
}

#[test]
fn a_node_keeps_its_provider_id_labels_taints_and_resources() {
    let read = kube_node(node(json!({
        "metadata": {"name": "w-1", "labels": {"node.kubernetes.io/instance-type": "bare"}},
        "spec": {
            "providerID": "metal://10.0.0.7",
            "taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}, {"key": "x", "effect": "NoExecute"}],
        },
        "status": {"capacity": {"cpu": "4", "memory": "8Gi"}, "allocatable": {"cpu": "3800m", "pods": "110"}},
    })));
    assert_eq!(read.provider_id.as_deref(), Some("metal://10.0.0.7"));
    assert_eq!(read.labels["node.kubernetes.io/instance-type"], "bare");
    let taint = |key: &str, value: &str, effect: &str| KubeTaint {
        key: key.into(),
        value: value.into(),
        effect: effect.into(),
    };
    assert_eq!(read.taints, [taint("dedicated", "gpu", "NoSchedule"), taint("x", "", "NoExecute")]);
    assert_eq!(read.capacity["memory"], "8Gi");
    assert_eq!(read.allocatable["cpu"], "3800m");
    let empty = kube_node(node(json!({"metadata": {"name": "w-2"}, "spec": {"providerID": ""}})));
    assert_eq!(empty.provider_id, None, "an empty provider id is none");
}

#[test]
fn a_node_that_is_not_ready_says_why() {
    let read = kube_node(node(json!({
        "metadata": {"name": "w-1"},
        "status": {"conditions": [{
            "type": "Ready", "status": "False", "reason": "KubeletNotReady",
            "message": "container runtime network not ready",
        }]},
    })));
    assert!(!read.ready);
    assert!(!read.unschedulable, "no spec.unschedulable is schedulable");
    assert_eq!(read.reason, "KubeletNotReady: container runtime network not ready");

    let unknown = kube_node(node(json!({
        "metadata": {"name": "w-2"},
        "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]},
    })));
    assert_eq!((unknown.ready, unknown.reason.as_str()), (false, "Ready is \"Unknown\""));

    let fresh = kube_node(node(json!({"metadata": {"name": "w-3"}})));
    assert_eq!((fresh.ready, fresh.reason.as_str()), (false, "no Ready condition"));
    assert!(fresh.addresses.is_empty());
}

#[test]
fn a_drain_moves_running_pods_but_not_daemons_mirrors_or_finished_ones() {
    let plain = pod(json!({
        "metadata": {"namespace": "web", "name": "front-1",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "front", "uid": "1"}]},
        "status": {"phase": "Running"},
    }));
    assert!(moved_by_drain(&plain));
    assert!(moved_by_drain(&pod(json!({"metadata": {"name": "bare"}}))), "a pod with no status moves");

    let daemon = pod(json!({
        "metadata": {"namespace": "kube-system", "name": "flannel-x",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "flannel", "uid": "2"}]},
        "status": {"phase": "Running"},
    }));
    assert!(!moved_by_drain(&daemon));

    let mirror = pod(json!({
        "metadata": {"namespace": "kube-system", "name": "kube-apiserver-cp-1",
            "annotations": {"kubernetes.io/config.mirror": "abc"}},
        "status": {"phase": "Running"},
    }));
    assert!(!moved_by_drain(&mirror));

    for phase in ["Succeeded", "Failed"] {
        let finished = pod(json!({"metadata": {"name": "job-1"}, "status": {"phase": phase}}));
        assert!(!moved_by_drain(&finished), "{phase}");
    }
    let pending = pod(json!({"metadata": {"name": "p"}, "status": {"phase": "Pending"}}));
    assert!(moved_by_drain(&pending));
}

#[test]
fn an_answer_is_described_by_its_code_reason_and_message() {
    let refused = ::kube::Error::Api(
        Status::failure(
            "Cannot evict pod as it would violate the pod's disruption budget.",
            "TooManyRequests",
        )
        .with_code(429)
        .boxed(),
    );
    assert!(has_code(&refused, 429));
    assert!(!has_code(&refused, 404));
    assert_eq!(
        describe(&refused),
        "429 TooManyRequests: Cannot evict pod as it would violate the pod's disruption budget."
    );

    // What the client makes of a body that is no Status, as `/readyz` answers.
    let report = "[+]ping ok\n[-]etcd failed: reason withheld\n[+]log ok\nreadyz check failed\n";
    let not_ready =
        ::kube::Error::Api(Status::failure(report, "Failed to parse error data").with_code(500).boxed());
    assert_eq!(describe(&not_ready), "500: [-]etcd failed: reason withheld");
    let plain = ::kube::Error::Api(
        Status::failure("busy\nlater", "Failed to parse error data").with_code(503).boxed(),
    );
    assert_eq!(describe(&plain), "503: busy; later");
}

#[derive(Debug, thiserror::Error)]
#[error("client error (Connect)")]
struct Connect(#[source] std::io::Error);

#[test]
fn a_call_without_an_answer_is_described_by_its_causes() {
    let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
    let err = ::kube::Error::Service(Box::new(Connect(refused)));
    assert!(!has_code(&err, 404));
    assert_eq!(describe(&err), "ServiceError: client error (Connect): connection refused");
}

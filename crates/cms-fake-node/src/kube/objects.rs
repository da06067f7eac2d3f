//! The JSON the fake Kubernetes API answers: Nodes, Pods, their lists and
//! `meta.k8s.io/v1` Tables, `Status` objects and the discovery documents.

use std::net::SocketAddr;
use std::time::SystemTime;

use serde_json::{Value, json};

use crate::kube::state::{NodeRecord, PodKind, PodRecord};

/// The Kubernetes version the fake API claims, and a kubelet whose
/// version no config named.
pub(crate) const KUBERNETES_VERSION: &str = "v1.32.0";
/// The label that makes a Node a control plane.
const CONTROL_PLANE_LABEL: &str = "node-role.kubernetes.io/control-plane";

/// A `Status` object: `Failure` unless `code` is below 300.
pub(crate) fn status(code: u16, reason: &str, message: &str) -> Value {
    let outcome = if code < 300 { "Success" } else { "Failure" };
    let mut status = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": outcome,
        "message": message,
        "code": code,
    });
    if !reason.is_empty() {
        status["reason"] = json!(reason);
    }
    status
}

/// The 404 of a missing object, as the real API words it.
pub(crate) fn not_found(resource: &str, name: &str) -> Value {
    let mut status = status(404, "NotFound", &format!("{resource} \"{name}\" not found"));
    status["details"] = json!({"name": name, "kind": resource});
    status
}

/// `GET /version`.
pub(crate) fn version() -> Value {
    json!({
        "major": "1",
        "minor": "32",
        "gitVersion": KUBERNETES_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2024-12-11T00:00:00Z",
        "goVersion": "go1.23.3",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// `GET /api`: the legacy group's one version.
pub(crate) fn api_versions(addr: SocketAddr) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr.to_string()}],
    })
}

/// `GET /apis`: no groups beyond the legacy one.
pub(crate) fn api_groups() -> Value {
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": []})
}

/// `GET /api/v1`: Nodes, Pods and their eviction subresource, and Events.
pub(crate) fn api_resources() -> Value {
    json!({
        "kind": "APIResourceList",
        "groupVersion": "v1",
        "resources": [
            {
                "name": "nodes", "singularName": "node", "namespaced": false, "kind": "Node",
                "verbs": ["delete", "get", "list", "patch"], "shortNames": ["no"],
            },
            {
                "name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod",
                "verbs": ["get", "list"], "shortNames": ["po"], "categories": ["all"],
            },
            {
                "name": "pods/eviction", "singularName": "", "namespaced": true,
                "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"],
            },
            {
                "name": "events", "singularName": "event", "namespaced": true, "kind": "Event",
                "verbs": ["list"], "shortNames": ["ev"],
            },
        ],
    })
}

/// A Node.
pub(crate) fn node(record: &NodeRecord, resource_version: u64) -> Value {
    let node = &record.node;
    let mut labels = json!({
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": node.name,
        "kubernetes.io/os": "linux",
    });
    if node.control_plane {
        labels[CONTROL_PLANE_LABEL] = json!("");
    }
    let taints = match node.unschedulable {
        true => json!([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]),
        false => json!([]),
    };
    let mut spec = json!({"unschedulable": node.unschedulable, "taints": taints});
    if !node.provider_id.is_empty() {
        spec["providerID"] = json!(node.provider_id);
    }
    let (status, reason, message) = match node.ready {
        true => ("True", "KubeletReady", "kubelet is posting ready status"),
        false => ("False", "KubeletNotReady", "kubelet is not ready"),
    };
    json!({
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": metadata(&node.name, None, &record.uid, record.created, resource_version, labels),
        "spec": spec,
        "status": {
            // What a kubelet on a small VM posts: its machine, less what it
            // reserves for the system.
            "capacity": {"cpu": "2", "memory": "4026500Ki", "pods": "110", "ephemeral-storage": "20470Mi"},
            "allocatable": {"cpu": "1950m", "memory": "3595400Ki", "pods": "110", "ephemeral-storage": "19304Mi"},
            "addresses": [
                {"type": "InternalIP", "address": node.address.to_string()},
                {"type": "Hostname", "address": node.name},
            ],
            "conditions": [{
                "type": "Ready",
                "status": status,
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": timestamp(SystemTime::now()),
                "lastTransitionTime": timestamp(record.transitioned),
            }],
            "nodeInfo": {
                "kubeletVersion": node.kubelet_version,
                "kubeProxyVersion": node.kubelet_version,
                "osImage": "Talos",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "containerRuntimeVersion": "containerd://2.0.0",
                "kernelVersion": "6.12.0-talos",
                "machineID": "", "systemUUID": "", "bootID": "",
            },
        },
    })
}

/// A Pod: DaemonSet pods name their DaemonSet as controller, mirror pods
/// carry the mirror annotation and name their Node as owner.
pub(crate) fn pod(record: &PodRecord, resource_version: u64) -> Value {
    let pod = &record.pod;
    let mut metadata =
        metadata(&pod.name, Some(&pod.namespace), &record.uid, record.created, resource_version, json!({}));
    match pod.kind {
        PodKind::Plain => {}
        PodKind::DaemonSet => {
            let daemon_set = pod.name.rsplit_once('-').map_or(pod.name.as_str(), |(owner, _)| owner);
            metadata["ownerReferences"] = json!([{
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "name": daemon_set,
                "uid": format!("00000000-0000-4000-9000-{:012x}", name_hash(daemon_set)),
                "controller": true,
                "blockOwnerDeletion": true,
            }]);
        }
        PodKind::Mirror => {
            metadata["annotations"] = json!({
                "kubernetes.io/config.mirror": format!("{:016x}", name_hash(&pod.name)),
                "kubernetes.io/config.source": "file",
            });
            metadata["ownerReferences"] = json!([{
                "apiVersion": "v1",
                "kind": "Node",
                "name": pod.node,
                "uid": format!("00000000-0000-4000-a000-{:012x}", name_hash(&pod.node)),
                "controller": true,
            }]);
        }
    }
    json!({
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": metadata,
        "spec": {
            "nodeName": pod.node,
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
        },
        "status": {"phase": "Running"},
    })
}

/// A list of `kind` (such as `NodeList`) holding `items`.
pub(crate) fn list(kind: &str, items: Vec<Value>, resource_version: u64) -> Value {
    json!({
        "kind": kind,
        "apiVersion": "v1",
        "metadata": {"resourceVersion": resource_version.to_string()},
        "items": items,
    })
}

/// The Table that `kubectl get nodes` prints: NAME, STATUS, ROLES, AGE,
/// VERSION, and INTERNAL-IP with `-o wide`.
pub(crate) fn node_table(nodes: &[Value], resource_version: u64) -> Value {
    let columns = [("Name", 0), ("Status", 0), ("Roles", 0), ("Age", 0), ("Version", 0), ("Internal-IP", 1)];
    let rows = nodes.iter().map(|node| {
        let ready = node["status"]["conditions"][0]["status"] == "True";
        let mut status = String::from(if ready { "Ready" } else { "NotReady" });
        if node["spec"]["unschedulable"] == true {
            status.push_str(",SchedulingDisabled");
        }
        let role = match node["metadata"]["labels"].get(CONTROL_PLANE_LABEL) {
            Some(_) => "control-plane",
            None => "<none>",
        };
        let cells = json!([
            node["metadata"]["name"],
            status,
            role,
            age(&node["metadata"]["creationTimestamp"]),
            node["status"]["nodeInfo"]["kubeletVersion"],
            node["status"]["addresses"][0]["address"],
        ]);
        (cells, node)
    });
    table(&columns, rows, resource_version)
}

/// The Table that `kubectl get pods` prints.
pub(crate) fn pod_table(pods: &[Value], resource_version: u64) -> Value {
    let columns = [("Name", 0), ("Ready", 0), ("Status", 0), ("Restarts", 0), ("Age", 0), ("Node", 1)];
    let rows = pods.iter().map(|pod| {
        let cells = json!([
            pod["metadata"]["name"],
            "1/1",
            pod["status"]["phase"],
            0,
            age(&pod["metadata"]["creationTimestamp"]),
            pod["spec"]["nodeName"],
        ]);
        (cells, pod)
    });
    table(&columns, rows, resource_version)
}

/// A `meta.k8s.io/v1` Table whose rows carry their object's metadata as a
/// `PartialObjectMetadata`.
fn table<'a>(
    columns: &[(&str, u8)],
    rows: impl Iterator<Item = (Value, &'a Value)>,
    resource_version: u64,
) -> Value {
    let columns: Vec<Value> = columns
        .iter()
        .map(|(name, priority)| {
            let format = if *name == "Name" { "name" } else { "" };
            json!({"name": name, "type": "string", "format": format, "description": "", "priority": priority})
        })
        .collect();
    let rows: Vec<Value> = rows
        .map(|(cells, object)| {
            let object = json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": object["metadata"],
            });
            json!({"cells": cells, "object": object})
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version.to_string()},
        "columnDefinitions": columns,
        "rows": rows,
    })
}

fn metadata(
    name: &str,
    namespace: Option<&str>,
    uid: &str,
    created: SystemTime,
    resource_version: u64,
    labels: Value,
) -> Value {
    let mut metadata = json!({
        "name": name,
        "uid": uid,
        "resourceVersion": resource_version.to_string(),
        "creationTimestamp": timestamp(created),
        "labels": labels,
    });
    if let Some(namespace) = namespace {
        metadata["namespace"] = json!(namespace);
    }
    metadata
}

/// RFC 3339 to the second, as Kubernetes writes times.
fn timestamp(at: SystemTime) -> String {
    humantime::format_rfc3339_seconds(at).to_string()
}

/// The AGE column of an object created at `created`: `42s`, `5m`, `3h`, `2d`.
fn age(created: &Value) -> String {
    let created = created.as_str().and_then(|text| humantime::parse_rfc3339(text).ok());
    let seconds = created.and_then(|at| at.elapsed().ok()).map_or(0, |elapsed| elapsed.as_secs());
    match seconds {
        0..120 => format!("{seconds}s"),
        120..7_200 => format!("{}m", seconds / 60),
        7_200..172_800 => format!("{}h", seconds / 3_600),
        _ => format!("{}d", seconds / 86_400),
    }
}

/// A stable number for a name, for the uids of owners the fake has not got.
fn name_hash(name: &str) -> u64 {
    name.bytes()
        .fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3))
        & 0xffff_ffff_ffff
}

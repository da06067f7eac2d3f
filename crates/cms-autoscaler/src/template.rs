//! The template node of a group: what a new machine of it looks like to the
//! scheduler, for the autoscaler's scale-up simulations. Labels, taints and
//! resources come from a running Node of the group when it has one, and
//! the resources of an `oci` group from its shape's `ocpus` and `memoryGb`
//! when it has none; a group with neither has no template (`Unimplemented`,
//! which the autoscaler takes as "use a real node").

use std::collections::{BTreeMap, HashMap};

use cms_model::NodeGroup;
use cms_tenancy::KubeNode;
use prost::Message;

use crate::error::AutoscalerError;
use crate::proto::k8s;

/// Pods a node runs by default (the kubelet's `maxPods`).
const DEFAULT_PODS: &str = "110";
/// Virtual CPUs per OCI OCPU (x86).
const VCPUS_PER_OCPU: f64 = 2.0;

/// The template `v1.Node` of `group`, serialized, from `sample` (a Ready
/// Node of the group) when there is one.
pub(crate) fn template(group: &NodeGroup, sample: Option<&KubeNode>) -> Result<Vec<u8>, AutoscalerError> {
    let name = format!("template-node-for-{}", group.metadata.name);
    let shape = group.spec.provider_class().map(|class| class.shape).unwrap_or_default();
    let (capacity, allocatable) = match (sample, shape_capacity(group)) {
        (Some(node), _) if !node.capacity.is_empty() => {
            let allocatable = if node.allocatable.is_empty() { &node.capacity } else { &node.allocatable };
            (node.capacity.clone(), allocatable.clone())
        }
        (_, Some(capacity)) => (capacity.clone(), capacity),
        _ => {
            return Err(AutoscalerError::Unimplemented(format!(
                "node group {:?} has no running Node and no shape whose resources are known",
                group.metadata.name
            )));
        }
    };
    let mut labels: BTreeMap<String, String> = sample
        .map(|node| {
            node.labels
                .iter()
                .filter(|(key, _)| !per_node_label(key))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    labels.insert("kubernetes.io/hostname".into(), name.clone());
    labels.entry("kubernetes.io/os".into()).or_insert_with(|| "linux".into());
    if !shape.is_empty() {
        labels.entry("node.kubernetes.io/instance-type".into()).or_insert(shape);
    }
    let taints = sample
        .map(|node| {
            node.taints
                .iter()
                .filter(|taint| !transient_taint(&taint.key))
                .map(|taint| k8s::Taint {
                    key: Some(taint.key.clone()),
                    value: Some(taint.value.clone()).filter(|value| !value.is_empty()),
                    effect: Some(taint.effect.clone()),
                })
                .collect()
        })
        .unwrap_or_default();
    let quantities = |map: BTreeMap<String, String>| -> HashMap<String, k8s::Quantity> {
        map.into_iter().map(|(name, value)| (name, k8s::Quantity { string: Some(value) })).collect()
    };
    let node = k8s::Node {
        metadata: Some(k8s::ObjectMeta {
            name: Some(name),
            labels: labels.into_iter().collect(),
            annotations: HashMap::new(),
        }),
        spec: Some(k8s::NodeSpec { provider_id: None, unschedulable: None, taints }),
        status: Some(k8s::NodeStatus {
            capacity: quantities(capacity),
            allocatable: quantities(allocatable),
            conditions: vec![k8s::NodeCondition {
                r#type: Some("Ready".into()),
                status: Some("True".into()),
                reason: Some("KubeletReady".into()),
                message: None,
            }],
            node_info: Some(k8s::NodeSystemInfo {
                kubelet_version: sample
                    .and_then(|node| node.kubelet_version.as_ref())
                    .map(|v| format!("v{v}")),
                operating_system: Some("linux".into()),
                architecture: None,
            }),
        }),
    };
    Ok(node.encode_to_vec())
}

/// The resources an `oci` group's shape gives: `ocpus` and `memoryGb`.
fn shape_capacity(group: &NodeGroup) -> Option<BTreeMap<String, String>> {
    let config = &group.spec.provider_config;
    let ocpus = config.get("ocpus")?.as_f64().filter(|ocpus| *ocpus > 0.0)?;
    let memory = config.get("memoryGb")?.as_f64().filter(|memory| *memory > 0.0)?;
    let cpu_millis = (ocpus * VCPUS_PER_OCPU * 1000.0).round() as u64;
    let memory_mi = (memory * 1024.0).round() as u64;
    Some(BTreeMap::from([
        ("cpu".to_string(), format!("{cpu_millis}m")),
        ("memory".to_string(), format!("{memory_mi}Mi")),
        ("pods".to_string(), DEFAULT_PODS.to_string()),
    ]))
}

/// Labels that belong to one Node, not to its group.
fn per_node_label(key: &str) -> bool {
    key == "kubernetes.io/hostname" || key.starts_with("csi.volume.kubernetes.io/")
}

/// Taints Kubernetes and the autoscaler put on a Node for a while: not part
/// of the group's shape.
fn transient_taint(key: &str) -> bool {
    key.starts_with("node.kubernetes.io/")
        || key.starts_with("node.cloudprovider.kubernetes.io/")
        || key == "ToBeDeletedByClusterAutoscaler"
        || key == "DeletionCandidateOfClusterAutoscaler"
}

#[cfg(test)]
mod tests {
    use cms_model::{NodeGroupSpec, ObjectMeta};
    use cms_tenancy::KubeTaint;
    use serde_json::json;

    use super::*;

    fn group(class: &str, config: serde_json::Value) -> NodeGroup {
        NodeGroup {
            metadata: ObjectMeta::named("workers"),
            spec: NodeGroupSpec {
                name: "workers".into(),
                count: 1,
                provider_class: class.into(),
                provider_config: config.as_object().cloned().unwrap_or_default(),
                ..NodeGroupSpec::default()
            },
            status: Default::default(),
        }
    }

    fn decode(bytes: &[u8]) -> k8s::Node {
        k8s::Node::decode(bytes).unwrap()
    }

    #[test]
    fn an_oci_shape_gives_its_resources() {
        let node = decode(
            &template(&group("oci:VM.Standard.E4.Flex", json!({"ocpus": 2, "memoryGb": 16})), None).unwrap(),
        );
        let status = node.status.unwrap();
        assert_eq!(status.capacity["cpu"].string.as_deref(), Some("4000m"));
        assert_eq!(status.capacity["memory"].string.as_deref(), Some("16384Mi"));
        let labels = node.metadata.unwrap().labels;
        assert_eq!(labels["node.kubernetes.io/instance-type"], "VM.Standard.E4.Flex");
    }

    #[test]
    fn a_running_node_lends_its_labels_taints_and_resources() {
        let sample = KubeNode {
            name: "workers-0".into(),
            labels: BTreeMap::from([
                ("kubernetes.io/hostname".into(), "workers-0".into()),
                ("pool".into(), "batch".into()),
            ]),
            taints: vec![
                KubeTaint { key: "dedicated".into(), value: "batch".into(), effect: "NoSchedule".into() },
                KubeTaint {
                    key: "node.kubernetes.io/not-ready".into(),
                    value: String::new(),
                    effect: "NoExecute".into(),
                },
            ],
            capacity: BTreeMap::from([("cpu".into(), "8".into()), ("memory".into(), "32Gi".into())]),
            allocatable: BTreeMap::from([("cpu".into(), "7800m".into())]),
            ..KubeNode::default()
        };
        let node = decode(&template(&group("metal:bare", json!({})), Some(&sample)).unwrap());
        let labels = node.metadata.unwrap().labels;
        assert_eq!(labels["pool"], "batch");
        assert_eq!(labels["kubernetes.io/hostname"], "template-node-for-workers");
        let taints = node.spec.unwrap().taints;
        assert_eq!(taints.len(), 1, "transient taints are not the group's: {taints:?}");
        assert_eq!(taints[0].key.as_deref(), Some("dedicated"));
        let status = node.status.unwrap();
        assert_eq!(status.capacity["memory"].string.as_deref(), Some("32Gi"));
        assert_eq!(status.allocatable["cpu"].string.as_deref(), Some("7800m"));
    }

    #[test]
    fn a_group_with_nothing_known_has_no_template() {
        let err = template(&group("metal:bare", json!({})), None).unwrap_err();
        assert_eq!(err.code(), tonic::Code::Unimplemented);
    }
}

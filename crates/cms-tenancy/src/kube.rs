//! A tenant's Kubernetes API as the reconciler uses it: [`KubeClient`] is
//! the seam; [`TenantKube`] the real client, on `kube` (kube-rs), signed in
//! with a short-lived admin client certificate that the service issues from
//! the tenant's Kubernetes CA, at the tenant's control-plane endpoint.

use std::collections::BTreeMap;

use async_trait::async_trait;
use cms_model::Machine;

use crate::error::TenancyError;

pub use crate::kube_client::TenantKube;

/// One Kubernetes Node, as the reconciler reads it.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeNode {
    pub name: String,
    /// Its addresses (`InternalIP`, `ExternalIP`, `Hostname`), as the Node lists them.
    pub addresses: Vec<String>,
    /// Its `Ready` condition is `True`.
    pub ready: bool,
    /// Why it is not ready: the `Ready` condition's reason and message, or
    /// that it has none; empty when ready.
    pub reason: String,
    /// Cordoned: `spec.unschedulable`.
    pub unschedulable: bool,
    /// The kubelet's version, `status.nodeInfo.kubeletVersion` without its
    /// leading `v` (such as `1.32.0`); `None` when it reports none.
    pub kubelet_version: Option<String>,
    /// `spec.providerID`; `None` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
    /// Its labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Its taints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<KubeTaint>,
    /// `status.capacity`: resource name to quantity, as Kubernetes writes it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, String>,
    /// `status.allocatable`, likewise.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocatable: BTreeMap<String, String>,
}

/// The Node of `machine`: one that lists the machine's IP, or is named as it.
pub fn node_of<'a>(machine: &Machine, nodes: &'a [KubeNode]) -> Option<&'a KubeNode> {
    let ip = machine.ip();
    nodes
        .iter()
        .find(|node| ip.as_ref().is_some_and(|ip| node.addresses.contains(ip)))
        .or_else(|| nodes.iter().find(|node| node.name == machine.metadata.name))
}

/// One taint of a Node.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct KubeTaint {
    pub key: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

/// One core/v1 Event, as a support bundle shows it.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeEvent {
    pub namespace: String,
    pub name: String,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub kind: String,
    pub reason: String,
    pub message: String,
    /// The object it is about: `Kind/name`, or `Kind/namespace/name`.
    pub object: String,
    /// The component that reported it, such as `kubelet`.
    pub source: String,
    pub count: i32,
    /// When it was last seen (RFC 3339): `lastTimestamp`, else `eventTime`,
    /// else when it was created.
    pub last_seen: String,
}

/// What one round of draining a node left.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Drain {
    /// `namespace/name` of each pod a drain moves that is still on the node
    /// (neither a DaemonSet's nor a mirror pod, not finished).
    pub remaining: Vec<String>,
    /// Those of `remaining` whose eviction a PodDisruptionBudget refused
    /// (HTTP 429) in this round.
    pub blocked: Vec<String>,
}

impl Drain {
    /// No pod is left to move.
    pub fn done(&self) -> bool {
        self.remaining.is_empty()
    }
}

/// Why a Kubernetes API call failed.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// No client can be made: the tenant has no secrets or endpoint yet, or
    /// its kubeconfig does not load.
    #[error("no Kubernetes client: {0}")]
    Client(#[source] TenancyError),
    /// The API did not answer, or answered with an error.
    #[error("{0}")]
    Api(String),
}

/// The Kubernetes API calls the reconciler makes, each with the tenant's
/// admin credentials at its control-plane endpoint.
#[cfg_attr(any(test, feature = "testsuite"), mockall::automock)]
#[async_trait]
pub trait KubeClient: Send + Sync + 'static {
    /// `GET /readyz`: `Ok` when the API server says it is ready.
    async fn readyz(&self, tenant: &str) -> Result<(), KubeError>;

    /// Every Node of the tenant's cluster.
    async fn nodes(&self, tenant: &str) -> Result<Vec<KubeNode>, KubeError>;

    /// Marks the Node unschedulable (a no-op when it already is, or is gone).
    async fn cordon(&self, tenant: &str, node: &str) -> Result<(), KubeError>;

    /// One round of a drain: asks the eviction API to evict every pod on
    /// the Node that a drain moves, and gives what is left. A refusal by a
    /// PodDisruptionBudget is no error; the pod stays in `remaining`.
    async fn evict(&self, tenant: &str, node: &str) -> Result<Drain, KubeError>;

    /// Deletes the Node object (a no-op when it is gone).
    async fn delete_node(&self, tenant: &str, node: &str) -> Result<(), KubeError>;

    /// Sets the Node's `spec.providerID`, which the API server lets go only
    /// from empty to a value, as a cloud's controller does (a no-op when
    /// the Node is gone).
    async fn set_provider_id(&self, tenant: &str, node: &str, provider_id: &str) -> Result<(), KubeError> {
        let _ = (tenant, node, provider_id);
        Err(KubeError::Api("this Kubernetes client does not set provider ids".into()))
    }

    /// The newest `limit` core/v1 Events of every namespace, newest first.
    /// The API lists them in no order of time, so a bounded number of them
    /// is read, page by page, and sorted.
    async fn events(&self, tenant: &str, limit: usize) -> Result<Vec<KubeEvent>, KubeError> {
        let _ = (tenant, limit);
        Err(KubeError::Api("this Kubernetes client does not list events".into()))
    }
}

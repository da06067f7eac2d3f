//! What the fake Kubernetes API holds: its Nodes, Pods and Events, the
//! evictions it accepted, the Nodes it deleted and every request it got.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use crate::etcd::FakeEtcd;

/// One Node as the fake API holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeKubeNode {
    pub name: String,
    /// Its `InternalIP`.
    pub address: IpAddr,
    /// Whether its `Ready` condition is `True`.
    pub ready: bool,
    /// Whether it is cordoned (`spec.unschedulable`).
    pub unschedulable: bool,
    /// Whether it has the label `node-role.kubernetes.io/control-plane`.
    pub control_plane: bool,
    /// `status.nodeInfo.kubeletVersion`, such as `v1.32.0`: a fake node's
    /// is the tag of the kubelet image its config names.
    pub kubelet_version: String,
    /// `spec.providerID`: empty as Talos registers it on metal; set once,
    /// as the API server allows.
    pub provider_id: String,
}

/// What owns a fake Pod, which decides whether a drain evicts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodKind {
    /// No owner: a drain evicts it.
    Plain,
    /// Owned by a DaemonSet (`metadata.ownerReferences`): a drain skips it.
    DaemonSet,
    /// A static pod's mirror (annotation `kubernetes.io/config.mirror`): a
    /// drain skips it.
    Mirror,
}

/// One Pod as the fake API holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakePod {
    pub namespace: String,
    pub name: String,
    /// The Node it runs on (`spec.nodeName`).
    pub node: String,
    pub kind: PodKind,
}

/// One request the fake API got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeRequest {
    /// The HTTP method, such as `GET`.
    pub method: String,
    /// The path with its query, such as `/api/v1/pods?fieldSelector=...`.
    pub path: String,
    /// The common name of the client certificate, if it has one.
    pub client: Option<String>,
}

/// A Node with what its JSON needs beyond [`FakeKubeNode`].
#[derive(Debug, Clone)]
pub(crate) struct NodeRecord {
    pub(crate) node: FakeKubeNode,
    pub(crate) uid: String,
    pub(crate) created: SystemTime,
    /// When `ready` last changed.
    pub(crate) transitioned: SystemTime,
}

/// A Pod with what its JSON needs beyond [`FakePod`].
#[derive(Debug, Clone)]
pub(crate) struct PodRecord {
    pub(crate) pod: FakePod,
    pub(crate) uid: String,
    pub(crate) created: SystemTime,
}

/// The data behind the lock.
#[derive(Debug)]
pub(crate) struct Data {
    pub(crate) nodes: BTreeMap<String, NodeRecord>,
    /// By `namespace/name`.
    pub(crate) pods: BTreeMap<String, PodRecord>,
    /// How many more evictions of `namespace/name` answer 429.
    pub(crate) blocked: BTreeMap<String, u32>,
    pub(crate) evictions: Vec<String>,
    pub(crate) deleted_nodes: Vec<String>,
    pub(crate) requests: Vec<KubeRequest>,
    /// Events, oldest first (`events.rs`).
    pub(crate) events: Vec<crate::kube::events::EventRecord>,
    pub(crate) api_ready: bool,
    /// Grows with every change; lists answer it as `resourceVersion`.
    pub(crate) resource_version: u64,
    next_uid: u64,
}

impl Data {
    /// A fresh uid that looks like Kubernetes's.
    pub(crate) fn uid(&mut self) -> String {
        self.next_uid += 1;
        format!("00000000-0000-4000-8000-{:012x}", self.next_uid)
    }

    /// Notes a change: the resource version grows.
    pub(crate) fn changed(&mut self) {
        self.resource_version += 1;
    }
}

/// The state that the fake API's handle and its server share.
#[derive(Debug)]
pub(crate) struct Store {
    data: Mutex<Data>,
    /// Until this etcd is bootstrapped, the API answers nothing but 503.
    pub(crate) etcd: Option<FakeEtcd>,
    /// Where the API listens, for discovery's `serverAddressByClientCIDRs`.
    pub(crate) addr: SocketAddr,
}

impl Store {
    pub(crate) fn new(etcd: Option<FakeEtcd>, addr: SocketAddr) -> Store {
        let data = Data {
            nodes: BTreeMap::new(),
            pods: BTreeMap::new(),
            blocked: BTreeMap::new(),
            evictions: Vec::new(),
            deleted_nodes: Vec::new(),
            requests: Vec::new(),
            events: Vec::new(),
            api_ready: true,
            resource_version: 1,
            next_uid: 0,
        };
        Store { data: Mutex::new(data), etcd, addr }
    }

    pub(crate) fn data(&self) -> MutexGuard<'_, Data> {
        self.data.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Why the API cannot answer yet, if it cannot: etcd is not bootstrapped.
    pub(crate) fn etcd_down(&self) -> Option<&'static str> {
        let down = self.etcd.as_ref().is_some_and(|etcd| etcd.bootstrapped_by().is_none());
        down.then_some("etcd is not bootstrapped yet")
    }
}

/// `namespace/name`, the key of a pod.
pub(crate) fn pod_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

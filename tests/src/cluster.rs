//! A fake cluster of Talos nodes for tests of the real server: fake nodes
//! (in this process) on the metal hosts' addresses, sharing one etcd, and
//! a fake Kubernetes API server that serves with a certificate of the
//! tenant's Kubernetes CA on the first control plane's address, port 6443,
//! where the tenant's derived control-plane endpoint points. Nodes take
//! their configs in maintenance mode, join etcd and register their
//! Kubernetes Nodes as Talos's would.

use std::net::{IpAddr, SocketAddr};

use cms_fake_node::{FakeEtcd, FakeKube, FakeKubeOptions, FakeNode, FakeNodeOptions};
use cms_talos::SecretsBundle;
use serde_json::Value;

/// The Kubernetes API port of the control-plane endpoint.
pub const KUBERNETES_API_PORT: u16 = 6443;

/// One host of a fake cluster: the machine id it will be, its address and role.
#[derive(Debug, Clone)]
pub struct Host {
    pub machine: String,
    pub ip: IpAddr,
    pub control_plane: bool,
}

impl Host {
    pub fn new(machine: &str, ip: &str, control_plane: bool) -> Host {
        Host { machine: machine.to_string(), ip: ip.parse().expect("an IP address"), control_plane }
    }

    /// The hostname its Talos (and so its Node and etcd member) has.
    pub fn hostname(&self) -> String {
        hostname(&self.machine)
    }
}

/// The hostname of the fake node that becomes `machine`.
pub fn hostname(machine: &str) -> String {
    format!("talos-{machine}")
}

/// A fake node of the cluster.
#[derive(Debug)]
pub struct ClusterNode {
    pub host: Host,
    pub node: FakeNode,
}

impl ClusterNode {
    /// The calls so far, as JSON (`{seq, atMillis, method, node,
    /// clientCertificate, payload}`).
    pub fn calls(&self) -> Vec<Value> {
        self.node.calls().iter().map(|call| call.to_json()).collect()
    }

    /// The calls of one method so far.
    pub fn calls_of(&self, method: &str) -> Vec<Value> {
        self.calls().into_iter().filter(|call| call["method"] == method).collect()
    }
}

/// The fake cluster; everything stops when it is dropped.
#[derive(Debug)]
pub struct FakeCluster {
    pub etcd: FakeEtcd,
    pub kube: FakeKube,
    pub nodes: Vec<ClusterNode>,
}

impl FakeCluster {
    /// Starts a fake node per host, in maintenance mode on `IP:50000`, and
    /// the Kubernetes API on the first control plane's `IP:6443`.
    /// `options` adjusts each node's options, by host.
    pub async fn start(
        bundle: &SecretsBundle,
        hosts: &[Host],
        options: impl Fn(&Host, FakeNodeOptions) -> FakeNodeOptions,
    ) -> FakeCluster {
        let etcd = FakeEtcd::default();
        let first = hosts.iter().find(|host| host.control_plane).expect("a control plane");
        let kube_options = FakeKubeOptions::new(bundle.kubernetes_ca().clone())
            .listen(SocketAddr::new(first.ip, KUBERNETES_API_PORT))
            .etcd(etcd.clone());
        let kube = FakeKube::start(kube_options).await.expect("the fake Kubernetes API starts");
        let mut nodes = Vec::new();
        for host in hosts {
            let base = FakeNodeOptions::new(bundle.os_ca().clone())
                .listen(SocketAddr::new(host.ip, 50000))
                .maintenance()
                .hostname(host.hostname())
                .etcd(etcd.clone())
                .kube(kube.clone());
            let node = FakeNode::start(options(host, base)).await.expect("a fake node starts");
            nodes.push(ClusterNode { host: host.clone(), node });
        }
        FakeCluster { etcd, kube, nodes }
    }

    /// The fake node that becomes `machine`.
    pub fn node(&self, machine: &str) -> &ClusterNode {
        self.nodes.iter().find(|node| node.host.machine == machine).expect("a node of the cluster")
    }

    /// Every call of `method` to any node, as `(machine, call)`.
    pub fn calls_of(&self, method: &str) -> Vec<(String, Value)> {
        let mut calls: Vec<(String, Value)> = self
            .nodes
            .iter()
            .flat_map(|node| node.calls_of(method).into_iter().map(|call| (node.host.machine.clone(), call)))
            .collect();
        calls.sort_by_key(|(_, call)| call["seq"].as_u64());
        calls
    }
}

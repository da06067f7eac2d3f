//! A fake Kubernetes API server for tests: HTTPS with client certificates
//! from the cluster's Kubernetes CA, the discovery kubectl needs, and Nodes
//! and Pods that the test sets up and the client cordons, drains (by
//! evictions, which a disruption budget may refuse) and deletes, and the
//! Events its components would write of that (`events.rs`). Each Node
//! reports its kubelet's version (`status.nodeInfo.kubeletVersion`), as a
//! kubelet does.
//!
//! Given a [`FakeEtcd`], it answers only once that etcd is bootstrapped:
//! until then every request gets a 503 `Status` (and `/readyz` a 500).

mod events;
mod objects;
mod routes;
mod server;
mod state;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::SystemTime;

use cms_talos::CertificateAuthority;
use rustls::server::ServerConfig;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

pub use state::{FakeKubeNode, FakePod, KubeRequest, PodKind};

use crate::etcd::FakeEtcd;
use crate::node::FakeNodeError;
use crate::tls::{Clients, issue, server_config, serving_config};
use state::{NodeRecord, PodRecord, Store, pod_key};

/// How a fake Kubernetes API starts.
#[derive(Debug)]
pub struct FakeKubeOptions {
    listen: SocketAddr,
    ca: CertificateAuthority,
    etcd: Option<FakeEtcd>,
}

impl FakeKubeOptions {
    /// An API on `127.0.0.1:0` whose serving certificate `kubernetes_ca`
    /// issues and which takes only client certificates that it signed.
    pub fn new(kubernetes_ca: CertificateAuthority) -> FakeKubeOptions {
        FakeKubeOptions {
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            ca: kubernetes_ca,
            etcd: None,
        }
    }

    /// Where to listen; the certificate also names this IP.
    pub fn listen(mut self, addr: SocketAddr) -> FakeKubeOptions {
        self.listen = addr;
        self
    }

    /// The cluster's etcd: the API answers only once it is bootstrapped.
    pub fn etcd(mut self, etcd: FakeEtcd) -> FakeKubeOptions {
        self.etcd = Some(etcd);
        self
    }
}

/// A running fake Kubernetes API. Clones share it; it stops when the last
/// clone is dropped, or at [`FakeKube::stop`].
#[derive(Debug, Clone)]
pub struct FakeKube {
    inner: Arc<Inner>,
}

/// What the clones share: the state, the TLS of the moment and the
/// serving task.
#[derive(Debug)]
struct Inner {
    store: Arc<Store>,
    tls: Arc<RwLock<Arc<ServerConfig>>>,
    sans: Vec<String>,
    /// The issuing CA and the accepted ones that [`FakeKube::trust`] set last.
    trusted: Mutex<Option<(String, Vec<String>)>>,
    /// Bumped as the API server restarts with new CAs.
    restarts: tokio::sync::watch::Sender<u64>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(task) = self.task.lock().unwrap_or_else(PoisonError::into_inner).take() {
            task.abort();
        }
    }
}

impl FakeKube {
    /// Binds, then serves on the current tokio runtime.
    pub async fn start(options: FakeKubeOptions) -> Result<FakeKube, FakeNodeError> {
        let mut sans: Vec<String> = vec!["127.0.0.1".into(), "::1".into(), "localhost".into()];
        let ip = options.listen.ip().to_string();
        if !options.listen.ip().is_unspecified() && !sans.contains(&ip) {
            sans.insert(0, ip);
        }
        let config = server_config(&options.ca, &options.ca, &sans, b"http/1.1")?;
        let listener = TcpListener::bind(options.listen)
            .await
            .map_err(|source| FakeNodeError::Listen { addr: options.listen, source })?;
        let addr =
            listener.local_addr().map_err(|source| FakeNodeError::Listen { addr: options.listen, source })?;
        let store = Arc::new(Store::new(options.etcd, addr));
        let tls = Arc::new(RwLock::new(config));
        let current = tls.clone();
        let acceptor =
            move || TlsAcceptor::from(current.read().unwrap_or_else(PoisonError::into_inner).clone());
        let (restarts, restarted) = tokio::sync::watch::channel(0);
        let task = tokio::spawn(server::serve(listener, acceptor, store.clone(), restarted));
        let inner =
            Inner { store, tls, sans, trusted: Mutex::default(), restarts, task: Mutex::new(Some(task)) };
        Ok(FakeKube { inner: Arc::new(inner) })
    }

    /// Serves from `issuing` and takes client certificates from it and from
    /// the CAs of `accepted` (PEM), as a control plane's API server does
    /// once it runs a config naming them (`cluster.ca` and
    /// `cluster.acceptedCAs`, or `KubeAPIServerCAConfig`). When they
    /// changed, the API server restarts with them, as its static pod does:
    /// the connections made before close.
    pub fn trust(&self, issuing: &CertificateAuthority, accepted: &[String]) -> Result<(), FakeNodeError> {
        let wanted = (issuing.cert_pem().to_string(), accepted.to_vec());
        let mut trusted = self.inner.trusted.lock().unwrap_or_else(PoisonError::into_inner);
        if trusted.as_ref() == Some(&wanted) {
            return Ok(());
        }
        let serving = issue(issuing, &self.inner.sans)?;
        let mut clients = vec![issuing.cert_pem().to_string()];
        clients.extend(accepted.iter().cloned());
        let config = serving_config(&serving, issuing.cert_pem(), Clients::SignedBy(&clients), b"http/1.1")?;
        *self.inner.tls.write().unwrap_or_else(PoisonError::into_inner) = config;
        if trusted.replace(wanted).is_some() {
            self.inner.restarts.send_modify(|restarts| *restarts += 1);
        }
        Ok(())
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.inner.store.addr
    }

    /// The API's URL, `https://IP:PORT`, for a kubeconfig's `server`.
    pub fn endpoint(&self) -> String {
        format!("https://{}", self.addr())
    }

    /// Registers a Ready Node, as a kubelet does when it starts; a Node
    /// already there is Ready again, at this address and role. A new Node's
    /// kubelet claims the API's own version, `v1.32.0`; an existing one's
    /// keeps its version.
    pub fn add_node(&self, name: &str, address: IpAddr, control_plane: bool) {
        self.upsert_node(name, address, control_plane, None);
    }

    /// Registers a Ready Node whose kubelet runs `kubelet_version` (such as
    /// `v1.32.0`), or updates it, as a kubelet does when it (re)starts.
    pub fn register_node(&self, name: &str, address: IpAddr, control_plane: bool, kubelet_version: &str) {
        self.upsert_node(name, address, control_plane, Some(kubelet_version));
    }

    fn upsert_node(&self, name: &str, address: IpAddr, control_plane: bool, kubelet_version: Option<&str>) {
        let mut data = self.inner.store.data();
        let now = SystemTime::now();
        match data.nodes.get_mut(name) {
            Some(record) => {
                if !record.node.ready {
                    record.transitioned = now;
                }
                let became_ready = !record.node.ready;
                record.node.ready = true;
                record.node.address = address;
                record.node.control_plane = control_plane;
                if let Some(version) = kubelet_version {
                    record.node.kubelet_version = version.to_string();
                }
                if became_ready {
                    node_event(&mut data, name, "NodeReady", "kubelet");
                }
            }
            None => {
                let node = FakeKubeNode {
                    name: name.to_string(),
                    address,
                    ready: true,
                    unschedulable: false,
                    provider_id: String::new(),
                    control_plane,
                    kubelet_version: kubelet_version.unwrap_or(objects::KUBERNETES_VERSION).to_string(),
                };
                let uid = data.uid();
                data.nodes
                    .insert(name.to_string(), NodeRecord { node, uid, created: now, transitioned: now });
                node_event(&mut data, name, "Starting", "kubelet");
                node_event(&mut data, name, "RegisteredNode", "node-controller");
                node_event(&mut data, name, "NodeReady", "kubelet");
            }
        }
        data.changed();
    }

    /// Makes a Node Ready or NotReady (its `Ready` condition `False`, reason
    /// `KubeletNotReady`); a missing Node stays missing.
    pub fn set_node_ready(&self, name: &str, ready: bool) {
        let mut data = self.inner.store.data();
        if let Some(record) = data.nodes.get_mut(name)
            && record.node.ready != ready
        {
            record.node.ready = ready;
            record.transitioned = SystemTime::now();
            data.changed();
            node_event(&mut data, name, if ready { "NodeReady" } else { "NodeNotReady" }, "kubelet");
        }
    }

    /// Makes `/readyz` answer `ok`, or fail with a 500 (`false`).
    pub fn set_api_ready(&self, ready: bool) {
        self.inner.store.data().api_ready = ready;
    }

    /// The Nodes, by name.
    pub fn nodes(&self) -> Vec<FakeKubeNode> {
        self.inner.store.data().nodes.values().map(|record| record.node.clone()).collect()
    }

    /// Puts a running Pod on `node`; one of the same name is replaced.
    pub fn add_pod(&self, namespace: &str, name: &str, node: &str, kind: PodKind) {
        let mut data = self.inner.store.data();
        let pod = FakePod { namespace: namespace.into(), name: name.into(), node: node.into(), kind };
        let uid = data.uid();
        data.pods.insert(pod_key(namespace, name), PodRecord { pod, uid, created: SystemTime::now() });
        data.changed();
    }

    /// Refuses the next `times` evictions of a Pod with a 429, as a
    /// PodDisruptionBudget that allows no disruption does.
    pub fn block_evictions(&self, namespace: &str, name: &str, times: u32) {
        self.inner.store.data().blocked.insert(pod_key(namespace, name), times);
    }

    /// The Pods, by namespace and name.
    pub fn pods(&self) -> Vec<FakePod> {
        self.inner.store.data().pods.values().map(|record| record.pod.clone()).collect()
    }

    /// `namespace/name` of every eviction accepted, in order.
    pub fn evictions(&self) -> Vec<String> {
        self.inner.store.data().evictions.clone()
    }

    /// The names of the Nodes deleted, in order.
    pub fn deleted_nodes(&self) -> Vec<String> {
        self.inner.store.data().deleted_nodes.clone()
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<KubeRequest> {
        self.inner.store.data().requests.clone()
    }

    /// Stops listening and serving, whatever clones remain: new connections
    /// are refused.
    pub fn stop(self) {
        if let Some(task) = self.inner.task.lock().unwrap_or_else(PoisonError::into_inner).take() {
            task.abort();
        }
    }
}

/// Records what a kubelet or the node controller reports of Node `name`.
fn node_event(data: &mut state::Data, name: &str, reason: &str, component: &'static str) {
    let (kind, message) = match reason {
        "Starting" => ("Normal", "Starting kubelet.".to_string()),
        "RegisteredNode" => ("Normal", format!("Node {name} event: Registered Node {name} in Controller")),
        "NodeNotReady" => ("Normal", format!("Node {name} status is now: NodeNotReady")),
        other => ("Normal", format!("Node {name} status is now: {other}")),
    };
    let host = if component == "kubelet" { name } else { "" };
    events::about_node(data, name, events::Happened { kind, reason, message, component, host });
}

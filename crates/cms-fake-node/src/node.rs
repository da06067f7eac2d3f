//! Starting, steering and stopping one fake node.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crate::proto::machine::machine_service_server::MachineServiceServer;
use cms_talos::CertificateAuthority;
use thiserror::Error;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;

use crate::etcd::FakeEtcd;
use crate::identity::{Identity, Serving};
use crate::kube::FakeKube;
use crate::service::{Behaviour, Call, Failure, FakeMachineService, Method, OnCall, Shared};
use crate::tls::accept_loop;

/// Why a fake node or a fake Kubernetes API could not start.
#[derive(Debug, Error)]
pub enum FakeNodeError {
    #[error("could not listen on {addr}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("could not issue the serving certificate")]
    Certificate(#[from] cms_talos::TalosError),
    #[error("tls setup failed: {0}")]
    Tls(String),
}

/// How a fake node starts.
pub struct FakeNodeOptions {
    listen: SocketAddr,
    ca: CertificateAuthority,
    client_ca: Option<CertificateAuthority>,
    sans: Vec<String>,
    maintenance: bool,
    behaviour: Behaviour,
    on_call: Option<OnCall>,
    etcd: FakeEtcd,
    kube: Option<FakeKube>,
    booted: Option<String>,
}

impl std::fmt::Debug for FakeNodeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeNodeOptions")
            .field("listen", &self.listen)
            .field("maintenance", &self.maintenance)
            .field("booted", &self.booted.is_some())
            .field("behaviour", &self.behaviour)
            .finish_non_exhaustive()
    }
}

impl FakeNodeOptions {
    /// A node on `127.0.0.1:0` whose serving certificate `ca` issues and
    /// which accepts client certificates from `ca`, until it takes a config
    /// that names another OS CA; it runs `v1.14.0`, answers at once and
    /// never fails. A worker's config carries no CA key: the node's
    /// certificate then comes from a CA with the config's certificate that
    /// the process knows, `ca` or one a control plane's config carried, as
    /// trustd on a control plane would sign it.
    pub fn new(ca: CertificateAuthority) -> FakeNodeOptions {
        FakeNodeOptions {
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            ca,
            client_ca: None,
            sans: vec!["127.0.0.1".into(), "::1".into(), "localhost".into()],
            maintenance: false,
            behaviour: Behaviour {
                version: "v1.14.0".into(),
                hostname: "fake-node".into(),
                latency: Duration::ZERO,
                failure: None,
                upgrade_delay: Duration::from_secs(1),
                reboot_delay: Duration::from_secs(1),
                upgrade_failure: None,
                snapshot_size: 256 * 1024,
                log_interval: Duration::from_secs(1),
            },
            on_call: None,
            etcd: FakeEtcd::default(),
            kube: None,
            booted: None,
        }
    }

    /// Where to listen; the certificates also name this IP.
    pub fn listen(mut self, addr: SocketAddr) -> FakeNodeOptions {
        self.listen = addr;
        if !addr.ip().is_unspecified() {
            self.sans.push(addr.ip().to_string());
        }
        self
    }

    /// Accepts client certificates from this CA instead of `ca`, and
    /// instead of those a config names; maintenance mode asks for none.
    pub fn client_ca(mut self, ca: CertificateAuthority) -> FakeNodeOptions {
        self.client_ca = Some(ca);
        self
    }

    /// The Talos tag `Version` answers, such as `v1.14.0`.
    pub fn version(mut self, tag: impl Into<String>) -> FakeNodeOptions {
        self.behaviour.version = tag.into();
        self
    }

    /// The hostname in the answers' metadata.
    pub fn hostname(mut self, hostname: impl Into<String>) -> FakeNodeOptions {
        self.behaviour.hostname = hostname.into();
        self
    }

    /// How long every call waits before it answers.
    pub fn latency(mut self, latency: Duration) -> FakeNodeOptions {
        self.behaviour.latency = latency;
        self
    }

    /// Every call fails with this status.
    pub fn failure(mut self, code: tonic::Code, message: impl Into<String>) -> FakeNodeOptions {
        self.behaviour.failure = Some(Failure { code, message: message.into() });
        self
    }

    /// How long an upgrade keeps the node down before it runs the new tag
    /// (1 s unless set).
    pub fn upgrade_delay(mut self, delay: Duration) -> FakeNodeOptions {
        self.behaviour.upgrade_delay = delay;
        self
    }

    /// How long a config applied with a reboot (mode `REBOOT`, or `AUTO`
    /// for a change Talos cannot apply at once) keeps the node down before
    /// it runs the new config (1 s unless set).
    pub fn reboot_delay(mut self, delay: Duration) -> FakeNodeOptions {
        self.behaviour.reboot_delay = delay;
        self
    }

    /// Makes `Upgrade` fail with this message.
    pub fn upgrade_failure(mut self, message: impl Into<String>) -> FakeNodeOptions {
        self.behaviour.upgrade_failure = Some(message.into());
        self
    }

    /// How many bytes `EtcdSnapshot` streams (256 KiB unless set): the
    /// bytes of [`crate::snapshot_bytes`], in chunks of
    /// [`crate::SNAPSHOT_CHUNK`].
    pub fn snapshot_size(mut self, size: usize) -> FakeNodeOptions {
        self.behaviour.snapshot_size = size;
        self
    }

    /// How often each running service, and the kernel, writes a line to
    /// its log (1 s unless set), so that a followed log sees lines arrive.
    pub fn log_interval(mut self, interval: Duration) -> FakeNodeOptions {
        self.behaviour.log_interval = interval;
        self
    }

    /// Maintenance mode, as a metal host with no config: the node serves a
    /// certificate from a CA it made itself (no CA of the test's signed
    /// it), asks clients for none and serves them all, and answers
    /// `ApplyConfiguration` as Talos's maintenance service does. Once it
    /// takes a config, its identity follows the config's OS CA.
    pub fn maintenance(mut self) -> FakeNodeOptions {
        self.maintenance = true;
        self
    }

    /// A cloud instance that booted with `config` as its user data: the
    /// node starts configured with it, as if it had taken it over the node
    /// API (a control plane's config makes it one, waiting for or joining
    /// etcd, and with a Kubernetes API it registers its Node; its TLS
    /// identity is the config's OS CA), and never in maintenance mode,
    /// whatever [`FakeNodeOptions::maintenance`] said.
    pub fn booted(mut self, config: impl Into<String>) -> FakeNodeOptions {
        self.booted = Some(config.into());
        self
    }

    /// The etcd of the node's cluster: give every fake node of one cluster
    /// the same one. Unless set, the node has an etcd of its own.
    pub fn etcd(mut self, etcd: FakeEtcd) -> FakeNodeOptions {
        self.etcd = etcd;
        self
    }

    /// The Kubernetes API of the node's cluster: once the node takes a
    /// config it is a Ready Node there (a control plane if the config's
    /// machine type is `controlplane`), and once it is reset, NotReady.
    pub fn kube(mut self, kube: FakeKube) -> FakeNodeOptions {
        self.kube = Some(kube);
        self
    }

    /// Calls `on_call` with every call as it arrives.
    pub fn on_call(mut self, on_call: impl Fn(&Call) + Send + Sync + 'static) -> FakeNodeOptions {
        self.on_call = Some(Box::new(on_call));
        self
    }
}

/// A running fake node. Dropping it stops it.
#[derive(Debug)]
pub struct FakeNode {
    addr: SocketAddr,
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
}

impl FakeNode {
    /// Binds, then serves on the current tokio runtime.
    pub async fn start(options: FakeNodeOptions) -> Result<FakeNode, FakeNodeError> {
        let maintenance = options.maintenance && options.booted.is_none();
        let serving = match maintenance {
            true => Serving::Maintenance,
            false => Serving::Given,
        };
        let identity = Identity::new(options.ca, options.client_ca, options.sans, serving)?;
        let listener = TcpListener::bind(options.listen)
            .await
            .map_err(|source| FakeNodeError::Listen { addr: options.listen, source })?;
        let addr =
            listener.local_addr().map_err(|source| FakeNodeError::Listen { addr: options.listen, source })?;
        let shared = Arc::new(Shared {
            behaviour: Mutex::new(options.behaviour),
            boots: Mutex::new(crate::boot::Boots::new()),
            calls: Mutex::new(Vec::new()),
            on_call: options.on_call,
            etcd: options.etcd,
            control_plane: Default::default(),
            address: addr.ip(),
            kube: Mutex::new(options.kube),
            configured: Default::default(),
            maintenance: maintenance.into(),
            identity,
            hold: Mutex::new(None),
            held: Default::default(),
            recovered: Mutex::new(None),
            journal: crate::journal::Journal::new(),
        });
        shared.log_boot();
        if let Some(config) = &options.booted {
            let hostname = shared.behaviour().hostname.clone();
            shared.configured(&hostname, config.as_bytes());
        }
        let (sender, receiver) = mpsc::channel(64);
        let identity = shared.clone();
        let accept = tokio::spawn(accept_loop(listener, move || identity.identity.acceptor(), sender));
        let service = MachineServiceServer::new(FakeMachineService { shared: shared.clone() });
        let serve = tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(ReceiverStream::new(receiver))
                .await;
        });
        let interval = shared.behaviour().log_interval;
        let tick = tokio::spawn(crate::journal::tick(Arc::downgrade(&shared), interval));
        Ok(FakeNode { addr, shared, tasks: vec![accept, serve, tick] })
    }

    /// The bound address; put it in a machine's `spec.managementAddress`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every call so far, in arrival order.
    pub fn calls(&self) -> Vec<Call> {
        self.shared.calls().clone()
    }

    /// The etcd of the node's cluster.
    pub fn etcd(&self) -> &FakeEtcd {
        &self.shared.etcd
    }

    /// Gives the running node the Kubernetes API of its cluster, in place of
    /// any it had: a node that took a config registers there at once as a
    /// Ready Node, as its kubelet would on reaching a new API endpoint.
    pub fn set_kube(&self, kube: FakeKube) {
        self.shared.joined(kube);
    }

    /// The SHA-256 (lowercase hex) of the last snapshot uploaded whole with
    /// `EtcdRecover`, if any.
    pub fn recovered_sha256(&self) -> Option<String> {
        self.shared.recovered.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// When each reboot began (after a config that needed one, or an
    /// upgrade), in order.
    pub fn reboots(&self) -> Vec<SystemTime> {
        self.shared.boots().reboots.clone()
    }

    /// When the node last booted: at start, then as each reboot ends.
    /// `SystemStat` answers it in whole seconds.
    pub fn boot_time(&self) -> SystemTime {
        self.shared.boots().booted_at
    }

    /// The machine config the node runs, if it has one.
    pub fn config(&self) -> Option<String> {
        self.shared.boots().running.clone()
    }

    /// The tag of the kubelet image the running config names (such as
    /// `v1.32.0`): the version its Kubernetes Node reports.
    pub fn kubelet_version(&self) -> Option<String> {
        self.shared.running_config()?.kubelet_version()
    }

    /// On a control plane, the tag of the API server image its running
    /// config names (`cluster.apiServer.image`, or the `KubeAPIServerConfig`
    /// document's `image`); `None` on a worker.
    pub fn api_server_version(&self) -> Option<String> {
        if !self.shared.control_plane.load(std::sync::atomic::Ordering::SeqCst) {
            return None;
        }
        self.shared.running_config()?.api_server_version()
    }

    /// Whether the node is in maintenance mode: started with
    /// [`FakeNodeOptions::maintenance`] or reset since, and no config taken.
    pub fn in_maintenance(&self) -> bool {
        self.shared.maintenance.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The certificate (PEM) of the CA that issued the certificate new
    /// connections get: in maintenance mode one the node made itself, once
    /// configured the config's OS CA.
    pub fn server_ca(&self) -> String {
        self.shared.identity.issuer_pem()
    }

    /// Writes a line to a service's log (such as `machined`), as if the
    /// service wrote it: a test can then find it in what `Logs` streams.
    pub fn log(&self, service: &str, message: &str) {
        self.shared.journal.service(service, message);
    }

    /// How many followed `Logs` and `Dmesg` streams are open now: one whose
    /// client went away is closed.
    pub fn log_followers(&self) -> usize {
        self.shared.journal.followers.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Forgets the calls so far.
    pub fn clear_calls(&self) {
        self.shared.calls().clear();
    }

    /// The Talos tag `Version` answers from now on.
    pub fn set_version(&self, tag: impl Into<String>) {
        self.shared.behaviour().version = tag.into();
    }

    /// How long calls wait from now on.
    pub fn set_latency(&self, latency: Duration) {
        self.shared.behaviour().latency = latency;
    }

    /// Makes calls fail with a status from now on, or succeed again (`None`).
    pub fn set_failure(&self, failure: Option<Failure>) {
        self.shared.behaviour().failure = failure;
    }

    /// Holds calls of `method` before they arrive (`None` releases them):
    /// they wait as if still on the network, and one whose caller goes
    /// away meanwhile never reaches the node, nor its record.
    pub fn hold(&self, method: Option<Method>) {
        *self.shared.hold.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            method.map(|method| (method, 0));
    }

    /// Lets `passing` more calls of `method` through, then holds the
    /// next ones as [`FakeNode::hold`] does.
    pub fn hold_after(&self, method: Method, passing: usize) {
        *self.shared.hold.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some((method, passing));
    }

    /// How many calls are held now.
    pub fn held(&self) -> usize {
        self.shared.held.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Stops listening and serving: new connections are refused.
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for FakeNode {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        // A member of etcd that stops no longer answers.
        let hostname = self.shared.behaviour().hostname.clone();
        self.shared.etcd.stopped(&hostname);
    }
}

//! The fake `MachineService`: answers as the test set it, and records calls.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use crate::proto::common::{Data, Metadata};
use crate::proto::machine::machine_service_server::MachineService;
use crate::proto::machine::{
    ApplyConfigurationRequest, ApplyConfigurationResponse, BootstrapRequest, BootstrapResponse,
    EtcdForfeitLeadershipRequest, EtcdForfeitLeadershipResponse, EtcdLeaveClusterRequest,
    EtcdLeaveClusterResponse, EtcdMemberListRequest, EtcdMemberListResponse, EtcdRecoverResponse,
    EtcdRemoveMemberByIdRequest, EtcdRemoveMemberByIdResponse, EtcdSnapshotRequest, EtcdStatusResponse,
    FeaturesInfo, PlatformInfo, ResetRequest, ResetResponse, Upgrade, UpgradeRequest, UpgradeResponse,
    Version, VersionInfo, VersionResponse,
};
use tonic::{Request, Response, Status, Streaming};

use crate::etcd::FakeEtcd;
use crate::kube::FakeKube;
use crate::tls::PeerInfo;

/// Orders calls across every fake node of the process.
static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// The node API method a call named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Version,
    ApplyConfiguration,
    Upgrade,
    Bootstrap,
    EtcdMemberList,
    EtcdStatus,
    EtcdLeaveCluster,
    EtcdRemoveMemberById,
    EtcdForfeitLeadership,
    EtcdSnapshot,
    EtcdRecover,
    Reset,
    SystemStat,
    Logs,
    Dmesg,
    ServiceList,
}

impl Method {
    /// The method's gRPC name, such as `Version`.
    pub fn name(self) -> &'static str {
        match self {
            Method::Version => "Version",
            Method::ApplyConfiguration => "ApplyConfiguration",
            Method::Upgrade => "Upgrade",
            Method::Bootstrap => "Bootstrap",
            Method::EtcdMemberList => "EtcdMemberList",
            Method::EtcdStatus => "EtcdStatus",
            Method::EtcdLeaveCluster => "EtcdLeaveCluster",
            Method::EtcdRemoveMemberById => "EtcdRemoveMemberByID",
            Method::EtcdForfeitLeadership => "EtcdForfeitLeadership",
            Method::EtcdSnapshot => "EtcdSnapshot",
            Method::EtcdRecover => "EtcdRecover",
            Method::Reset => "Reset",
            Method::SystemStat => "SystemStat",
            Method::Logs => "Logs",
            Method::Dmesg => "Dmesg",
            Method::ServiceList => "ServiceList",
        }
    }
}

/// What a call carried.
#[derive(Debug, Clone, PartialEq)]
pub enum Payload {
    /// `google.protobuf.Empty`.
    Empty,
    ApplyConfiguration(ApplyConfigurationRequest),
    Upgrade(UpgradeRequest),
    Bootstrap(BootstrapRequest),
    EtcdMemberList(EtcdMemberListRequest),
    EtcdRemoveMemberById(EtcdRemoveMemberByIdRequest),
    /// An `EtcdRecover` upload, recorded once it ended.
    EtcdRecover(Upload),
    Reset(ResetRequest),
    Logs(crate::proto::machine::LogsRequest),
    Dmesg(crate::proto::machine::DmesgRequest),
}

/// What an `EtcdRecover` upload brought.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    /// How many bytes arrived.
    pub bytes: u64,
    /// The SHA-256 of those bytes, lowercase hex.
    pub sha256: String,
    /// Whether the stream ended cleanly; a broken upload is kept nowhere.
    pub complete: bool,
}

/// One call that reached the fake node.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// Increases across every fake node of the process.
    pub seq: u64,
    /// When the call arrived, before any latency.
    pub at: SystemTime,
    pub method: Method,
    pub payload: Payload,
    /// The `node` metadata, when the caller routed the call.
    pub node: Option<String>,
    /// Whether the caller presented a client certificate: always out of
    /// maintenance mode, never in it (the node asks for none).
    pub client_certificate: bool,
}

/// How a call fails: a gRPC status code and message.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub code: tonic::Code,
    pub message: String,
}

/// What the node answers; shared with its handle.
#[derive(Debug, Clone)]
pub(crate) struct Behaviour {
    pub(crate) version: String,
    pub(crate) hostname: String,
    pub(crate) latency: Duration,
    pub(crate) failure: Option<Failure>,
    /// How long an upgrade keeps the node down (rebooting) before it runs
    /// the new version.
    pub(crate) upgrade_delay: Duration,
    /// How long a config applied with a reboot keeps the node down.
    pub(crate) reboot_delay: Duration,
    /// Makes `Upgrade` fail with this message.
    pub(crate) upgrade_failure: Option<String>,
    /// How many bytes `EtcdSnapshot` streams.
    pub(crate) snapshot_size: usize,
    /// How often each running service and the kernel write a line (`journal.rs`).
    pub(crate) log_interval: Duration,
}

/// A callback for every call as it arrives.
pub(crate) type OnCall = Box<dyn Fn(&Call) + Send + Sync>;

/// The state a node's service and its handle share.
pub(crate) struct Shared {
    pub(crate) behaviour: Mutex<Behaviour>,
    /// When the node booted, its reboots and its configs (`boot.rs`).
    pub(crate) boots: Mutex<crate::boot::Boots>,
    pub(crate) calls: Mutex<Vec<Call>>,
    /// Called with every call as it arrives (the binary prints them).
    pub(crate) on_call: Option<OnCall>,
    /// The etcd of the node's cluster, shared with the other nodes of it.
    pub(crate) etcd: FakeEtcd,
    /// Whether the node took a control-plane config (and has not been reset since).
    pub(crate) control_plane: std::sync::atomic::AtomicBool,
    /// The IP the node listens on, as its etcd member and Node carry it.
    pub(crate) address: IpAddr,
    /// The Kubernetes API the node registers with once configured.
    pub(crate) kube: Mutex<Option<FakeKube>>,
    /// Whether the node took a config (and has not been reset since).
    pub(crate) configured: std::sync::atomic::AtomicBool,
    /// Whether the node is in maintenance mode: started so, or reset, and
    /// no config taken since.
    pub(crate) maintenance: std::sync::atomic::AtomicBool,
    /// The certificate it serves and the clients it takes (`identity.rs`).
    pub(crate) identity: crate::identity::Identity,
    /// Calls of this method wait before they arrive, as if still on the
    /// network, until it is released; a caller that goes away meanwhile
    /// never reaches the node.
    pub(crate) hold: Mutex<Option<(Method, usize)>>,
    /// How many calls are held now.
    pub(crate) held: std::sync::atomic::AtomicUsize,
    /// The SHA-256 (hex) of the last snapshot uploaded whole with
    /// `EtcdRecover`, which a recovering `Bootstrap` starts etcd from.
    pub(crate) recovered: Mutex<Option<String>>,
    /// The services' logs and the kernel's (`journal.rs`).
    pub(crate) journal: crate::journal::Journal,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("behaviour", &*self.behaviour()).finish_non_exhaustive()
    }
}

impl Shared {
    pub(crate) fn behaviour(&self) -> std::sync::MutexGuard<'_, Behaviour> {
        self.behaviour.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn calls(&self) -> std::sync::MutexGuard<'_, Vec<Call>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The Kubernetes API of the node's cluster, if it has one.
    pub(crate) fn kube(&self) -> Option<FakeKube> {
        self.kube.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Records a call, waits the latency, then fails or gives the behaviour.
    pub(crate) async fn serve<T>(
        &self,
        method: Method,
        payload: Payload,
        request: &Request<T>,
    ) -> Result<Behaviour, Status> {
        self.wait_while_held(method).await;
        self.record(method, payload, request);
        self.rebooted()?;
        let behaviour = self.behaviour().clone();
        tokio::time::sleep(behaviour.latency).await;
        match &behaviour.failure {
            Some(failure) => Err(Status::new(failure.code, failure.message.clone())),
            None => Ok(behaviour),
        }
    }

    /// Adds a call to the record (and gives it to the callback).
    pub(crate) fn record<T>(&self, method: Method, payload: Payload, request: &Request<T>) {
        let call = Call {
            seq: SEQUENCE.fetch_add(1, Ordering::SeqCst),
            at: SystemTime::now(),
            method,
            payload,
            node: request.metadata().get("node").and_then(|value| value.to_str().ok()).map(str::to_string),
            client_certificate: request
                .extensions()
                .get::<PeerInfo>()
                .is_some_and(|peer| peer.client_certificate),
        };
        if let Some(on_call) = &self.on_call {
            on_call(&call);
        }
        self.calls().push(call);
    }
}

/// Counts a held call for as long as it is held, even when the caller
/// goes away and the call is dropped.
struct Held<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Shared {
    async fn wait_while_held(&self, method: Method) {
        let held = || *self.hold.lock().unwrap_or_else(PoisonError::into_inner) == Some((method, 0));
        {
            // Calls let through before the hold takes them.
            let mut hold = self.hold.lock().unwrap_or_else(PoisonError::into_inner);
            match hold.as_mut() {
                Some((held, passing)) if *held == method && *passing > 0 => {
                    *passing -= 1;
                    return;
                }
                Some((held, _)) if *held == method => {}
                _ => return,
            }
        }
        self.held.fetch_add(1, Ordering::SeqCst);
        let _count = Held(&self.held);
        while held() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Starts an upgrade to the installer image's tag: a reboot, after
    /// which the node runs that tag.
    fn start_upgrade(self: &Arc<Self>, image: &str, delay: Duration) -> Result<(), Status> {
        let tag = image.rsplit_once(':').map(|(_, tag)| tag.to_string()).filter(|tag| tag.starts_with('v'));
        let tag =
            tag.ok_or_else(|| Status::invalid_argument(format!("no version tag in image {image:?}")))?;
        self.journal.service("machined", &format!("upgrade request received: installer image {image}"));
        self.reboot(delay, Some(tag));
        Ok(())
    }
}

/// The gRPC service over the shared state.
#[derive(Debug, Clone)]
pub(crate) struct FakeMachineService {
    pub(crate) shared: Arc<Shared>,
}

pub(crate) fn metadata(behaviour: &Behaviour) -> Option<Metadata> {
    Some(Metadata { hostname: behaviour.hostname.clone(), ..Metadata::default() })
}

#[tonic::async_trait]
impl MachineService for FakeMachineService {
    async fn apply_configuration(
        &self,
        request: Request<ApplyConfigurationRequest>,
    ) -> Result<Response<ApplyConfigurationResponse>, Status> {
        let payload = Payload::ApplyConfiguration(request.get_ref().clone());
        let behaviour = self.shared.serve(Method::ApplyConfiguration, payload, &request).await?;
        let message = self.shared.apply(&behaviour, request.get_ref())?;
        Ok(Response::new(ApplyConfigurationResponse { messages: vec![message] }))
    }

    async fn upgrade(&self, request: Request<UpgradeRequest>) -> Result<Response<UpgradeResponse>, Status> {
        let payload = Payload::Upgrade(request.get_ref().clone());
        let behaviour = self.shared.serve(Method::Upgrade, payload, &request).await?;
        if let Some(message) = &behaviour.upgrade_failure {
            return Err(Status::internal(message.clone()));
        }
        self.shared.start_upgrade(&request.get_ref().image, behaviour.upgrade_delay)?;
        let message = Upgrade {
            metadata: metadata(&behaviour),
            ack: "Upgrade request received".into(),
            actor_id: format!("fake-{}", SEQUENCE.load(Ordering::SeqCst)),
        };
        Ok(Response::new(UpgradeResponse { messages: vec![message] }))
    }

    async fn bootstrap(
        &self,
        request: Request<BootstrapRequest>,
    ) -> Result<Response<BootstrapResponse>, Status> {
        let payload = Payload::Bootstrap(*request.get_ref());
        let behaviour = self.shared.serve(Method::Bootstrap, payload, &request).await?;
        Ok(Response::new(self.shared.bootstrap(&behaviour, *request.get_ref())?))
    }

    async fn etcd_member_list(
        &self,
        request: Request<EtcdMemberListRequest>,
    ) -> Result<Response<EtcdMemberListResponse>, Status> {
        let payload = Payload::EtcdMemberList(*request.get_ref());
        let behaviour = self.shared.serve(Method::EtcdMemberList, payload, &request).await?;
        Ok(Response::new(self.shared.member_list(&behaviour)?))
    }

    async fn etcd_status(&self, request: Request<()>) -> Result<Response<EtcdStatusResponse>, Status> {
        let behaviour = self.shared.serve(Method::EtcdStatus, Payload::Empty, &request).await?;
        Ok(Response::new(self.shared.member_status(&behaviour)?))
    }

    async fn etcd_leave_cluster(
        &self,
        request: Request<EtcdLeaveClusterRequest>,
    ) -> Result<Response<EtcdLeaveClusterResponse>, Status> {
        let behaviour = self.shared.serve(Method::EtcdLeaveCluster, Payload::Empty, &request).await?;
        Ok(Response::new(self.shared.leave(&behaviour)?))
    }

    async fn etcd_remove_member_by_id(
        &self,
        request: Request<EtcdRemoveMemberByIdRequest>,
    ) -> Result<Response<EtcdRemoveMemberByIdResponse>, Status> {
        let payload = Payload::EtcdRemoveMemberById(*request.get_ref());
        let behaviour = self.shared.serve(Method::EtcdRemoveMemberById, payload, &request).await?;
        Ok(Response::new(self.shared.remove_member(&behaviour, request.get_ref().member_id)?))
    }

    async fn etcd_forfeit_leadership(
        &self,
        request: Request<EtcdForfeitLeadershipRequest>,
    ) -> Result<Response<EtcdForfeitLeadershipResponse>, Status> {
        let behaviour = self.shared.serve(Method::EtcdForfeitLeadership, Payload::Empty, &request).await?;
        Ok(Response::new(self.shared.forfeit_leadership(&behaviour)?))
    }

    async fn etcd_snapshot(
        &self,
        request: Request<EtcdSnapshotRequest>,
    ) -> Result<Response<crate::snapshot::Chunks>, Status> {
        let behaviour = self.shared.serve(Method::EtcdSnapshot, Payload::Empty, &request).await?;
        Ok(Response::new(self.shared.snapshot(&behaviour)?))
    }

    async fn etcd_recover(
        &self,
        request: Request<Streaming<Data>>,
    ) -> Result<Response<EtcdRecoverResponse>, Status> {
        let (metadata, extensions, chunks) = request.into_parts();
        let upload = crate::snapshot::receive(chunks).await;
        let request = Request::from_parts(metadata, extensions, ());
        // Here a stream the client reset ends like a whole one; the reset
        // shows once the handler waits, and the server then drops it.
        let broken = crate::snapshot::Broken { shared: &self.shared, request: &request, upload: &upload };
        tokio::task::yield_now().await;
        std::mem::forget(broken);
        let payload = Payload::EtcdRecover(upload.clone());
        let behaviour = self.shared.serve(Method::EtcdRecover, payload, &request).await?;
        Ok(Response::new(self.shared.recover(&behaviour, upload)?))
    }

    async fn reset(&self, request: Request<ResetRequest>) -> Result<Response<ResetResponse>, Status> {
        let payload = Payload::Reset(request.get_ref().clone());
        let behaviour = self.shared.serve(Method::Reset, payload, &request).await?;
        Ok(Response::new(self.shared.reset(&behaviour, request.get_ref().graceful)))
    }

    async fn system_stat(
        &self,
        request: Request<()>,
    ) -> Result<Response<crate::proto::machine::SystemStatResponse>, Status> {
        let behaviour = self.shared.serve(Method::SystemStat, Payload::Empty, &request).await?;
        Ok(Response::new(self.shared.system_stat(&behaviour)))
    }

    async fn logs(
        &self,
        request: Request<crate::proto::machine::LogsRequest>,
    ) -> Result<Response<crate::snapshot::Chunks>, Status> {
        let payload = Payload::Logs(request.get_ref().clone());
        self.shared.serve(Method::Logs, payload, &request).await?;
        Ok(Response::new(self.shared.logs(request.get_ref())?))
    }

    async fn dmesg(
        &self,
        request: Request<crate::proto::machine::DmesgRequest>,
    ) -> Result<Response<crate::snapshot::Chunks>, Status> {
        self.shared.serve(Method::Dmesg, Payload::Dmesg(*request.get_ref()), &request).await?;
        Ok(Response::new(self.shared.dmesg(request.get_ref())))
    }

    async fn service_list(
        &self,
        request: Request<()>,
    ) -> Result<Response<crate::proto::machine::ServiceListResponse>, Status> {
        let behaviour = self.shared.serve(Method::ServiceList, Payload::Empty, &request).await?;
        Ok(Response::new(self.shared.service_list(&behaviour)))
    }

    async fn version(&self, request: Request<()>) -> Result<Response<VersionResponse>, Status> {
        let behaviour = self.shared.serve(Method::Version, Payload::Empty, &request).await?;
        let message = Version {
            metadata: metadata(&behaviour),
            version: Some(VersionInfo {
                tag: behaviour.version.clone(),
                os: "linux".into(),
                arch: "amd64".into(),
                ..VersionInfo::default()
            }),
            platform: Some(PlatformInfo { name: "metal".into(), mode: "metal".into() }),
            features: Some(FeaturesInfo { rbac: true }),
        };
        Ok(Response::new(VersionResponse { messages: vec![message] }))
    }
}

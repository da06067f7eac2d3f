//! The machines' node API (port 50000) as the reconciler uses it:
//! [`NodeClient`] is the seam, [`TenantNodeClient`] the real client, on
//! [`cms_nodeapi`] with each tenant's credentials (a short-lived admin
//! client certificate from its sealed bundle). Metal hosts that have no
//! config yet are asked in maintenance mode; a host that has taken one is
//! only ever spoken to over mTLS against the tenant's OS CA, and a node
//! whose certificate that CA did not sign is [`NodeError::Untrusted`].
//! etcd's snapshots and the nodes' logs pass through as streams of
//! chunks, never whole in memory; [`machine_node`] finds a machine's node
//! (`nodes/logs.rs`).

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cms_nodeapi::{
    ApplyMode, ApplyRequest, BootstrapRequest, EtcdMember, EtcdMemberStatus, LogsRequest, NodeApi,
    NodeApiError, NodeCredentials, NodeTarget, ResetRequest, ServiceInfo, TalosNodeClient, UpgradeRequest,
    UploadStream, WipeMode,
};
use futures_util::{Stream, StreamExt};

use crate::credentials::TenantCredentials;
use crate::error::TenancyError;

mod logs;
pub use logs::machine_node;

/// One machine's node API endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRef {
    pub tenant: String,
    pub machine: String,
    /// `IP:50000`.
    pub management_address: String,
}

/// Why a node API call of the reconciler failed.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The tenant's credentials cannot be made: it has no secrets, or they
    /// cannot be opened now.
    #[error("no credentials: {0}")]
    Credentials(#[source] TenancyError),
    /// The node's TLS certificate is not one the tenant's OS CA signed: a
    /// host that is not the tenant's node, such as an impostor on its
    /// address or a host reset outside `cms`. Nothing was sent to it.
    #[error("the node's certificate at {endpoint} is not signed by the tenant's OS CA")]
    Untrusted { endpoint: String },
    /// The call itself failed: a bad address, no connection, or the node's answer.
    #[error(transparent)]
    Api(NodeApiError),
    /// The node refused to take the config without a reboot (Talos answers
    /// `InvalidArgument` to such a change in `NO_REBOOT` mode): it is
    /// applied with [`NodeClient::apply_config_reboot`], machine by machine
    /// as upgrades roll. Holds the first line of the node's reason (never
    /// the diff of the configs Talos appends, which holds their secrets).
    #[error("the change needs a reboot: {0}")]
    RebootRequired(String),
    /// A host with no config yet was asked both ways, and both failed.
    #[error("{first_way}: {first}; {second_way}: {second}")]
    Apply { first_way: &'static str, first: Box<NodeError>, second_way: &'static str, second: Box<NodeError> },
    /// This client does not make the call (a test double that only
    /// implements what its test needs).
    #[error("this node client does not make {0}")]
    Unsupported(&'static str),
}

impl NodeError {
    /// Whether the node could not be reached at all (no connection, no
    /// answer in time); a host with no config yet, asked both ways, was
    /// reached neither way.
    pub fn is_unreachable(&self) -> bool {
        match self {
            NodeError::Api(err) => err.is_unreachable(),
            NodeError::Apply { first, second, .. } => first.is_unreachable() && second.is_unreachable(),
            _ => false,
        }
    }

    /// The error on one line, with a failed connection's cause
    /// (`could not connect to 10.0.0.1:50000: connection refused`) and of
    /// a node's answer only the first line; a host reached neither way
    /// says so once.
    pub fn summary(&self) -> String {
        match self {
            NodeError::Api(err) => err.summary(),
            NodeError::Apply { second, .. } if self.is_unreachable() => second.summary(),
            NodeError::Apply { first_way, first, second_way, second } => {
                format!("{first_way}: {}; {second_way}: {}", first.summary(), second.summary())
            }
            other => other.to_string(),
        }
    }
}

impl From<NodeApiError> for NodeError {
    /// A failed call; a node whose certificate fails the tenant's OS CA is
    /// [`NodeError::Untrusted`].
    fn from(err: NodeApiError) -> NodeError {
        match &err {
            NodeApiError::Connect { endpoint, source } if untrusted_certificate(source) => {
                NodeError::Untrusted { endpoint: endpoint.clone() }
            }
            _ => NodeError::Api(err),
        }
    }
}

/// Whether a connection failed because rustls refused the server's
/// certificate. rustls's error travels inside an `io::Error`, whose
/// `source` skips it, so each `io::Error` of the chain is opened too.
fn untrusted_certificate(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(err);
    while let Some(err) = next {
        if let Some(rustls::Error::InvalidCertificate(_)) = err.downcast_ref::<rustls::Error>() {
            return true;
        }
        let inner = err.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref());
        if let Some(inner) = inner
            && untrusted_certificate(inner)
        {
            return true;
        }
        next = err.source();
    }
    false
}

/// An etcd snapshot as it arrives: its chunks in order, or the error that
/// ended the transfer.
pub type SnapshotChunks = Pin<Box<dyn Stream<Item = Result<Vec<u8>, NodeError>> + Send>>;

/// A node's log as it arrives: its chunks of text in order, or the error
/// that ended it.
pub type LogChunks = Pin<Box<dyn Stream<Item = Result<Vec<u8>, NodeError>> + Send>>;

/// The node API calls the reconciler makes.
#[cfg_attr(any(test, feature = "testsuite"), mockall::automock)]
#[async_trait]
pub trait NodeClient: Send + Sync + 'static {
    /// `ApplyConfiguration` with `config` (YAML). A configured node (one
    /// that has taken a config of this tenant) is asked with the tenant's
    /// credentials only, to apply without a reboot: a node that fails the
    /// tenant's OS CA is [`NodeError::Untrusted`] and gets nothing. A node
    /// that has never taken one (`configured` false, or reset by the
    /// service) is a host in maintenance mode, asked without a client
    /// certificate and trusting any server certificate; it falls back to
    /// the tenant's credentials, since it may have been configured
    /// meanwhile.
    /// A change that needs a reboot is [`NodeError::RebootRequired`], and
    /// the node keeps running its config.
    async fn apply_config(&self, node: &NodeRef, config: &str, configured: bool) -> Result<(), NodeError>;

    /// `ApplyConfiguration` in `REBOOT` mode, with the tenant's credentials:
    /// the configured node takes `config` and reboots.
    async fn apply_config_reboot(&self, node: &NodeRef, config: &str) -> Result<(), NodeError>;

    /// `SystemStat`, with the tenant's credentials: when the node last
    /// booted, in seconds since the epoch. A reboot changes it.
    async fn boot_time(&self, node: &NodeRef) -> Result<u64, NodeError>;

    /// `Version`, with the tenant's credentials: the Talos version the node
    /// runs, such as `1.14.0`.
    async fn version(&self, node: &NodeRef) -> Result<String, NodeError>;

    /// `Upgrade` with the installer `image` (such as
    /// `ghcr.io/siderolabs/installer:v1.14.1`), in place, with the tenant's
    /// credentials.
    async fn upgrade(&self, node: &NodeRef, image: &str) -> Result<(), NodeError>;

    /// `Bootstrap` on a control plane, with the tenant's credentials. A node
    /// that answers that etcd is already bootstrapped counts as done.
    async fn bootstrap(&self, node: &NodeRef) -> Result<Bootstrapped, NodeError>;

    /// `EtcdMemberList`, asked of a control plane.
    async fn etcd_members(&self, node: &NodeRef) -> Result<Vec<EtcdMember>, NodeError>;

    /// `EtcdStatus`: the member on the node asked.
    async fn etcd_status(&self, node: &NodeRef) -> Result<EtcdMemberStatus, NodeError>;

    /// `EtcdLeaveCluster`: the control plane asked leaves etcd.
    async fn etcd_leave(&self, node: &NodeRef) -> Result<(), NodeError>;

    /// `EtcdRemoveMemberByID`, asked of another member: removes the member
    /// `member_id`, whose node is gone.
    async fn etcd_remove_member(&self, node: &NodeRef, member_id: u64) -> Result<(), NodeError>;

    /// `Reset`: the node wipes every disk and reboots into maintenance
    /// mode. `graceful` also has it cordon, drain and leave etcd itself.
    async fn reset(&self, node: &NodeRef, graceful: bool) -> Result<(), NodeError>;

    /// `EtcdSnapshot`: a snapshot of the member on the control plane asked,
    /// streamed chunk by chunk.
    async fn etcd_snapshot(&self, node: &NodeRef) -> Result<SnapshotChunks, NodeError>;

    /// `EtcdForfeitLeadership`: if the member on the node asked leads etcd,
    /// it hands over; gives the hostname of the member that leads now, or
    /// `None` when the one asked did not lead.
    async fn etcd_forfeit_leadership(&self, node: &NodeRef) -> Result<Option<String>, NodeError>;

    /// `EtcdRecover`: uploads a snapshot, chunk by chunk, to a control plane
    /// whose etcd waits for its bootstrap. A failing chunk aborts it.
    async fn etcd_recover(&self, node: &NodeRef, chunks: UploadStream) -> Result<(), NodeError>;

    /// `Bootstrap` with `recover_etcd`: etcd starts from the snapshot
    /// uploaded with [`NodeClient::etcd_recover`]. `skip_hash_check` is for
    /// a copy of a data directory, which carries no snapshot hash. Unlike
    /// [`NodeClient::bootstrap`], an etcd bootstrapped before is an error.
    async fn bootstrap_recover(&self, node: &NodeRef, skip_hash_check: bool) -> Result<(), NodeError>;

    /// `Logs`, with the tenant's credentials: one of Talos's services' logs
    /// (`machined`, `etcd`, `kubelet`...), as it arrives; with `follow`,
    /// until the stream is dropped. A service the node keeps no log of is
    /// an error the node gave ([`NodeApiError::is_unknown_log`]).
    async fn logs(&self, node: &NodeRef, request: LogsRequest) -> Result<LogChunks, NodeError> {
        let _ = (node, request);
        Err(NodeError::Unsupported("Logs"))
    }

    /// `Dmesg`, with the tenant's credentials: the kernel's log, as it
    /// arrives; with `follow`, until the stream is dropped.
    async fn dmesg(&self, node: &NodeRef, follow: bool) -> Result<LogChunks, NodeError> {
        let _ = (node, follow);
        Err(NodeError::Unsupported("Dmesg"))
    }

    /// `ServiceList`, with the tenant's credentials: the node's services,
    /// their state and health.
    async fn services(&self, node: &NodeRef) -> Result<Vec<ServiceInfo>, NodeError> {
        let _ = node;
        Err(NodeError::Unsupported("ServiceList"))
    }
}

/// What a `Bootstrap` call found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bootstrapped {
    /// This call started etcd.
    Now,
    /// etcd was bootstrapped before (by an earlier call whose answer was lost).
    Already,
}

/// The real node API client, whose calls (connecting included) give up
/// after `timeout`.
pub fn talos_node_api(timeout: Duration) -> Arc<dyn NodeApi> {
    Arc::new(TalosNodeClient::new(timeout))
}

/// [`NodeClient`] on a [`NodeApi`] with the tenants' credentials.
pub struct TenantNodeClient {
    api: Arc<dyn NodeApi>,
    credentials: Arc<dyn TenantCredentials>,
}

impl fmt::Debug for TenantNodeClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TenantNodeClient").finish_non_exhaustive()
    }
}

/// How a config is applied: with which credentials, in which mode, named for errors.
struct Way {
    credentials: Result<NodeCredentials, NodeError>,
    mode: ApplyMode,
    name: &'static str,
}

impl TenantNodeClient {
    pub fn new(api: Arc<dyn NodeApi>, credentials: Arc<dyn TenantCredentials>) -> TenantNodeClient {
        TenantNodeClient { api, credentials }
    }

    async fn tenant_credentials(&self, tenant: &str) -> Result<NodeCredentials, NodeError> {
        self.credentials.credentials(tenant).await.map_err(NodeError::Credentials)
    }

    /// The node's endpoint and the tenant's credentials for it.
    async fn connect(&self, node: &NodeRef) -> Result<(NodeTarget, NodeCredentials), NodeError> {
        let target = NodeTarget::parse(&node.management_address)?;
        Ok((target, self.tenant_credentials(&node.tenant).await?))
    }

    /// Applies `config`: in maintenance mode as Talos decides (it installs
    /// and reboots), on a configured node without a reboot.
    async fn apply_with(&self, target: &NodeTarget, way: Way, config: &str) -> Result<(), NodeError> {
        let request = ApplyRequest { config: config.as_bytes().to_vec(), mode: way.mode, dry_run: false };
        match self.api.apply_configuration(target, &way.credentials?, request).await {
            Ok(_) => Ok(()),
            // Only the first line: Talos appends a diff of the configs.
            Err(err) if way.mode == ApplyMode::NoReboot && err.is_reboot_required() => {
                Err(NodeError::RebootRequired(err.first_line()))
            }
            Err(err) => Err(err.into()),
        }
    }
}

#[async_trait]
impl NodeClient for TenantNodeClient {
    async fn apply_config(&self, node: &NodeRef, config: &str, configured: bool) -> Result<(), NodeError> {
        let target = NodeTarget::parse(&node.management_address)?;
        let with_tenant = Way {
            credentials: self.tenant_credentials(&node.tenant).await,
            mode: ApplyMode::NoReboot,
            name: "with the tenant's credentials",
        };
        if configured {
            // Never the maintenance way: it trusts any server.
            return self.apply_with(&target, with_tenant, config).await;
        }
        let in_maintenance = Way {
            credentials: Ok(NodeCredentials::maintenance()),
            mode: ApplyMode::Auto,
            name: "in maintenance mode",
        };
        let (first_way, second_way) = (in_maintenance.name, with_tenant.name);
        let Err(first) = self.apply_with(&target, in_maintenance, config).await else {
            return Ok(());
        };
        match self.apply_with(&target, with_tenant, config).await {
            Ok(()) => Ok(()),
            Err(second) => Err(NodeError::Apply {
                first_way,
                first: Box::new(first),
                second_way,
                second: Box::new(second),
            }),
        }
    }

    async fn apply_config_reboot(&self, node: &NodeRef, config: &str) -> Result<(), NodeError> {
        let target = NodeTarget::parse(&node.management_address)?;
        let way = Way {
            credentials: self.tenant_credentials(&node.tenant).await,
            mode: ApplyMode::Reboot,
            name: "with the tenant's credentials",
        };
        self.apply_with(&target, way, config).await
    }

    async fn boot_time(&self, node: &NodeRef) -> Result<u64, NodeError> {
        let (target, credentials) = self.connect(node).await?;
        Ok(self.api.boot_time(&target, &credentials).await?)
    }

    async fn upgrade(&self, node: &NodeRef, image: &str) -> Result<(), NodeError> {
        let target = NodeTarget::parse(&node.management_address)?;
        let credentials = self.tenant_credentials(&node.tenant).await?;
        let request = UpgradeRequest { image: image.to_string(), preserve: true, stage: false, force: false };
        self.api.upgrade(&target, &credentials, request).await?;
        Ok(())
    }

    async fn bootstrap(&self, node: &NodeRef) -> Result<Bootstrapped, NodeError> {
        let target = NodeTarget::parse(&node.management_address)?;
        let credentials = self.tenant_credentials(&node.tenant).await?;
        match self.api.bootstrap(&target, &credentials, BootstrapRequest::default()).await {
            Ok(()) => Ok(Bootstrapped::Now),
            Err(err) if err.is_already_exists() => Ok(Bootstrapped::Already),
            Err(err) => Err(err.into()),
        }
    }

    async fn version(&self, node: &NodeRef) -> Result<String, NodeError> {
        let (target, credentials) = self.connect(node).await?;
        let version = self.api.version(&target, &credentials).await?;
        Ok(version.talos_version().to_string())
    }

    async fn etcd_members(&self, node: &NodeRef) -> Result<Vec<EtcdMember>, NodeError> {
        let (target, credentials) = self.connect(node).await?;
        Ok(self.api.etcd_member_list(&target, &credentials).await?)
    }

    async fn etcd_status(&self, node: &NodeRef) -> Result<EtcdMemberStatus, NodeError> {
        let (target, credentials) = self.connect(node).await?;
        Ok(self.api.etcd_status(&target, &credentials).await?)
    }

    async fn etcd_leave(&self, node: &NodeRef) -> Result<(), NodeError> {
        let (target, credentials) = self.connect(node).await?;
        Ok(self.api.etcd_leave_cluster(&target, &credentials).await?)
    }

    async fn etcd_remove_member(&self, node: &NodeRef, member_id: u64) -> Result<(), NodeError> {
        let (target, credentials) = self.connect(node).await?;
        Ok(self.api.etcd_remove_member_by_id(&target, &credentials, member_id).await?)
    }

    async fn reset(&self, node: &NodeRef, graceful: bool) -> Result<(), NodeError> {
        let (target, credentials) = self.connect(node).await?;
        let request = ResetRequest { graceful, reboot: true, wipe: WipeMode::All };
        Ok(self.api.reset(&target, &credentials, request).await?)
    }

    async fn etcd_snapshot(&self, node: &NodeRef) -> Result<SnapshotChunks, NodeError> {
        let (target, credentials) = self.connect(node).await?;
        let chunks = self.api.etcd_snapshot(&target, &credentials).await?;
        Ok(Box::pin(chunks.map(|chunk| chunk.map_err(NodeError::from))))
    }

    async fn etcd_forfeit_leadership(&self, node: &NodeRef) -> Result<Option<String>, NodeError> {
        let (target, credentials) = self.connect(node).await?;
        Ok(self.api.etcd_forfeit_leadership(&target, &credentials).await?)
    }

    async fn etcd_recover(&self, node: &NodeRef, chunks: UploadStream) -> Result<(), NodeError> {
        let (target, credentials) = self.connect(node).await?;
        Ok(self.api.etcd_recover(&target, &credentials, chunks).await?)
    }

    async fn bootstrap_recover(&self, node: &NodeRef, skip_hash_check: bool) -> Result<(), NodeError> {
        let (target, credentials) = self.connect(node).await?;
        let request = BootstrapRequest { recover_etcd: true, recover_skip_hash_check: skip_hash_check };
        Ok(self.api.bootstrap(&target, &credentials, request).await?)
    }

    async fn logs(&self, node: &NodeRef, request: LogsRequest) -> Result<LogChunks, NodeError> {
        let (target, credentials) = self.connect(node).await?;
        let chunks = self.api.logs(&target, &credentials, request).await?;
        Ok(Box::pin(chunks.map(|chunk| chunk.map_err(NodeError::from))))
    }

    async fn dmesg(&self, node: &NodeRef, follow: bool) -> Result<LogChunks, NodeError> {
        let (target, credentials) = self.connect(node).await?;
        let chunks = self.api.dmesg(&target, &credentials, follow).await?;
        Ok(Box::pin(chunks.map(|chunk| chunk.map_err(NodeError::from))))
    }

    async fn services(&self, node: &NodeRef) -> Result<Vec<ServiceInfo>, NodeError> {
        let (target, credentials) = self.connect(node).await?;
        Ok(self.api.service_list(&target, &credentials).await?)
    }
}

#[cfg(test)]
mod tests;

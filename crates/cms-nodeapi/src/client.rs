//! The node API calls cms makes, behind the [`NodeApi`] seam, and the real
//! client over tonic.

use std::time::Duration;

use async_trait::async_trait;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tonic::transport::{Channel, Endpoint, Uri};

use crate::apply::{ApplyMode, ApplyOutcome, ApplyRequest};
use crate::error::NodeApiError;
use crate::etcd::{self, BootstrapRequest, EtcdMember, EtcdMemberStatus, ResetRequest};
use crate::logs::{self, LogStream, LogsRequest, ServiceInfo};
use crate::proto::common::Metadata;
use crate::proto::machine::machine_service_client::MachineServiceClient;
use crate::proto::machine::{self, upgrade_request::RebootMode};
use crate::snapshot::{self, SnapshotStream, UploadStream};
use crate::target::NodeTarget;
use crate::tls::NodeCredentials;

/// What `Version` says about a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeVersion {
    /// The Talos tag, such as `v1.14.0`.
    pub tag: String,
    /// The node's hostname, when it gave one.
    pub hostname: String,
    /// The platform, such as `metal`.
    pub platform: String,
}

impl NodeVersion {
    /// The Talos version without the tag's `v`, as tenants spell it: `1.14.0`.
    pub fn talos_version(&self) -> &str {
        self.tag.strip_prefix('v').unwrap_or(&self.tag)
    }
}

/// An `Upgrade` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpgradeRequest {
    /// The installer image, such as `ghcr.io/siderolabs/installer:v1.14.0`.
    pub image: String,
    /// Keep the ephemeral partition's data.
    pub preserve: bool,
    /// Stage the upgrade for the next reboot.
    pub stage: bool,
    pub force: bool,
}

/// What a node said to `Upgrade`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpgradeOutcome {
    pub ack: String,
    pub actor_id: String,
}

/// The node API calls cms makes: the IO seam that probes, provisioning and
/// upgrades go through.
#[cfg_attr(any(test, feature = "testsuite"), mockall::automock)]
#[async_trait]
pub trait NodeApi: Send + Sync + 'static {
    /// `MachineService/Version`: the Talos version the node runs.
    async fn version(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
    ) -> Result<NodeVersion, NodeApiError>;

    /// `MachineService/SystemStat`: when the node last booted, in seconds
    /// since the epoch; it changes with every reboot, upgrades' included.
    async fn boot_time(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
    ) -> Result<u64, NodeApiError>;

    /// `MachineService/ApplyConfiguration`; with
    /// [`NodeCredentials::maintenance`] for a metal host that has no config.
    /// The outcome names the mode the node used; in `NoReboot` (and `Try`)
    /// mode a change that needs a reboot is refused
    /// ([`NodeApiError::is_reboot_required`]).
    async fn apply_configuration(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
        request: ApplyRequest,
    ) -> Result<ApplyOutcome, NodeApiError>;

    /// `MachineService/Upgrade`.
    async fn upgrade(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
        request: UpgradeRequest,
    ) -> Result<UpgradeOutcome, NodeApiError>;

    /// `MachineService/Bootstrap`, on one control plane, once per cluster;
    /// with `recover_etcd`, from the snapshot uploaded with
    /// [`NodeApi::etcd_recover`].
    async fn bootstrap(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
        request: BootstrapRequest,
    ) -> Result<(), NodeApiError>;

    /// `MachineService/EtcdMemberList`: the members of the cluster's etcd.
    async fn etcd_member_list(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
    ) -> Result<Vec<EtcdMember>, NodeApiError>;

    /// `MachineService/EtcdStatus`: the member on the node asked.
    async fn etcd_status(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
    ) -> Result<EtcdMemberStatus, NodeApiError>;

    /// `MachineService/EtcdForfeitLeadership`: if the member on the node
    /// asked leads etcd, it hands leadership to another member, whose
    /// hostname the answer names; otherwise nothing changes (`None`).
    async fn etcd_forfeit_leadership(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
    ) -> Result<Option<String>, NodeApiError>;

    /// `MachineService/EtcdSnapshot`: a snapshot of the member on the node
    /// asked, streamed as it arrives (never whole in memory).
    async fn etcd_snapshot(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
    ) -> Result<SnapshotStream, NodeApiError>;

    /// `MachineService/EtcdRecover`: uploads a snapshot, chunk by chunk, to
    /// a control plane whose etcd waits for its bootstrap; a `Bootstrap`
    /// with `recover_etcd` then starts etcd from it.
    async fn etcd_recover(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
        chunks: UploadStream,
    ) -> Result<(), NodeApiError>;

    /// `MachineService/EtcdLeaveCluster`: the node asked leaves etcd.
    async fn etcd_leave_cluster(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
    ) -> Result<(), NodeApiError>;

    /// `MachineService/EtcdRemoveMemberByID`: removes a member whose node
    /// is gone, asked of another member.
    async fn etcd_remove_member_by_id(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
        member_id: u64,
    ) -> Result<(), NodeApiError>;

    /// `MachineService/Reset`: the node wipes itself.
    async fn reset(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
        request: ResetRequest,
    ) -> Result<(), NodeApiError>;

    /// `MachineService/Logs`: one of Talos's services' logs (namespace
    /// `system`, driver `CONTAINERD`, as `talosctl logs` asks), streamed as
    /// it arrives; with `follow`, until the caller drops the stream.
    async fn logs(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
        request: LogsRequest,
    ) -> Result<LogStream, NodeApiError>;

    /// `MachineService/Dmesg`: the kernel's log, streamed as it arrives;
    /// with `follow`, until the caller drops the stream.
    async fn dmesg(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
        follow: bool,
    ) -> Result<LogStream, NodeApiError>;

    /// `MachineService/ServiceList`: the node's services, their state and health.
    async fn service_list(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
    ) -> Result<Vec<ServiceInfo>, NodeApiError>;
}

/// The real client: one connection per call, bounded by a timeout that
/// covers connecting, the TLS handshake and the call. A streamed transfer
/// (a snapshot, a log read to its end) is bounded per step instead
/// (`snapshot.rs`, `logs.rs`), and a followed log not at all once it
/// started.
#[derive(Debug, Clone)]
pub struct TalosNodeClient {
    timeout: Duration,
}

impl TalosNodeClient {
    /// A client whose calls give up after `timeout`.
    pub fn new(timeout: Duration) -> TalosNodeClient {
        TalosNodeClient { timeout }
    }

    /// A connection whose calls give up after the client's timeout.
    async fn connect(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
    ) -> Result<MachineServiceClient<Channel>, NodeApiError> {
        self.connect_with(target, credentials, Some(self.timeout)).await
    }

    /// A connection for a streamed transfer: only connecting is bounded
    /// here, the transfer's steps by the caller.
    async fn connect_streaming(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
    ) -> Result<MachineServiceClient<Channel>, NodeApiError> {
        self.connect_with(target, credentials, None).await
    }

    async fn connect_with(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
        call_timeout: Option<Duration>,
    ) -> Result<MachineServiceClient<Channel>, NodeApiError> {
        let endpoint = target.endpoint();
        let server_name = target.server_name()?;
        let connector = TlsConnector::from(credentials.client_config());
        let address = endpoint.clone();
        let connect = tower::service_fn(move |_: Uri| {
            let (connector, address, server_name) = (connector.clone(), address.clone(), server_name.clone());
            async move {
                let tcp = TcpStream::connect(address).await?;
                tcp.set_nodelay(true)?;
                let tls = connector.connect(server_name, tcp).await?;
                Ok::<_, std::io::Error>(TokioIo::new(tls))
            }
        });
        let mut channel = Endpoint::from_shared(format!("https://{endpoint}"))
            .map_err(|_| NodeApiError::InvalidAddress(endpoint.clone()))?
            .connect_timeout(self.timeout);
        if let Some(call_timeout) = call_timeout {
            channel = channel.timeout(call_timeout);
        }
        let channel = channel
            .connect_with_connector(connect)
            .await
            .map_err(|source| NodeApiError::Connect { endpoint, source })?;
        Ok(MachineServiceClient::new(channel))
    }
}

/// A request with the `node` metadata when the call is routed.
pub(crate) fn request<T>(target: &NodeTarget, message: T) -> Result<tonic::Request<T>, NodeApiError> {
    let mut request = tonic::Request::new(message);
    if let Some(node) = target.node() {
        let value = node.parse().map_err(|_| NodeApiError::InvalidAddress(node.to_string()))?;
        request.metadata_mut().insert("node", value);
    }
    Ok(request)
}

pub(crate) fn status(target: &NodeTarget) -> impl FnOnce(tonic::Status) -> NodeApiError + '_ {
    move |status| NodeApiError::Status { endpoint: target.endpoint(), status: Box::new(status) }
}

/// The first message of an answer, or the error a node reported in it.
pub(crate) fn first<T>(
    target: &NodeTarget,
    messages: Vec<T>,
    metadata: impl Fn(&T) -> Option<&Metadata>,
) -> Result<T, NodeApiError> {
    let message = messages.into_iter().next().ok_or_else(|| NodeApiError::EmptyAnswer(target.endpoint()))?;
    if let Some(meta) = metadata(&message).filter(|meta| !meta.error.is_empty()) {
        return Err(NodeApiError::Node { hostname: meta.hostname.clone(), message: meta.error.clone() });
    }
    Ok(message)
}

#[async_trait]
impl NodeApi for TalosNodeClient {
    async fn version(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
    ) -> Result<NodeVersion, NodeApiError> {
        let mut client = self.connect(target, credentials).await?;
        let answer = client.version(request(target, ())?).await.map_err(status(target))?.into_inner();
        let message = first(target, answer.messages, |m| m.metadata.as_ref())?;
        Ok(NodeVersion {
            tag: message.version.map(|v| v.tag).unwrap_or_default(),
            hostname: message.metadata.map(|m| m.hostname).unwrap_or_default(),
            platform: message.platform.map(|p| p.name).unwrap_or_default(),
        })
    }

    async fn apply_configuration(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
        apply: ApplyRequest,
    ) -> Result<ApplyOutcome, NodeApiError> {
        let mut client = self.connect(target, credentials).await?;
        let message = machine::ApplyConfigurationRequest {
            data: apply.config,
            mode: apply.mode.to_proto().into(),
            dry_run: apply.dry_run,
        };
        let answer =
            client.apply_configuration(request(target, message)?).await.map_err(status(target))?.into_inner();
        let message = first(target, answer.messages, |m| m.metadata.as_ref())?;
        let mode = ApplyMode::from_proto(message.mode)
            .ok_or(NodeApiError::UnknownApplyMode { endpoint: target.endpoint(), mode: message.mode })?;
        Ok(ApplyOutcome { mode, warnings: message.warnings, mode_details: message.mode_details })
    }

    async fn boot_time(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
    ) -> Result<u64, NodeApiError> {
        let mut client = self.connect(target, credentials).await?;
        let answer = client.system_stat(request(target, ())?).await.map_err(status(target))?.into_inner();
        let message = first(target, answer.messages, |m| m.metadata.as_ref())?;
        Ok(message.boot_time)
    }

    async fn upgrade(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
        upgrade: UpgradeRequest,
    ) -> Result<UpgradeOutcome, NodeApiError> {
        let mut client = self.connect(target, credentials).await?;
        let message = machine::UpgradeRequest {
            image: upgrade.image,
            preserve: upgrade.preserve,
            stage: upgrade.stage,
            force: upgrade.force,
            reboot_mode: RebootMode::Default.into(),
        };
        let answer = client.upgrade(request(target, message)?).await.map_err(status(target))?.into_inner();
        let message = first(target, answer.messages, |m| m.metadata.as_ref())?;
        Ok(UpgradeOutcome { ack: message.ack, actor_id: message.actor_id })
    }

    async fn bootstrap(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
        request: BootstrapRequest,
    ) -> Result<(), NodeApiError> {
        etcd::bootstrap(self.connect(target, credentials).await?, target, request).await
    }

    async fn etcd_member_list(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
    ) -> Result<Vec<EtcdMember>, NodeApiError> {
        etcd::member_list(self.connect(target, credentials).await?, target).await
    }

    async fn etcd_status(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
    ) -> Result<EtcdMemberStatus, NodeApiError> {
        etcd::member_status(self.connect(target, credentials).await?, target).await
    }

    async fn etcd_forfeit_leadership(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
    ) -> Result<Option<String>, NodeApiError> {
        etcd::forfeit_leadership(self.connect(target, credentials).await?, target).await
    }

    async fn etcd_snapshot(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
    ) -> Result<SnapshotStream, NodeApiError> {
        let client = self.connect_streaming(target, credentials).await?;
        snapshot::snapshot(client, target, self.timeout).await
    }

    async fn etcd_recover(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
        chunks: UploadStream,
    ) -> Result<(), NodeApiError> {
        let client = self.connect_streaming(target, credentials).await?;
        snapshot::recover(client, target, chunks, self.timeout).await
    }

    async fn etcd_leave_cluster(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
    ) -> Result<(), NodeApiError> {
        etcd::leave_cluster(self.connect(target, credentials).await?, target).await
    }

    async fn etcd_remove_member_by_id(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
        member_id: u64,
    ) -> Result<(), NodeApiError> {
        etcd::remove_member(self.connect(target, credentials).await?, target, member_id).await
    }

    async fn reset(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
        request: ResetRequest,
    ) -> Result<(), NodeApiError> {
        etcd::reset(self.connect(target, credentials).await?, target, request).await
    }

    async fn logs(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
        request: LogsRequest,
    ) -> Result<LogStream, NodeApiError> {
        let client = self.connect_streaming(target, credentials).await?;
        logs::logs(client, target, request, self.timeout).await
    }

    async fn dmesg(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
        follow: bool,
    ) -> Result<LogStream, NodeApiError> {
        let client = self.connect_streaming(target, credentials).await?;
        logs::dmesg(client, target, follow, self.timeout).await
    }

    async fn service_list(
        &self,
        target: &NodeTarget,
        credentials: &NodeCredentials,
    ) -> Result<Vec<ServiceInfo>, NodeApiError> {
        logs::service_list(self.connect(target, credentials).await?, target).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_drop_the_v() {
        let version = NodeVersion { tag: "v1.14.0".into(), hostname: String::new(), platform: String::new() };
        assert_eq!(version.talos_version(), "1.14.0");
    }
}

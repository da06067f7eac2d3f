//! The calls that make a set of machines one cluster: `Bootstrap`, etcd's
//! member list, status, leadership and membership changes, and `Reset`.
//! Their messages and field numbers are Talos's (`docs/node-api.md`,
//! `docs/nodeapi-etcd.md`).

use tonic::transport::Channel;

use crate::client::{first, request, status};
use crate::error::NodeApiError;
use crate::proto::machine::machine_service_client::MachineServiceClient;
use crate::proto::machine::{self, reset_request};
use crate::target::NodeTarget;

/// A `Bootstrap` call: a control plane starts a one-member etcd instead of
/// joining one, once in the cluster's life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BootstrapRequest {
    /// Start etcd from the snapshot uploaded before with `EtcdRecover`.
    pub recover_etcd: bool,
    /// Skip the snapshot's hash check (a copy of a data directory).
    pub recover_skip_hash_check: bool,
}

/// One etcd member, as `EtcdMemberList` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdMember {
    pub id: u64,
    pub hostname: String,
    pub peer_urls: Vec<String>,
    pub client_urls: Vec<String>,
    pub is_learner: bool,
}

/// What `EtcdStatus` says of the member on the node asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdMemberStatus {
    pub member_id: u64,
    /// The member id of the leader, as this member sees it.
    pub leader: u64,
    pub protocol_version: String,
    pub db_size: i64,
    pub raft_index: u64,
    pub raft_term: u64,
    /// The member's errors, such as raised alarms.
    pub errors: Vec<String>,
    pub is_learner: bool,
}

/// Which disks a `Reset` wipes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WipeMode {
    All,
    SystemDisk,
    UserDisks,
}

/// A `Reset` call: the node wipes itself and returns to maintenance mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResetRequest {
    /// Leave etcd first, with its checks (for a control plane), and cordon
    /// and drain.
    pub graceful: bool,
    /// Reboot afterwards, rather than halt.
    pub reboot: bool,
    pub wipe: WipeMode,
}

pub(crate) async fn bootstrap(
    mut client: MachineServiceClient<Channel>,
    target: &NodeTarget,
    bootstrap: BootstrapRequest,
) -> Result<(), NodeApiError> {
    let message = machine::BootstrapRequest {
        recover_etcd: bootstrap.recover_etcd,
        recover_skip_hash_check: bootstrap.recover_skip_hash_check,
    };
    let answer = client.bootstrap(request(target, message)?).await.map_err(status(target))?.into_inner();
    first(target, answer.messages, |m| m.metadata.as_ref())?;
    Ok(())
}

pub(crate) async fn member_list(
    mut client: MachineServiceClient<Channel>,
    target: &NodeTarget,
) -> Result<Vec<EtcdMember>, NodeApiError> {
    let message = machine::EtcdMemberListRequest { query_local: false };
    let answer =
        client.etcd_member_list(request(target, message)?).await.map_err(status(target))?.into_inner();
    let members = first(target, answer.messages, |m| m.metadata.as_ref())?.members;
    Ok(members
        .into_iter()
        .map(|member| EtcdMember {
            id: member.id,
            hostname: member.hostname,
            peer_urls: member.peer_urls,
            client_urls: member.client_urls,
            is_learner: member.is_learner,
        })
        .collect())
}

pub(crate) async fn member_status(
    mut client: MachineServiceClient<Channel>,
    target: &NodeTarget,
) -> Result<EtcdMemberStatus, NodeApiError> {
    let answer = client.etcd_status(request(target, ())?).await.map_err(status(target))?.into_inner();
    let found = first(target, answer.messages, |m| m.metadata.as_ref())?.member_status;
    let found = found.ok_or_else(|| NodeApiError::EmptyAnswer(target.endpoint()))?;
    Ok(EtcdMemberStatus {
        member_id: found.member_id,
        leader: found.leader,
        protocol_version: found.protocol_version,
        db_size: found.db_size,
        raft_index: found.raft_index,
        raft_term: found.raft_term,
        errors: found.errors,
        is_learner: found.is_learner,
    })
}

pub(crate) async fn leave_cluster(
    mut client: MachineServiceClient<Channel>,
    target: &NodeTarget,
) -> Result<(), NodeApiError> {
    let message = machine::EtcdLeaveClusterRequest {};
    let answer =
        client.etcd_leave_cluster(request(target, message)?).await.map_err(status(target))?.into_inner();
    first(target, answer.messages, |m| m.metadata.as_ref())?;
    Ok(())
}

pub(crate) async fn forfeit_leadership(
    mut client: MachineServiceClient<Channel>,
    target: &NodeTarget,
) -> Result<Option<String>, NodeApiError> {
    let message = machine::EtcdForfeitLeadershipRequest {};
    let answer =
        client.etcd_forfeit_leadership(request(target, message)?).await.map_err(status(target))?.into_inner();
    let member = first(target, answer.messages, |m| m.metadata.as_ref())?.member;
    Ok(Some(member).filter(|member| !member.is_empty()))
}

pub(crate) async fn remove_member(
    mut client: MachineServiceClient<Channel>,
    target: &NodeTarget,
    member_id: u64,
) -> Result<(), NodeApiError> {
    let message = machine::EtcdRemoveMemberByIdRequest { member_id };
    let answer = client
        .etcd_remove_member_by_id(request(target, message)?)
        .await
        .map_err(status(target))?
        .into_inner();
    first(target, answer.messages, |m| m.metadata.as_ref())?;
    Ok(())
}

pub(crate) async fn reset(
    mut client: MachineServiceClient<Channel>,
    target: &NodeTarget,
    reset: ResetRequest,
) -> Result<(), NodeApiError> {
    let mode = match reset.wipe {
        WipeMode::All => reset_request::WipeMode::All,
        WipeMode::SystemDisk => reset_request::WipeMode::SystemDisk,
        WipeMode::UserDisks => reset_request::WipeMode::UserDisks,
    };
    let message = machine::ResetRequest {
        graceful: reset.graceful,
        reboot: reset.reboot,
        system_partitions_to_wipe: Vec::new(),
        user_disks_to_wipe: Vec::new(),
        mode: mode.into(),
    };
    let answer = client.reset(request(target, message)?).await.map_err(status(target))?.into_inner();
    first(target, answer.messages, |m| m.metadata.as_ref())?;
    Ok(())
}

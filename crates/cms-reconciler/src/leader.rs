//! Which control plane leads etcd, so that a rollout upgrades it last: the
//! members as a control plane lists them (`EtcdMemberList`), each asked
//! for its status (`EtcdStatus`, which names the leader it follows), and
//! the leader's member matched to its machine as `cluster.rs` matches
//! them. Upgrading the leader last, after it handed over
//! (`EtcdForfeitLeadership`), costs etcd one election in the rollout
//! rather than one per control plane upgraded after a new leader.

use cms_model::Machine;

use crate::Context;
use crate::cluster::{self, Answer};

/// The name of the machine whose etcd member leads, or why it cannot be told.
pub(crate) async fn leader(
    tenant: &str,
    control_planes: &[&Machine],
    ctx: &Context,
) -> Result<String, String> {
    let members = cluster::members(tenant, control_planes, ctx).await?;
    let answers = cluster::statuses(tenant, &members, control_planes, ctx).await;
    let id = answers
        .iter()
        .find_map(|answer| match answer {
            Answer::Fine(leader) if *leader != 0 => Some(*leader),
            _ => None,
        })
        .ok_or_else(|| "no etcd member names a leader".to_string())?;
    let member = members
        .iter()
        .find(|member| member.id == id)
        .ok_or_else(|| format!("the leader {id:x} is not among etcd's members"))?;
    let machine = cluster::machine_of(member, control_planes)
        .ok_or_else(|| format!("the leader {} runs on no machine of the tenant", member.hostname))?;
    Ok(machine.metadata.name.clone())
}

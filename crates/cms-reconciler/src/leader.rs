//! Which control plane leads etcd, so that a rollout upgrades it last, from
//! what the rollout's check of etcd already asked: the members as a control
//! plane lists them (`EtcdMemberList`), each one's status (`EtcdStatus`,
//! which names the leader it follows), and the leader's member matched to
//! its machine as `cluster.rs` matches them. Upgrading the leader last, after it handed over
//! (`EtcdForfeitLeadership`), costs etcd one election in the rollout
//! rather than one per control plane upgraded after a new leader.

use cms_model::Machine;
use cms_tenancy::EtcdMember;

use crate::cluster::{self, Answer};

/// The leader as `members` and their `answers` (`cluster::statuses`, in
/// the members' order) name it, matched to one of `control_planes`.
pub(crate) fn leader_of(
    members: &[EtcdMember],
    answers: &[Answer],
    control_planes: &[&Machine],
) -> Result<String, String> {
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

//! After the bootstrap, the cluster as the tenant's own parts report it:
//! etcd's members and health from the control planes (`EtcdMemberList`,
//! `EtcdStatus`), and the Kubernetes API's `/readyz` and Nodes, asked with
//! the service's own short-lived admin certificate. Each gives a condition
//! (`EtcdHealthy`, `KubernetesAPIReady`, `NodesReady`) in words an operator
//! can act on. Machines and Nodes are matched by address: a Node lists the
//! machine's IP, or is named as the machine.

use cms_model::{EtcdMemberStatus, EtcdStatus, Machine, host_of};
/// The Node of a machine, as every part of the service finds it.
pub(crate) use cms_tenancy::node_of;
use cms_tenancy::{EtcdMember, KubeNode, NodeRef};
use futures_util::future::join_all;

use crate::Context;
use crate::blocker::listed;

/// One condition's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Check {
    pub(crate) ok: bool,
    pub(crate) reason: String,
    pub(crate) message: String,
}

impl Check {
    pub(crate) fn pass(reason: &str, message: impl Into<String>) -> Check {
        Check { ok: true, reason: reason.into(), message: message.into() }
    }

    pub(crate) fn fail(reason: &str, message: impl Into<String>) -> Check {
        Check { ok: false, reason: reason.into(), message: message.into() }
    }
}

/// What the cluster said of itself in one pass.
#[derive(Debug, Clone)]
pub(crate) struct Observed {
    pub(crate) etcd: Check,
    pub(crate) members: Option<EtcdStatus>,
    pub(crate) api: Check,
    /// The Nodes, when the API listed them; else why not.
    pub(crate) nodes: Result<Vec<KubeNode>, String>,
}

impl Observed {
    /// Before the bootstrap there is no etcd and no API to ask.
    pub(crate) fn before_bootstrap() -> Observed {
        let why = "waiting for etcd to be bootstrapped";
        Observed {
            etcd: Check::fail("Waiting", why),
            members: None,
            api: Check::fail("Waiting", why),
            nodes: Err(why.to_string()),
        }
    }
}

/// Asks etcd (through `control_planes`, the configured control planes
/// that stay) and the Kubernetes API.
pub(crate) async fn observe(tenant: &str, control_planes: &[&Machine], ctx: &Context) -> Observed {
    let (etcd, members) = etcd(tenant, control_planes, ctx).await;
    let (api, nodes) = match ctx.kube.readyz(tenant).await {
        Ok(()) => {
            let nodes = ctx.kube.nodes(tenant).await.map_err(|err| format!("listing the Nodes: {err}"));
            (Check::pass("Ready", "the Kubernetes API server answers /readyz: ok"), nodes)
        }
        Err(err) => {
            let why = format!("the Kubernetes API server is not ready: {err}");
            (Check::fail("NotReady", why.clone()), Err(why))
        }
    };
    Observed { etcd, members, api, nodes }
}

/// The node API address of a machine, for the calls of one tenant.
pub(crate) fn node_ref(tenant: &str, machine: &Machine) -> Option<NodeRef> {
    Some(NodeRef {
        tenant: tenant.to_string(),
        machine: machine.metadata.name.clone(),
        management_address: machine.spec.management_address.clone()?,
    })
}

/// The machine an etcd member runs on: its peer URL names the machine's
/// IP, or its hostname is the machine's id.
pub(crate) fn machine_of<'a>(member: &EtcdMember, machines: &[&'a Machine]) -> Option<&'a Machine> {
    let hosts: Vec<String> = member.peer_urls.iter().map(|url| host_of(url)).collect();
    machines
        .iter()
        .find(|machine| machine.ip().is_some_and(|ip| hosts.contains(&ip)))
        .or_else(|| machines.iter().find(|machine| machine.metadata.name == member.hostname))
        .copied()
}

/// The members, from the first control plane that lists them, each asked
/// for its status.
pub(crate) async fn members(
    tenant: &str,
    control_planes: &[&Machine],
    ctx: &Context,
) -> Result<Vec<EtcdMember>, String> {
    let mut errors = Vec::new();
    for machine in control_planes {
        let Some(node) = node_ref(tenant, machine) else { continue };
        match ctx.nodes.etcd_members(&node).await {
            Ok(members) => return Ok(members),
            Err(err) => errors.push(format!("{}: {err}", machine.metadata.name)),
        }
    }
    if errors.is_empty() {
        return Err("no control plane has an address to ask".into());
    }
    Err(format!("no control plane lists etcd's members: {}", errors.join("; ")))
}

/// What one member said to `EtcdStatus`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    /// It answered without errors, naming the leader (0 for none).
    Fine(u64),
    /// It answered with errors, such as raised alarms.
    Alarm(String),
    /// It did not answer.
    Silent(String),
}

impl Answer {
    pub(crate) fn answered(&self) -> bool {
        !matches!(self, Answer::Silent(_))
    }
}

/// What each member says to `EtcdStatus`, asked at once.
pub(crate) async fn statuses(
    tenant: &str,
    members: &[EtcdMember],
    machines: &[&Machine],
    ctx: &Context,
) -> Vec<Answer> {
    let asks = members.iter().map(|member| async move {
        let Some(machine) = machine_of(member, machines) else {
            return Answer::Silent(format!("member {} runs on no machine of the tenant", member.hostname));
        };
        let Some(node) = node_ref(tenant, machine) else {
            return Answer::Silent(format!("machine {} has no address", machine.metadata.name));
        };
        match ctx.nodes.etcd_status(&node).await {
            Ok(status) if status.errors.is_empty() => Answer::Fine(status.leader),
            Ok(status) => {
                Answer::Alarm(format!("member on {}: {}", machine.metadata.name, status.errors.join(", ")))
            }
            Err(err) => Answer::Silent(format!("member on {} does not answer: {err}", machine.metadata.name)),
        }
    });
    join_all(asks).await
}

/// `EtcdHealthy`: every control plane is a member, a quorum of members
/// answers, and none reports an error (a raised alarm among them).
async fn etcd(tenant: &str, control_planes: &[&Machine], ctx: &Context) -> (Check, Option<EtcdStatus>) {
    if control_planes.is_empty() {
        return (Check::fail("NoControlPlane", "no configured control plane to ask"), None);
    }
    let members = match members(tenant, control_planes, ctx).await {
        Ok(members) => members,
        Err(why) => return (Check::fail("Unreachable", why), None),
    };
    let answers = statuses(tenant, &members, control_planes, ctx).await;
    let leader = answers.iter().find_map(|answer| match answer {
        Answer::Fine(leader) if *leader != 0 => Some(*leader),
        _ => None,
    });
    let mut status = EtcdStatus {
        members: members
            .iter()
            .zip(&answers)
            .map(|(member, answer)| EtcdMemberStatus {
                id: format!("{:x}", member.id),
                hostname: member.hostname.clone(),
                machine: machine_of(member, control_planes).map(|machine| machine.metadata.name.clone()),
                learner: member.is_learner,
                healthy: matches!(answer, Answer::Fine(_)),
            })
            .collect(),
        leader: leader.map(|id| format!("{id:x}")),
    };
    let check = health(&status, &answers, control_planes);
    status.members.sort_by(|a, b| (&a.machine, &a.hostname).cmp(&(&b.machine, &b.hostname)));
    (check, Some(status))
}

/// The `EtcdHealthy` verdict on what the members said.
fn health(status: &EtcdStatus, answers: &[Answer], control_planes: &[&Machine]) -> Check {
    let total = status.members.len();
    let answering = answers.iter().filter(|answer| answer.answered()).count();
    let silent: Vec<&str> = answers
        .iter()
        .filter_map(|answer| match answer {
            Answer::Silent(why) => Some(why.as_str()),
            _ => None,
        })
        .collect();
    if answering * 2 <= total {
        return Check::fail(
            "NoQuorum",
            format!("only {answering} of {total} etcd members answer: {}", listed(&silent)),
        );
    }
    let alarms: Vec<&str> = answers
        .iter()
        .filter_map(|answer| match answer {
            Answer::Alarm(why) => Some(why.as_str()),
            _ => None,
        })
        .collect();
    if !alarms.is_empty() {
        return Check::fail(
            "Alarms",
            format!("{} etcd members report errors: {}", alarms.len(), listed(&alarms)),
        );
    }
    let missing: Vec<&str> = control_planes
        .iter()
        .filter(|machine| {
            !status.members.iter().any(|m| m.machine.as_deref() == Some(&machine.metadata.name))
        })
        .map(|machine| machine.metadata.name.as_str())
        .collect();
    if !missing.is_empty() {
        return Check::fail(
            "NotMember",
            format!("control planes {} are not etcd members yet", listed(&missing)),
        );
    }
    let leader = status
        .leader
        .as_ref()
        .and_then(|id| status.members.iter().find(|member| member.id == *id))
        .map(|member| member.machine.clone().unwrap_or_else(|| member.hostname.clone()));
    let leader = leader.map(|name| format!(", leader on {name}")).unwrap_or_default();
    let quiet = match silent.is_empty() {
        true => String::new(),
        false => format!("; {}", listed(&silent)),
    };
    Check::pass("Healthy", format!("{answering} of {total} members answer{leader}{quiet}"))
}

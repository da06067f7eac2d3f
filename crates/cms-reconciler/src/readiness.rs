//! Which machines are `ready`: Talos answers with the tenant's credentials
//! (`settle.rs`) and the machine's Kubernetes Node is Ready. Each machine's
//! `ready` and `stage` follow, its `status.kubernetesVersion` is the
//! kubelet version its Node reports, node groups' `readyReplicas` count them, and
//! the `NodesReady` and `MachinesReady` conditions name what is missing: a
//! count and the first few machines, each with its cause
//! (`blocker::machines`), whose blockers the tenant's message may name.

use std::collections::BTreeMap;

use cms_model::{Kind, Machine, MachineStatus, NodeGroupStatus};
use cms_store::{Key, StoreError};
use cms_tenancy::KubeNode;
use cms_tofu::WorkspacePlan;

use crate::blocker::{self, Fault, Gate, Trouble, listed};
use crate::cluster::{Check, node_of};
use crate::machines::planned;
use crate::rollout;
use crate::settle::{Observed, Settled, write};
use crate::view::View;
use crate::{Context, ReconcileError};

/// What the machines came to.
#[derive(Debug)]
pub(crate) struct Readiness {
    pub(crate) machines: Check,
    pub(crate) nodes: Check,
    /// What the machines that are not ready block, for the tenant's message.
    pub(crate) blockers: Vec<(Gate, String)>,
}

impl Readiness {
    pub(crate) fn all_ready(&self) -> bool {
        self.machines.ok && self.nodes.ok
    }
}

/// Marks each machine of the workspace ready or not, and counts them per group.
pub(crate) async fn mark(
    tenant: &str,
    plan: &WorkspacePlan,
    settled: &Settled,
    nodes: &Result<Vec<KubeNode>, String>,
    view: &mut View,
    ctx: &Context,
) -> Result<Readiness, ReconcileError> {
    let live: Vec<Machine> = view.live().cloned().collect();
    let mut groups: BTreeMap<String, NodeGroupStatus> = BTreeMap::new();
    let (mut total, mut ready) = (0, 0);
    let mut troubles = Vec::new();
    let mut node_problems = Vec::new();
    for machine in &live {
        let Some(machine_plan) = planned(plan, &machine.metadata.name) else { continue };
        let id = machine.metadata.name.as_str();
        let group = groups.entry(machine_plan.group.clone()).or_default();
        group.replicas += 1;
        total += 1;
        let node = nodes.as_ref().ok().and_then(|nodes| node_of(machine, nodes));
        // What is wrong with its Node: for `NodesReady`, and for the machine.
        let node_problem = match (nodes, node) {
            (Err(_), _) => None,
            (Ok(_), None) => Some((
                format!("machine {id} has no Kubernetes Node yet"),
                "no Kubernetes Node yet".to_string(),
            )),
            (Ok(_), Some(node)) if !node.ready => Some((
                format!("node {} (machine {id}) is NotReady: {}", node.name, node.reason),
                format!("node {} is NotReady: {}", node.name, node.reason),
            )),
            (Ok(_), Some(_)) => None,
        };
        let is_ready = machine.spec.connected && nodes.is_ok() && node_problem.is_none();
        if is_ready {
            ready += 1;
            group.ready_replicas += 1;
        } else {
            let (fault, cause) = match (settled.problem(id), &node_problem, nodes) {
                (Some(problem), _, _) => (problem.fault, problem.cause.clone()),
                (None, _, _) if !machine.spec.connected => {
                    (Fault::Starting, "Talos has not answered yet".into())
                }
                (None, Some((_, cause)), _) => (Fault::Kubernetes, cause.clone()),
                (None, None, Err(why)) => (Fault::Kubernetes, why.clone()),
                (None, None, Ok(_)) => (Fault::Kubernetes, "not ready".to_string()),
            };
            troubles.push(Trouble { machine: id.to_string(), fault, cause });
        }
        if let Some((problem, _)) = node_problem {
            node_problems.push(problem);
        }
        if !rollout::in_flight(machine) {
            let kubelet = node.and_then(|node| node.kubelet_version.clone());
            view.put_written(update(ctx, tenant, machine, is_ready, kubelet).await?);
        }
    }
    write_groups(ctx, tenant, groups).await?;
    let (machines, blockers) = blocker::machines(ready, total, &troubles);
    let nodes = match nodes {
        Err(why) => Check::fail("Waiting", why.clone()),
        Ok(_) if node_problems.is_empty() => Check::pass("Ready", format!("{total} of {total} nodes Ready")),
        Ok(_) => Check::fail(
            "NotReady",
            format!("{} of {total} nodes not Ready: {}", node_problems.len(), listed(&node_problems)),
        ),
    };
    Ok(Readiness { machines, nodes, blockers })
}

/// The machine's `ready`, `stage` and observed Kubernetes version (its
/// kubelet's, as its Node reports it), written when they change.
async fn update(
    ctx: &Context,
    tenant: &str,
    machine: &Machine,
    ready: bool,
    kubelet: Option<String>,
) -> Result<Option<Machine>, ReconcileError> {
    let stage = match (ready, machine.status.stage.as_str()) {
        (true, _) => "ready",
        (false, "ready") => "joining",
        (false, stage) => stage,
    };
    let kubernetes_version = kubelet.or_else(|| machine.status.kubernetes_version.clone());
    let status =
        MachineStatus { ready, stage: stage.to_string(), kubernetes_version, ..machine.status.clone() };
    if status == machine.status {
        return Ok(Some(machine.clone()));
    }
    let observed = Observed {
        annotations: machine.metadata.annotations.clone(),
        connected: machine.spec.connected,
        status,
    };
    write(ctx, tenant, machine, observed).await
}

/// Each node group's `replicas` and `readyReplicas`.
async fn write_groups(
    ctx: &Context,
    tenant: &str,
    groups: BTreeMap<String, NodeGroupStatus>,
) -> Result<(), ReconcileError> {
    for (group, status) in groups {
        let key = Key::child(Kind::NodeGroup, tenant, group);
        let Some(object) = ctx.store.get(&key) else { continue };
        let current = object.parse::<cms_model::NodeGroup>().ok().map(|group| group.status);
        if current.as_ref() == Some(&status) {
            continue;
        }
        let value = serde_json::to_value(&status)
            .map_err(|source| ReconcileError::Corrupt { what: key.to_string(), source })?;
        match ctx.store.update_status(key, value, Some(object.resource_version)).await {
            Ok(_) | Err(StoreError::Conflict { .. } | StoreError::NotFound(_)) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}

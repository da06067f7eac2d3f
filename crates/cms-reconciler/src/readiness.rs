//! Which machines are `ready`: Talos answers with the tenant's credentials
//! (`settle.rs`) and the machine's Kubernetes Node is Ready. Each machine's
//! `ready` and `stage` follow, its `status.kubernetesVersion` is the
//! kubelet version its Node reports, node groups' `readyReplicas` count them, and
//! the `NodesReady` and `MachinesReady` conditions name what is missing.

use std::collections::BTreeMap;

use cms_model::{Kind, Machine, MachineStatus, NodeGroupStatus};
use cms_store::{Key, StoreError};
use cms_tenancy::KubeNode;
use cms_tofu::WorkspacePlan;

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
    let mut pending = Vec::new();
    let mut node_problems = Vec::new();
    for machine in &live {
        let Some(machine_plan) = planned(plan, &machine.metadata.name) else { continue };
        let id = machine.metadata.name.as_str();
        let group = groups.entry(machine_plan.group.clone()).or_default();
        group.replicas += 1;
        total += 1;
        let node = nodes.as_ref().ok().and_then(|nodes| node_of(machine, nodes));
        let node_problem = match (nodes, node) {
            (Err(_), _) => None,
            (Ok(_), None) => Some(format!("machine {id} has no Kubernetes Node yet")),
            (Ok(_), Some(node)) if !node.ready => {
                Some(format!("node {} (machine {id}) is NotReady: {}", node.name, node.reason))
            }
            (Ok(_), Some(_)) => None,
        };
        let is_ready = machine.spec.connected && nodes.is_ok() && node_problem.is_none();
        if is_ready {
            ready += 1;
            group.ready_replicas += 1;
        } else {
            let why = match (settled.problem(id), &node_problem, nodes) {
                (Some(problem), _, _) => problem.to_string(),
                (None, _, _) if !machine.spec.connected => "Talos has not answered yet".to_string(),
                (None, Some(problem), _) => problem.clone(),
                (None, None, Err(why)) => why.clone(),
                (None, None, Ok(_)) => "not ready".to_string(),
            };
            pending.push(format!("{id}: {why}"));
        }
        if let Some(problem) = node_problem {
            node_problems.push(problem);
        }
        if !rollout::in_flight(machine) {
            let kubelet = node.and_then(|node| node.kubelet_version.clone());
            view.put_written(update(ctx, tenant, machine, is_ready, kubelet).await?);
        }
    }
    write_groups(ctx, tenant, groups).await?;
    let summary = format!("{ready} of {total} machines ready");
    let machines = match pending.is_empty() {
        true => Check::pass("Ready", summary),
        false => Check::fail("Pending", format!("{summary}; {}", pending.join("; "))),
    };
    let nodes = match nodes {
        Err(why) => Check::fail("Waiting", why.clone()),
        Ok(_) if node_problems.is_empty() => Check::pass("Ready", format!("{total} of {total} nodes Ready")),
        Ok(_) => Check::fail("NotReady", node_problems.join("; ")),
    };
    Ok(Readiness { machines, nodes })
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

//! The one mechanism every rolling procedure uses: Talos upgrades
//! (`talos.rs`), config changes that need a reboot (`reboot.rs`), and
//! Kubernetes upgrades, the control-plane components and then the kubelets
//! (`kubernetes.rs`). A [`Procedure`] says, per machine, whether it is due
//! and what for, how a step starts and when it is done; the mechanism
//! chooses the machines and keeps the state.
//!
//! Procedures run one at a time, in that order: the first with a machine
//! due rolls, and the next waits. Control planes go first, one at a time,
//! and only while every other control plane answers, so that etcd never
//! loses more than one member; the one whose etcd member leads goes last,
//! and when the step reboots it hands leadership over
//! (`EtcdForfeitLeadership`) just before. When the leader cannot be told,
//! control planes go in name order and the progress says so. Then the
//! workers of one node group at a time, up to its `maxParallelism` (1 when
//! unset). Only a ready machine starts a step; one that is not makes the
//! procedure wait, with the reason in the progress.
//!
//! The state is in the store, so that a restart or another replica picks
//! up where the last pass stopped and no step runs twice: a machine in
//! flight carries the procedure's annotation (`<intent> <started at>`,
//! written before the call) and its stage. A step that fails to start, or
//! a machine that does not finish within the procedure's timeout, pauses
//! the rollout: the tenant gets [`PAUSED_ANNOTATION`] (the generation it
//! paused at, and the procedure's condition) and the reason in its status.
//! The rollout resumes when the spec changes again, or when an operator
//! removes the annotation.

mod kubernetes;
mod reboot;
mod talos;

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use cms_model::{Kind, Machine, MachineStatus, Role, Tenant};
use cms_store::{Draft, Key, StoreError};
use cms_tenancy::{EtcdMember, NodeRef};
use cms_tofu::{MachinePlan, WorkspacePlan};

use crate::blocker::{MACHINE_MESSAGE_LIMIT, one_line};
use crate::cluster::{self, node_ref};
use crate::leader;
use crate::machines::planned;
use crate::status::UPGRADING;
use crate::view::View;
use crate::{Context, ReconcileError};

pub use kubernetes::{
    KUBELET_ANNOTATION, KUBERNETES_COMPONENTS_ANNOTATION, KUBERNETES_UPGRADING,
    KUBERNETES_VERSION_ANNOTATION, MACHINE_KUBERNETES_ANNOTATION,
};
pub(crate) use kubernetes::{KubernetesRollout, record_version};
pub use reboot::{REBOOTING, REBOOTING_ANNOTATION};
pub use talos::{UPGRADE_TIMEOUT, UPGRADING_ANNOTATION};

/// On a tenant whose rollout is paused: the generation it paused at, then
/// the condition of the procedure that paused.
pub const PAUSED_ANNOTATION: &str = "service.io/rollout-paused";
/// How the message of a machine at which the rollout paused begins; it
/// stays while the rollout is paused.
pub(crate) const STOPPED_NOTE: &str = "the rollout paused at this machine";
/// How often a rollout in progress is looked at.
pub(crate) const UPGRADE_POLL: Duration = Duration::from_secs(2);

/// The conditions of the procedures, each with what it says when done.
pub(crate) const CONDITIONS: [(&str, &str); 3] = [
    (UPGRADING, "every machine runs its desired Talos version"),
    (REBOOTING, "every machine runs its config"),
    (KUBERNETES_UPGRADING, "every machine runs the desired Kubernetes version"),
];

/// Where a tenant's rollout stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Rollout {
    /// No machine is due for any procedure.
    Idle,
    /// A procedure rolls: its condition, and the progress in words.
    Progress { condition: &'static str, message: String },
    /// Stopped, for the reason given.
    Paused { condition: String, reason: String },
}

/// Where a machine stands to a procedure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Goal {
    /// The procedure does not concern it.
    None,
    /// It is where the procedure takes it.
    Reached,
    /// It is due, for this (in words, such as a version).
    Due(String),
}

/// A machine due for a procedure: the machine, its plan, and what for.
type Due = (Machine, MachinePlan, String);

/// What a step of one machine is about to do.
#[derive(Debug, Clone, Default)]
pub(crate) struct Prepared {
    /// Stored in the procedure's annotation before the step starts, and
    /// read back by [`Procedure::check`].
    pub(crate) intent: String,
    /// What the step applies: a config, an installer image.
    pub(crate) payload: Option<String>,
}

/// What a look at a machine in flight found.
#[derive(Debug, Clone)]
pub(crate) enum Checked {
    /// The step is done: annotations to set (`Some`) or remove (`None`),
    /// and the machine's status.
    Done { annotations: Vec<(&'static str, Option<String>)>, status: MachineStatus },
    /// Not yet, and what the machine says.
    Flying(String),
}

/// A rolling procedure: a list of steps, one per machine.
#[async_trait]
pub(crate) trait Procedure: Send + Sync {
    /// The tenant condition that shows its progress.
    fn condition(&self) -> &'static str;
    /// The machine annotation of a step in flight.
    fn annotation(&self) -> &'static str;
    /// The stage of a machine in flight.
    fn stage(&self) -> &'static str;
    /// How long one step may take before the rollout pauses.
    fn timeout(&self) -> Duration;
    /// Whether a step reboots the machine (an etcd leader hands over first).
    fn reboots(&self) -> bool;
    /// Where the machine stands.
    fn goal(&self, machine: &Machine, plan: &MachinePlan) -> Goal;
    /// The progress, such as `2 of 3 machines at the desired Talos version`.
    fn progress(&self, done: usize, total: usize) -> String;
    /// What the step of `machine` towards `target` will do; an error pauses.
    async fn prepare(
        &self,
        machine: &Machine,
        plan: &MachinePlan,
        node: &NodeRef,
        target: &str,
    ) -> Result<Prepared, String>;
    /// Starts the step, its intent already stored; an error pauses.
    async fn start(&self, node: &NodeRef, prepared: &Prepared) -> Result<(), String>;
    /// Looks at a machine in flight with its stored `intent`.
    async fn check(&self, machine: &Machine, node: &NodeRef, intent: &str) -> Checked;
    /// Called in a pass where no machine is due or in flight.
    async fn finished(&self) -> Result<(), ReconcileError> {
        Ok(())
    }
}

/// The procedures of a tenant, in the order they roll.
pub(crate) fn procedures(
    tenant: &Tenant,
    kubernetes: &KubernetesRollout,
    ctx: &Context,
) -> Vec<Box<dyn Procedure>> {
    vec![
        Box::new(talos::TalosUpgrade::new(tenant, ctx)),
        Box::new(reboot::Reboot::new(tenant, kubernetes, ctx)),
        Box::new(kubernetes::KubernetesUpgrade::components(tenant, kubernetes, ctx)),
        Box::new(kubernetes::KubernetesUpgrade::kubelets(tenant, kubernetes, ctx)),
    ]
}

/// The annotations of a machine in a rolling step, one per procedure.
pub(crate) const IN_FLIGHT_ANNOTATIONS: [&str; 4] =
    [UPGRADING_ANNOTATION, REBOOTING_ANNOTATION, KUBERNETES_COMPONENTS_ANNOTATION, KUBELET_ANNOTATION];

/// Whether a machine is in a rolling step of any procedure.
pub(crate) fn in_flight(machine: &Machine) -> bool {
    IN_FLIGHT_ANNOTATIONS.iter().any(|annotation| machine.metadata.annotations.contains_key(*annotation))
}

/// Takes the rollout one step: looks at the machines in flight, then
/// starts the next batch of the first procedure with machines due when
/// none is, and `may_start` (no machine is on its way out, which would
/// leave etcd or a group short of one more).
pub(crate) async fn advance(
    tenant: &Tenant,
    generation: u64,
    plan: &WorkspacePlan,
    view: &mut View,
    (procedures, may_start): (&[Box<dyn Procedure>], bool),
    ctx: &Context,
) -> Result<Rollout, ReconcileError> {
    let name = tenant.metadata.name.as_str();
    if let Some(paused) = tenant.metadata.annotations.get(PAUSED_ANNOTATION) {
        let (at, condition) = paused.split_once(' ').unwrap_or((paused, UPGRADING));
        if at == generation.to_string() {
            // The reason is in the procedure's condition, which only the
            // rollout writes.
            let recorded =
                tenant.status.conditions.iter().find(|c| c.kind == condition && c.reason == "Paused");
            let reason = recorded
                .map(|c| c.message.clone())
                .or_else(|| tenant.status.message.clone())
                .unwrap_or_else(|| "the rollout is paused".into());
            return Ok(Rollout::Paused { condition: condition.to_string(), reason });
        }
        // The spec changed since: resume.
        set_annotation(ctx, name, PAUSED_ANNOTATION, None).await?;
    }
    // The machines in flight, whatever their procedure.
    let mut flying: Option<(&dyn Procedure, Vec<String>)> = None;
    for procedure in procedures {
        let annotation = procedure.annotation();
        let machines: Vec<Machine> =
            view.live().filter(|m| m.metadata.annotations.contains_key(annotation)).cloned().collect();
        for machine in machines {
            let value = &machine.metadata.annotations[annotation];
            let (intent, since) = value.rsplit_once(' ').unwrap_or((value, ""));
            let since = DateTime::parse_from_rfc3339(since)
                .map(|at| at.with_timezone(&Utc))
                .unwrap_or_else(|_| Utc::now());
            let Some(node) = node_ref(name, &machine) else { continue };
            match procedure.check(&machine, &node, intent).await {
                Checked::Done { annotations, status } => {
                    let mut changes = annotations;
                    changes.push((annotation, None));
                    view.put_written(mark(ctx, name, &machine, &changes, status).await?);
                    tracing::info!(tenant = name, machine = %machine.metadata.name, step = %procedure.stage(), "step done");
                }
                Checked::Flying(seen) => {
                    let elapsed = (Utc::now() - since).to_std().unwrap_or_default();
                    if elapsed > procedure.timeout() {
                        let reason = format!(
                            "machine {} did not finish its step ({}, {intent}) within {}s: {seen}",
                            machine.metadata.name,
                            procedure.stage(),
                            procedure.timeout().as_secs()
                        );
                        // The step is given up: the machine is due again, and
                        // the node work reaches it, while the rollout is
                        // paused; a resume starts its step anew.
                        let status = MachineStatus {
                            stage: "joining".into(),
                            ready: false,
                            message: Some(stopped(&reason)),
                            ..machine.status.clone()
                        };
                        view.put_written(mark(ctx, name, &machine, &[(annotation, None)], status).await?);
                        return pause(ctx, name, generation, procedure.condition(), reason).await;
                    }
                    let entry = flying.get_or_insert_with(|| (procedure.as_ref(), Vec::new()));
                    entry.1.push(machine.metadata.name.clone());
                }
            }
        }
    }
    if let Some((procedure, machines)) = flying {
        let (done, total) = count(procedure, plan, view);
        let message =
            format!("{}; {} {}", procedure.progress(done, total), procedure.stage(), machines.join(", "));
        return Ok(Rollout::Progress { condition: procedure.condition(), message });
    }
    for procedure in procedures {
        let due: Vec<Due> = view
            .live()
            .filter_map(|machine| {
                let machine_plan = planned(plan, &machine.metadata.name)?;
                match procedure.goal(machine, machine_plan) {
                    Goal::Due(target) => Some((machine.clone(), machine_plan.clone(), target)),
                    Goal::None | Goal::Reached => None,
                }
            })
            .collect();
        if due.is_empty() {
            procedure.finished().await?;
            continue;
        }
        if !may_start {
            let (done, total) = count(procedure.as_ref(), plan, view);
            let message =
                format!("{}; waiting for the machines that leave first", procedure.progress(done, total));
            return Ok(Rollout::Progress { condition: procedure.condition(), message });
        }
        return start(tenant, generation, plan, view, procedure.as_ref(), due, ctx).await;
    }
    Ok(Rollout::Idle)
}

/// How many machines the procedure concerns, and how many are where it
/// takes them.
fn count(procedure: &dyn Procedure, plan: &WorkspacePlan, view: &View) -> (usize, usize) {
    let goals: Vec<Goal> = view
        .live()
        .filter_map(|machine| Some(procedure.goal(machine, planned(plan, &machine.metadata.name)?)))
        .filter(|goal| *goal != Goal::None)
        .collect();
    (goals.iter().filter(|goal| **goal == Goal::Reached).count(), goals.len())
}

/// Starts the next batch of `procedure` among the machines `due`: one
/// control plane, or the workers of one group up to its `maxParallelism`.
async fn start(
    tenant: &Tenant,
    generation: u64,
    plan: &WorkspacePlan,
    view: &mut View,
    procedure: &dyn Procedure,
    due: Vec<Due>,
    ctx: &Context,
) -> Result<Rollout, ReconcileError> {
    let name = tenant.metadata.name.as_str();
    let (done, total) = count(procedure, plan, view);
    let progress = |waiting: String| Rollout::Progress {
        condition: procedure.condition(),
        message: format!("{}; {waiting}", procedure.progress(done, total)),
    };
    let mut groups: BTreeMap<(bool, String), Vec<Due>> = BTreeMap::new();
    for entry in due {
        groups.entry((entry.1.role != Role::ControlPlane, entry.1.group.clone())).or_default().push(entry);
    }
    let Some(((workers, group), candidates)) = groups.into_iter().next() else { return Ok(Rollout::Idle) };
    let (ready, waiting): (Vec<_>, Vec<_>) =
        candidates.into_iter().partition(|(machine, ..)| machine.status.ready);
    if ready.is_empty() {
        let names: Vec<&str> = waiting.iter().map(|(machine, ..)| machine.metadata.name.as_str()).collect();
        return Ok(progress(format!("waiting for {} to be ready", names.join(", "))));
    }
    let mut note = None;
    let batch = if workers {
        let groups = tenant.spec.node_groups.as_deref().unwrap_or_default();
        let parallel = groups.iter().find(|g| g.name == group).and_then(|g| g.max_parallelism).unwrap_or(1);
        ready.into_iter().take(parallel.max(1) as usize).collect()
    } else {
        let control_planes: Vec<&Machine> = view
            .live()
            .filter(|machine| {
                planned(plan, &machine.metadata.name).is_some_and(|m| m.role == Role::ControlPlane)
            })
            .collect();
        // etcd must be whole before a control plane goes.
        let leader = match etcd_whole(name, &control_planes, ctx).await {
            Ok((members, answers)) => leader::leader_of(&members, &answers, &control_planes),
            Err(why) => {
                return Ok(progress(format!("waiting for etcd before the next control plane: {why}")));
            }
        };
        let Some((next, order)) = next_control_plane(name, leader, ready) else {
            return Ok(Rollout::Idle);
        };
        let next_name = next.0.metadata.name.clone();
        // Only while every other control plane answers.
        for other in control_planes.iter().filter(|cp| cp.metadata.name != next_name) {
            let Some(node) = node_ref(name, other) else { continue };
            if let Err(reason) = ctx.nodes.version(&node).await {
                return Ok(progress(format!(
                    "waiting for control plane {} to answer before {next_name}: {reason}",
                    other.metadata.name
                )));
            }
        }
        if procedure.reboots() && order == Order::LeaderNow && control_planes.len() > 1 {
            let Some(node) = node_ref(name, &next.0) else { return Ok(Rollout::Idle) };
            match ctx.nodes.etcd_forfeit_leadership(&node).await {
                Ok(now) => tracing::info!(
                    tenant = name,
                    machine = %next_name,
                    leader = now.as_deref().unwrap_or("unchanged"),
                    "the etcd leader handed over before its reboot"
                ),
                Err(reason) => {
                    return Ok(progress(format!(
                        "waiting for control plane {next_name}, the etcd leader, to hand over first: {reason}"
                    )));
                }
            }
        }
        note = match order {
            Order::ByName(why) => Some(format!("control planes go in name order: {why}")),
            Order::LeaderLater | Order::LeaderNow => None,
        };
        vec![next]
    };
    let mut started = Vec::new();
    for (machine, machine_plan, target) in batch {
        let Some(node) = node_ref(name, &machine) else { continue };
        let prepared = match procedure.prepare(&machine, &machine_plan, &node, &target).await {
            Ok(prepared) => prepared,
            Err(reason) => {
                let reason = format!("machine {} ({}): {reason}", machine.metadata.name, procedure.stage());
                return pause(ctx, name, generation, procedure.condition(), reason).await;
            }
        };
        // The intent is stored before the call: after a crash at any point,
        // a machine marked in flight is looked at, never started twice.
        let value = format!("{} {}", prepared.intent, Utc::now().to_rfc3339());
        let status =
            MachineStatus { stage: procedure.stage().into(), ready: false, ..machine.status.clone() };
        let Some(marked) =
            mark(ctx, name, &machine, &[(procedure.annotation(), Some(value))], status).await?
        else {
            continue;
        };
        if let Err(reason) = procedure.start(&node, &prepared).await {
            let reason =
                format!("machine {} ({} to {target}): {reason}", machine.metadata.name, procedure.stage());
            let status = MachineStatus { message: Some(stopped(&reason)), ..machine.status.clone() };
            let restored = mark(ctx, name, &marked, &[(procedure.annotation(), None)], status).await?;
            view.put_written(restored);
            return pause(ctx, name, generation, procedure.condition(), reason).await;
        }
        tracing::info!(tenant = name, machine = %machine.metadata.name, step = procedure.stage(), %target, "step started");
        started.push(machine.metadata.name.clone());
        view.put(marked);
    }
    let mut message = procedure.progress(done, total);
    if !started.is_empty() {
        message.push_str(&format!("; {} {}", procedure.stage(), started.join(", ")));
    }
    if let Some(note) = note {
        message.push_str(&format!("; {note}"));
    }
    Ok(Rollout::Progress { condition: procedure.condition(), message })
}

/// Whether etcd is whole: every control plane is a voting member, and every
/// member answers `EtcdStatus` without errors; gives the members and their
/// answers, else why not.
async fn etcd_whole(
    tenant: &str,
    control_planes: &[&Machine],
    ctx: &Context,
) -> Result<(Vec<EtcdMember>, Vec<cluster::Answer>), String> {
    let members = cluster::members(tenant, control_planes, ctx).await?;
    if let Some(learner) = members.iter().find(|member| member.is_learner) {
        return Err(format!("member {} is still a learner", learner.hostname));
    }
    let missing: Vec<&str> = control_planes
        .iter()
        .filter(|machine| !members.iter().any(|member| cluster::machine_of(member, &[machine]).is_some()))
        .map(|machine| machine.metadata.name.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(format!("control planes {} are not members", missing.join(", ")));
    }
    let answers = cluster::statuses(tenant, &members, control_planes, ctx).await;
    let problems: Vec<&str> = answers
        .iter()
        .filter_map(|answer| match answer {
            cluster::Answer::Fine(_) => None,
            cluster::Answer::Alarm(why) | cluster::Answer::Silent(why) => Some(why.as_str()),
        })
        .collect();
    match problems.is_empty() {
        true => Ok((members, answers)),
        false => Err(problems.join("; ")),
    }
}

/// Where the control plane to start next stands to the etcd leader.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Order {
    /// It does not lead; the leader comes later (or is done).
    LeaderLater,
    /// It leads, and every other control plane is done.
    LeaderNow,
    /// The leader could not be told (why), so it is the first by name.
    ByName(String),
}

/// The control plane to start next: the first by name that does not lead
/// etcd, else the leader; the first by name when the leader cannot be
/// told. `candidates` are in name order.
fn next_control_plane<T>(
    tenant: &str,
    leader: Result<String, String>,
    candidates: Vec<(Machine, MachinePlan, T)>,
) -> Option<((Machine, MachinePlan, T), Order)> {
    let leader = match leader {
        Ok(leader) => leader,
        Err(why) => {
            tracing::warn!(tenant, "the etcd leader is unknown, control planes go in name order: {why}");
            let first = candidates.into_iter().next()?;
            return Some((first, Order::ByName(format!("the etcd leader is unknown ({why})"))));
        }
    };
    let (leading, others): (Vec<_>, Vec<_>) =
        candidates.into_iter().partition(|(machine, ..)| machine.metadata.name == leader);
    if let Some(other) = others.into_iter().next() {
        return Some((other, Order::LeaderLater));
    }
    leading.into_iter().next().map(|leading| (leading, Order::LeaderNow))
}

/// The message of a machine at which the rollout paused, for `reason`.
fn stopped(reason: &str) -> String {
    one_line(&format!("{STOPPED_NOTE}: {reason}"), MACHINE_MESSAGE_LIMIT)
}

async fn pause(
    ctx: &Context,
    tenant: &str,
    generation: u64,
    condition: &str,
    reason: String,
) -> Result<Rollout, ReconcileError> {
    tracing::warn!(tenant, "rollout paused: {reason}");
    set_annotation(ctx, tenant, PAUSED_ANNOTATION, Some(format!("{generation} {condition}"))).await?;
    Ok(Rollout::Paused { condition: condition.to_string(), reason })
}

/// Sets (`Some`) or removes (`None`) the machine's `annotations`, then
/// writes `status`; gives the machine as written, or `None` when another
/// writer changed it meanwhile.
async fn mark(
    ctx: &Context,
    tenant: &str,
    machine: &Machine,
    annotations: &[(&str, Option<String>)],
    status: MachineStatus,
) -> Result<Option<Machine>, ReconcileError> {
    let key = Key::child(Kind::Machine, tenant, machine.metadata.name.clone());
    let mut changed = machine.metadata.annotations.clone();
    for (name, value) in annotations {
        match value {
            Some(value) => changed.insert(name.to_string(), value.clone()),
            None => changed.remove(*name),
        };
    }
    let draft = Draft {
        labels: machine.metadata.labels.clone(),
        annotations: changed,
        spec: serde_json::to_value(&machine.spec).map_err(|source| corrupt(&key, source))?,
        ..Draft::default()
    };
    let version = machine.metadata.resource_version.unwrap_or_default();
    let object = match ctx.store.update(key.clone(), draft, version).await {
        Ok(object) => object,
        Err(StoreError::Conflict { .. } | StoreError::NotFound(_)) => return Ok(None),
        Err(err) => return Err(err.into()),
    };
    let value = serde_json::to_value(&status).map_err(|source| corrupt(&key, source))?;
    let object = ctx.store.update_status(key.clone(), value, Some(object.resource_version)).await?;
    Ok(Some(object.parse().map_err(|source| corrupt(&key, source))?))
}

/// Sets (or with `None` removes) one of the tenant's annotations, keeping
/// its stored spec as it is.
pub(crate) async fn set_annotation(
    ctx: &Context,
    tenant: &str,
    name: &str,
    value: Option<String>,
) -> Result<(), ReconcileError> {
    let key = Key::tenant(tenant);
    for _ in 0..10 {
        let Some(object) = ctx.store.get(&key) else { return Ok(()) };
        let raw: serde_json::Value =
            serde_json::from_slice(&object.json).map_err(|source| corrupt(&key, source))?;
        let mut draft = Draft::tenant_as_stored(&raw);
        let changed = match &value {
            Some(value) => draft.annotations.insert(name.to_string(), value.clone()).as_ref() != Some(value),
            None => draft.annotations.remove(name).is_some(),
        };
        if !changed {
            return Ok(());
        }
        match ctx.store.update(key.clone(), draft, object.resource_version).await {
            Ok(_) | Err(StoreError::NotFound(_)) => return Ok(()),
            Err(StoreError::Conflict { .. }) => continue,
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}

fn corrupt(key: &Key, source: serde_json::Error) -> ReconcileError {
    ReconcileError::Corrupt { what: key.to_string(), source }
}

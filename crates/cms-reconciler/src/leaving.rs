//! Machines leave a tenant safely, before the infrastructure lets them go.
//!
//! A machine the workspace no longer holds (a scale-down), one being
//! replaced (`replacement.rs`), and one an operator deleted through the API
//! (which is then rebuilt in place) walk these steps, each recorded in its [`LEAVING_ANNOTATION`] (`<step> <since>`) and shown
//! as its `stage`, so that a restart or another replica picks up where the
//! last pass stopped:
//!
//! 1. It is `draining`, a control plane as a worker: its Node is cordoned
//!    and its pods evicted through the eviction API, which
//!    PodDisruptionBudgets may refuse for a while; after [`DRAIN_TIMEOUT`]
//!    it goes on regardless.
//! 2. A control plane is `leaving-etcd`: `EtcdLeaveCluster` on it, or
//!    `EtcdRemoveMemberByID` from another member when it does not answer.
//!    It waits while any other member does not answer, since removing a
//!    member then could cost etcd its quorum; control planes leave one at
//!    a time.
//! 3. A metal host is `resetting`: `Reset` wipes it and it reboots into
//!    maintenance mode, free for reuse (graceful for a worker; a control
//!    plane has left etcd already). A host that does not answer for
//!    [`RESET_TIMEOUT`] is let go, with a warning, and one that does not
//!    answer as the tenant's node (a replaced host the operator confirmed
//!    with a DELETE) is not reset at all; it was never wiped, so
//!    it stays configured: only a `Reset` the node acknowledged removes
//!    [`CONFIG_HASH_ANNOTATION`], and a host let go keeps being spoken to
//!    over mTLS only (when its machine is removed, the tenant's
//!    `service.io/configured-hosts` remembers its address, `machines.rs`).
//! 4. `removing-node`: its Node object is deleted.
//! 5. `deleting`: done; the next apply removes it.
//!
//! Before etcd is bootstrapped there is no etcd to leave and no API to
//! drain through. A metal host that never took a config leaves at once. A
//! machine the workspace holds again once it has left starts anew: from
//! maintenance mode when its host was reset, else configured, its config
//! due over mTLS ([`CONFIG_UNKNOWN`]). An operator who wiped such a host by
//! hand DELETEs its machine, which starts it anew.

use std::time::Duration;

use chrono::{DateTime, Utc};
use cms_model::{Kind, Machine, MachineStatus, Provider, Role};
use cms_store::Key;
use cms_tofu::WorkspacePlan;

use crate::blocker::listed;
use crate::cluster::{self, Answer, machine_of, node_of, node_ref};
use crate::machines::{newest_first, planned};
use crate::replacement::is_replacing;
use crate::settle::{CONFIG_HASH_ANNOTATION, CONFIG_UNKNOWN, Observed, write};
use crate::view::View;
use crate::{Context, ReconcileError};
use cms_tenancy::NodeError;

/// The machine annotation of a leaving machine: `<step> <since>`.
pub const LEAVING_ANNOTATION: &str = "service.io/leaving";
/// How long a drain may take before the worker leaves regardless.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a host that does not answer `Reset` (or an API that does not
/// delete its Node) is waited for.
pub const RESET_TIMEOUT: Duration = Duration::from_secs(120);

/// A step of leaving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Draining,
    LeavingEtcd,
    Resetting,
    RemovingNode,
    Left,
}

impl Step {
    fn stage(self) -> &'static str {
        match self {
            Step::Draining => "draining",
            Step::LeavingEtcd => "leaving-etcd",
            Step::Resetting => "resetting",
            Step::RemovingNode => "removing-node",
            Step::Left => "deleting",
        }
    }

    fn parse(stage: &str) -> Option<Step> {
        [Step::Draining, Step::LeavingEtcd, Step::Resetting, Step::RemovingNode, Step::Left]
            .into_iter()
            .find(|step| step.stage() == stage)
    }
}

/// Where the leaving machines stand.
#[derive(Debug, Default)]
pub(crate) struct Leaving {
    /// Machines still leaving, each with what it waits for.
    pub(crate) waiting: Vec<String>,
    /// Machines that left, for the next apply to remove.
    pub(crate) left: usize,
}

impl Leaving {
    /// Nothing is on its way out: the infrastructure may change.
    pub(crate) fn settled(&self) -> bool {
        self.waiting.is_empty()
    }
}

/// Whether a machine has left: every step is done.
pub(crate) fn is_left(machine: &Machine) -> bool {
    matches!(current(machine), Some((Step::Left, _)))
}

/// Whether a machine is on its way out (or out), and not the node work's.
pub(crate) fn is_leaving(machine: &Machine) -> bool {
    machine.metadata.annotations.contains_key(LEAVING_ANNOTATION)
}

/// Moves every leaving machine as far as it can go in this pass: those the
/// workspace no longer holds, those being replaced, and those an operator
/// deleted through the API (replaced once they left).
pub(crate) async fn advance(
    tenant: &str,
    plan: &WorkspacePlan,
    view: &mut View,
    bootstrapped: bool,
    ctx: &Context,
) -> Result<Leaving, ReconcileError> {
    let present: Vec<Machine> = view.values().cloned().collect();
    let present: Vec<&Machine> = present.iter().collect();
    let mut leaving = Leaving::default();
    let mut control_plane_busy = false;
    for id in newest_first(present.iter().map(|machine| machine.metadata.name.clone())) {
        let machine = &view[&id];
        let deleted = machine.metadata.deletion_timestamp.is_some();
        // A machine being replaced leaves as if scaled down.
        let wanted = planned(plan, &id).is_some() && !is_replacing(machine) && !deleted;
        let step = current(machine);
        if wanted && matches!(step, None | Some((Step::Left, _))) {
            if step.is_some() {
                let written = rejoin(ctx, tenant, machine).await?;
                view.put_written(written);
            }
            continue;
        }
        let role = machine.status.role.unwrap_or(Role::Worker);
        if role == Role::ControlPlane && control_plane_busy {
            leaving.waiting.push(format!("{id}: waiting for the control plane before it to leave"));
            continue;
        }
        let (outcome, walked) = walk(tenant, machine, &present, bootstrapped, ctx).await?;
        view.put(walked);
        match outcome {
            None => leaving.left += 1,
            Some(why) => {
                control_plane_busy |= role == Role::ControlPlane;
                leaving.waiting.push(format!("{id}: {why}"));
            }
        }
    }
    Ok(leaving)
}

/// The recorded step of a machine and since when.
fn current(machine: &Machine) -> Option<(Step, DateTime<Utc>)> {
    let value = machine.metadata.annotations.get(LEAVING_ANNOTATION)?;
    let (step, since) = value.split_once(' ').unwrap_or((value, ""));
    let since =
        DateTime::parse_from_rfc3339(since).map(|at| at.with_timezone(&Utc)).unwrap_or_else(|_| Utc::now());
    Some((Step::parse(step)?, since))
}

/// Walks one machine through its steps: `None` once it left, else what it
/// waits for; and the machine as last written.
async fn walk(
    tenant: &str,
    machine: &Machine,
    live: &[&Machine],
    bootstrapped: bool,
    ctx: &Context,
) -> Result<(Option<String>, Machine), ReconcileError> {
    let metal = machine.spec.provider_type.as_deref() == Some(Provider::Metal.as_str());
    let role = machine.status.role.unwrap_or(Role::Worker);
    let (mut step, mut since) = match current(machine) {
        Some(recorded) => recorded,
        None if metal && !machine.metadata.annotations.contains_key(CONFIG_HASH_ANNOTATION) => {
            (Step::Left, Utc::now())
        }
        None if !bootstrapped => (Step::Resetting, Utc::now()),
        None => (Step::Draining, Utc::now()),
    };
    // A control plane leaves etcd once drained; a worker has no member.
    let drained = match role {
        Role::ControlPlane => Step::LeavingEtcd,
        Role::Worker => Step::Resetting,
    };
    let mut machine = machine.clone();
    // Whether the node acknowledged its `Reset`: only then is it wiped.
    let mut wiped = false;
    loop {
        let elapsed = (Utc::now() - since).to_std().unwrap_or_default();
        let next = match step {
            Step::Draining => drain(tenant, &machine, elapsed, ctx).await.map(|()| drained),
            Step::LeavingEtcd => leave_etcd(tenant, &machine, live, ctx).await,
            Step::Resetting if !metal => Ok(Step::RemovingNode),
            Step::Resetting => reset(tenant, &machine, role, elapsed, ctx).await.map(|acknowledged| {
                wiped = acknowledged;
                Step::RemovingNode
            }),
            Step::RemovingNode if !bootstrapped => Ok(Step::Left),
            Step::RemovingNode => remove_node(tenant, &machine, elapsed, ctx).await,
            Step::Left => Err(String::new()),
        };
        let recorded = current(&machine).map(|(step, _)| step);
        let (target, why) = match next {
            Ok(next) => (next, None),
            Err(why) => (step, Some(why)),
        };
        if recorded != Some(target) {
            if target != step {
                since = Utc::now();
            }
            machine = record(ctx, tenant, &machine, (target, since), metal, wiped).await?;
        }
        step = target;
        match why {
            Some(why) if step != Step::Left => return Ok((Some(why), machine)),
            _ if step == Step::Left => return Ok((None, machine)),
            _ => {}
        }
    }
}

/// Writes the step into the machine's annotation and stage; a host whose
/// node acknowledged its reset (`wiped`) has no config any more, and one
/// let go without has it still.
async fn record(
    ctx: &Context,
    tenant: &str,
    machine: &Machine,
    (step, since): (Step, DateTime<Utc>),
    metal: bool,
    wiped: bool,
) -> Result<Machine, ReconcileError> {
    let mut annotations = machine.metadata.annotations.clone();
    annotations.insert(LEAVING_ANNOTATION.to_string(), format!("{} {}", step.stage(), since.to_rfc3339()));
    if wiped {
        annotations.remove(CONFIG_HASH_ANNOTATION);
    }
    // Its Node goes at `removing-node`; the machine stops answering for good once it left.
    let gone = metal && step == Step::Left;
    let status = MachineStatus { stage: step.stage().to_string(), ready: false, ..machine.status.clone() };
    // A machine deleted through the API keeps its spec.
    let deleted = machine.metadata.deletion_timestamp.is_some();
    let connected = machine.spec.connected && (deleted || !gone);
    tracing::info!(tenant, machine = %machine.metadata.name, stage = step.stage(), "leaving");
    let observed = Observed { annotations, connected, status };
    let mut next = machine.clone();
    next.metadata.annotations = observed.annotations.clone();
    next.spec.connected = observed.connected;
    next.status = observed.status.clone();
    // The machine as written, with its new version: the next step's write
    // with the old one would be lost, and an acknowledged reset with it.
    if let Some(written) = write(ctx, tenant, machine, observed).await? {
        return Ok(written);
    }
    let key = Key::child(Kind::Machine, tenant, machine.metadata.name.clone());
    Ok(ctx.store.get(&key).and_then(|object| object.parse().ok()).unwrap_or(next))
}

/// A machine that left is wanted again: it starts anew, from maintenance
/// mode when its host was reset; a host that was not is still configured,
/// and takes its config again over mTLS.
async fn rejoin(ctx: &Context, tenant: &str, machine: &Machine) -> Result<Option<Machine>, ReconcileError> {
    let mut annotations = machine.metadata.annotations.clone();
    annotations.remove(LEAVING_ANNOTATION);
    // A rolling step it was in is over: it is due again, if it still is.
    for step in crate::rollout::IN_FLIGHT_ANNOTATIONS {
        annotations.remove(step);
    }
    if annotations.contains_key(CONFIG_HASH_ANNOTATION) {
        annotations.insert(CONFIG_HASH_ANNOTATION.to_string(), CONFIG_UNKNOWN.to_string());
    }
    let status = MachineStatus { stage: "provisioning".into(), ready: false, ..machine.status.clone() };
    write(ctx, tenant, machine, Observed { annotations, connected: false, status }).await
}

/// One round of draining a machine: cordon, evict, and go on once nothing
/// is left or the drain took too long.
async fn drain(tenant: &str, machine: &Machine, elapsed: Duration, ctx: &Context) -> Result<(), String> {
    let late = elapsed > DRAIN_TIMEOUT;
    let round = async {
        let nodes = ctx.kube.nodes(tenant).await.map_err(|err| format!("listing the Nodes: {err}"))?;
        let Some(node) = node_of(machine, &nodes) else { return Ok(None) };
        if !node.unschedulable {
            ctx.kube
                .cordon(tenant, &node.name)
                .await
                .map_err(|err| format!("cordoning {}: {err}", node.name))?;
        }
        let drain = ctx
            .kube
            .evict(tenant, &node.name)
            .await
            .map_err(|err| format!("draining {}: {err}", node.name))?;
        Ok(Some((node.name.clone(), drain)))
    };
    let outcome: Result<_, String> = round.await;
    let why = match outcome {
        Ok(None) => return Ok(()),
        Ok(Some((_, drain))) if drain.done() => return Ok(()),
        Ok(Some((node, drain))) => {
            let held = match drain.blocked.is_empty() {
                true => String::new(),
                false => format!(" ({} held by a PodDisruptionBudget)", drain.blocked.join(", ")),
            };
            format!("draining node {node}: {} pods left{held}", drain.remaining.len())
        }
        Err(why) => why,
    };
    if late {
        tracing::warn!(tenant, machine = %machine.metadata.name, %why, "the drain timed out; going on");
        return Ok(());
    }
    Err(why)
}

/// A control plane leaves etcd, while every other member answers.
async fn leave_etcd(
    tenant: &str,
    machine: &Machine,
    live: &[&Machine],
    ctx: &Context,
) -> Result<Step, String> {
    let control_planes: Vec<&Machine> = live
        .iter()
        .filter(|other| {
            other.status.role == Some(Role::ControlPlane) && other.spec.management_address.is_some()
        })
        .filter(|other| {
            !matches!(current(other), Some((Step::Resetting | Step::RemovingNode | Step::Left, _)))
        })
        .copied()
        .collect();
    let others: Vec<&Machine> =
        control_planes.iter().filter(|other| other.metadata.name != machine.metadata.name).copied().collect();
    let mut askable = others.clone();
    askable.push(machine);
    let members = cluster::members(tenant, &askable, ctx).await?;
    let Some(member) = members.iter().find(|member| machine_of(member, &[machine]).is_some()) else {
        return Ok(Step::Resetting);
    };
    let remaining: Vec<_> = members.iter().filter(|m| m.id != member.id).cloned().collect();
    if remaining.is_empty() {
        return Err("it is etcd's last member; a tenant keeps at least one control plane".into());
    }
    let answers = cluster::statuses(tenant, &remaining, &control_planes, ctx).await;
    let silent: Vec<String> = answers
        .iter()
        .filter_map(|answer| match answer {
            Answer::Silent(why) => Some(why.clone()),
            _ => None,
        })
        .collect();
    if !silent.is_empty() {
        return Err(format!("waiting to leave etcd without losing quorum: {}", listed(&silent)));
    }
    let own = node_ref(tenant, machine).ok_or("it has no address")?;
    let Err(left) = ctx.nodes.etcd_leave(&own).await else {
        tracing::info!(tenant, machine = %machine.metadata.name, "left etcd");
        return Ok(Step::Resetting);
    };
    for other in &others {
        let Some(node) = node_ref(tenant, other) else { continue };
        if ctx.nodes.etcd_remove_member(&node, member.id).await.is_ok() {
            tracing::info!(tenant, machine = %machine.metadata.name, by = %other.metadata.name, "removed from etcd");
            return Ok(Step::Resetting);
        }
    }
    Err(format!("leaving etcd: {left}; no other member removed it"))
}

/// A metal host wipes itself; one that does not answer is let go after a
/// while. Gives whether the node acknowledged the reset.
async fn reset(
    tenant: &str,
    machine: &Machine,
    role: Role,
    elapsed: Duration,
    ctx: &Context,
) -> Result<bool, String> {
    let Some(node) = node_ref(tenant, machine) else { return Ok(false) };
    match ctx.nodes.reset(&node, role != Role::ControlPlane).await {
        Ok(()) => {
            tracing::info!(tenant, machine = %machine.metadata.name, "reset");
            Ok(true)
        }
        // The host is no longer the tenant's node (in maintenance mode, or
        // another cluster's): there is nothing of the tenant's to wipe.
        Err(err @ NodeError::Untrusted { .. }) => {
            tracing::warn!(tenant, machine = %machine.metadata.name, %err, "not resetting a host that is not the tenant's node");
            Ok(false)
        }
        Err(err) if elapsed > RESET_TIMEOUT => {
            tracing::warn!(tenant, machine = %machine.metadata.name, %err, "the host did not reset; letting it go, still configured");
            Ok(false)
        }
        Err(err) => Err(format!("resetting: {err}")),
    }
}

/// Deletes the machine's Node object.
async fn remove_node(
    tenant: &str,
    machine: &Machine,
    elapsed: Duration,
    ctx: &Context,
) -> Result<Step, String> {
    let outcome = async {
        let nodes = ctx.kube.nodes(tenant).await.map_err(|err| format!("listing the Nodes: {err}"))?;
        if let Some(node) = node_of(machine, &nodes) {
            ctx.kube
                .delete_node(tenant, &node.name)
                .await
                .map_err(|err| format!("deleting {}: {err}", node.name))?;
        }
        Ok::<(), String>(())
    };
    match outcome.await {
        Ok(()) => Ok(Step::Left),
        Err(why) if elapsed > RESET_TIMEOUT => {
            tracing::warn!(tenant, machine = %machine.metadata.name, %why, "the Node was not deleted; going on");
            Ok(Step::Left)
        }
        Err(why) => Err(why),
    }
}

//! Rolling Talos upgrades, in place through the node API's `Upgrade`.
//!
//! A machine whose Talos version differs from its group's (or else the
//! tenant's) `talosVersion` is outdated. Control planes go first, one at a
//! time, and only while every other control plane answers, so that etcd
//! never loses more than one member; the one whose etcd member leads goes
//! last, and hands leadership over (`EtcdForfeitLeadership`) just before
//! its `Upgrade`. When the leader cannot be told, control planes go in name
//! order and the progress says so. Then the workers of one node group at
//! a time, up to its `maxParallelism` (1 when unset). A machine moves on
//! only when it answers `Version` with the new tag.
//!
//! The rollout keeps its state in the store, so that it survives a restart
//! and never upgrades a machine twice: a machine in flight carries
//! [`UPGRADING_ANNOTATION`] (`<version> <started at>`) and the stage
//! `upgrading`. A failed `Upgrade`, or a machine that does not come back in
//! [`UPGRADE_TIMEOUT`], pauses the rollout: the tenant gets
//! [`PAUSED_ANNOTATION`] (the generation it paused at) and the reason in its
//! status. The rollout resumes when the spec changes again, or when an
//! operator removes the annotation.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use cms_model::{Kind, Machine, MachineStatus, Role, Tenant};
use cms_store::{Draft, Key, StoreError};
use cms_tofu::WorkspacePlan;

use crate::leader;
use crate::leaving::is_leaving;
use crate::machines::{self, planned};
use crate::{Context, ReconcileError};
use cms_tenancy::NodeRef;

/// On a machine being upgraded: the version and when the upgrade began.
pub const UPGRADING_ANNOTATION: &str = "service.io/upgrading-to";
/// On a tenant whose rollout is paused: the generation it paused at.
pub const PAUSED_ANNOTATION: &str = "service.io/rollout-paused";
/// How long an upgraded machine may take to answer with its new version.
pub const UPGRADE_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// How often a rollout in progress is looked at.
pub(crate) const UPGRADE_POLL: Duration = Duration::from_secs(2);

/// Where a tenant's rollout stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Rollout {
    /// Every machine runs its desired version, or none has one.
    Idle,
    /// `done` of `total` machines run their desired version; `in_flight`
    /// are being upgraded, or `waiting` says why none is.
    Progress { done: usize, total: usize, in_flight: Vec<String>, waiting: Option<String> },
    /// Stopped, for the reason given.
    Paused(String),
}

/// The Talos version a machine of `group` should run, if the spec says.
fn desired(tenant: &Tenant, group: &str) -> Option<String> {
    let groups = tenant.spec.node_groups.as_deref().unwrap_or_default();
    groups
        .iter()
        .find(|candidate| candidate.name == group)
        .and_then(|group| group.talos_version.clone())
        .or_else(|| tenant.spec.talos_version.clone())
}

fn same(a: &str, b: &str) -> bool {
    a.trim_start_matches('v') == b.trim_start_matches('v')
}

/// Takes the rollout one step: checks machines in flight, then starts the
/// next batch when none is.
pub(crate) async fn advance(
    tenant: &Tenant,
    generation: u64,
    plan: &WorkspacePlan,
    ctx: &Context,
) -> Result<Rollout, ReconcileError> {
    let name = tenant.metadata.name.as_str();
    if let Some(paused_at) = tenant.metadata.annotations.get(PAUSED_ANNOTATION) {
        if *paused_at == generation.to_string() {
            let reason = tenant.status.message.clone().unwrap_or_else(|| "the rollout is paused".into());
            return Ok(Rollout::Paused(reason));
        }
        // The spec changed since: resume.
        set_annotation(ctx, name, PAUSED_ANNOTATION, None).await?;
    }
    let stored = machines::stored(ctx.store.as_ref(), name)?;
    let mut total = 0;
    let mut done = 0;
    let mut flying = Vec::new();
    let mut control_planes: Vec<&Machine> = Vec::new();
    let mut outdated: BTreeMap<(bool, String), Vec<(&Machine, String)>> = BTreeMap::new();
    for machine in stored.values().filter(|m| m.metadata.deletion_timestamp.is_none() && !is_leaving(m)) {
        let Some(machine_plan) = planned(plan, &machine.metadata.name) else { continue };
        if machine_plan.role == Role::ControlPlane {
            control_planes.push(machine);
        }
        let Some(want) = desired(tenant, &machine_plan.group) else { continue };
        total += 1;
        if let Some(value) = machine.metadata.annotations.get(UPGRADING_ANNOTATION) {
            match check_in_flight(name, machine, value, ctx).await? {
                InFlight::Done => done += 1,
                InFlight::Flying => flying.push(machine.metadata.name.clone()),
                InFlight::Failed(reason) => return pause(ctx, name, generation, reason).await,
            }
            continue;
        }
        match &machine.status.talos_version {
            Some(running) if same(running, &want) => done += 1,
            Some(_) if machine.status.ready => {
                let key = (machine_plan.role != Role::ControlPlane, machine_plan.group.clone());
                outdated.entry(key).or_default().push((machine, want));
            }
            // Not ready yet: the node work brings it up first.
            _ => {}
        }
    }
    if !flying.is_empty() {
        return Ok(Rollout::Progress { done, total, in_flight: flying, waiting: None });
    }
    let Some(((workers, group), candidates)) = outdated.into_iter().next() else {
        return Ok(Rollout::Idle);
    };
    let mut note = None;
    let batch: Vec<(&Machine, String)> = if workers {
        let groups = tenant.spec.node_groups.as_deref().unwrap_or_default();
        let parallel = groups.iter().find(|g| g.name == group).and_then(|g| g.max_parallelism).unwrap_or(1);
        candidates.into_iter().take(parallel.max(1) as usize).collect()
    } else {
        // One control plane, the leader last, and only while every other one answers.
        let Some((next, order)) = next_control_plane(name, &control_planes, candidates, ctx).await else {
            return Ok(Rollout::Idle);
        };
        let next_name = next.0.metadata.name.clone();
        for other in control_planes.iter().filter(|cp| cp.metadata.name != next_name) {
            if let Err(reason) = ctx.nodes.version(&node_ref(name, other)).await {
                let waiting = format!(
                    "waiting for control plane {} to answer before upgrading {next_name}: {reason}",
                    other.metadata.name
                );
                return Ok(Rollout::Progress { done, total, in_flight: Vec::new(), waiting: Some(waiting) });
            }
        }
        if order == Order::LeaderNow && control_planes.len() > 1 {
            let node = node_ref(name, next.0);
            match ctx.nodes.etcd_forfeit_leadership(&node).await {
                Ok(now) => tracing::info!(
                    tenant = name,
                    machine = %next_name,
                    leader = now.as_deref().unwrap_or("unchanged"),
                    "the etcd leader handed over before its upgrade"
                ),
                Err(reason) => {
                    let waiting = format!(
                        "waiting for control plane {next_name}, the etcd leader, to hand over before its upgrade: {reason}"
                    );
                    return Ok(Rollout::Progress {
                        done,
                        total,
                        in_flight: Vec::new(),
                        waiting: Some(waiting),
                    });
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
    for (machine, want) in batch {
        let node = node_ref(name, machine);
        // The intent is stored before the call: after a crash at any point,
        // a machine marked in flight is asked for its version, never
        // upgraded a second time.
        let in_flight = format!("{want} {}", Utc::now().to_rfc3339());
        let upgrading = MachineStatus { stage: "upgrading".into(), ready: false, ..machine.status.clone() };
        let version = mark(ctx, name, machine, Some(in_flight), upgrading).await?;
        if let Err(reason) = ctx.nodes.upgrade(&node, &want).await {
            let mut marked = machine.clone();
            marked.metadata.resource_version = Some(version);
            mark(ctx, name, &marked, None, machine.status.clone()).await?;
            let reason =
                format!("upgrading machine {} to Talos {want} failed: {reason}", machine.metadata.name);
            return pause(ctx, name, generation, reason).await;
        }
        tracing::info!(tenant = name, machine = %machine.metadata.name, version = %want, "upgrading");
        started.push(machine.metadata.name.clone());
    }
    Ok(Rollout::Progress { done, total, in_flight: started, waiting: note })
}

/// Where the control plane to upgrade next stands to the etcd leader.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Order {
    /// It does not lead; the leader comes later (or is done).
    LeaderLater,
    /// It leads, and every other control plane is done.
    LeaderNow,
    /// The leader could not be told (why), so it is the first by name.
    ByName(String),
}

/// The outdated control plane to upgrade next: the first by name that does
/// not lead etcd, else the leader; the first by name when the leader
/// cannot be told. `candidates` are in name order.
async fn next_control_plane<'a>(
    tenant: &str,
    control_planes: &[&Machine],
    candidates: Vec<(&'a Machine, String)>,
    ctx: &Context,
) -> Option<((&'a Machine, String), Order)> {
    let leader = match leader::leader(tenant, control_planes, ctx).await {
        Ok(leader) => leader,
        Err(why) => {
            tracing::warn!(tenant, "the etcd leader is unknown, control planes go in name order: {why}");
            let first = candidates.into_iter().next()?;
            return Some((first, Order::ByName(format!("the etcd leader is unknown ({why})"))));
        }
    };
    let (leading, others): (Vec<_>, Vec<_>) =
        candidates.into_iter().partition(|(machine, _)| machine.metadata.name == leader);
    if let Some(other) = others.into_iter().next() {
        return Some((other, Order::LeaderLater));
    }
    leading.into_iter().next().map(|leading| (leading, Order::LeaderNow))
}

enum InFlight {
    Done,
    Flying,
    Failed(String),
}

/// A machine in flight: done when it answers with the new tag, failed when
/// it has not within the timeout.
async fn check_in_flight(
    tenant: &str,
    machine: &Machine,
    value: &str,
    ctx: &Context,
) -> Result<InFlight, ReconcileError> {
    let (want, since) = value.split_once(' ').unwrap_or((value, ""));
    let since =
        DateTime::parse_from_rfc3339(since).map(|at| at.with_timezone(&Utc)).unwrap_or_else(|_| Utc::now());
    let answer = ctx.nodes.version(&node_ref(tenant, machine)).await;
    if let Ok(running) = &answer
        && same(running, want)
    {
        let status = MachineStatus {
            stage: "ready".into(),
            ready: true,
            talos_version: Some(running.clone()),
            ..machine.status.clone()
        };
        mark(ctx, tenant, machine, None, status).await?;
        tracing::info!(tenant, machine = %machine.metadata.name, version = %running, "upgraded");
        return Ok(InFlight::Done);
    }
    let elapsed = (Utc::now() - since).to_std().unwrap_or_default();
    if elapsed > UPGRADE_TIMEOUT {
        let seen = match answer {
            Ok(running) => format!("it runs {running}"),
            Err(reason) => reason.to_string(),
        };
        return Ok(InFlight::Failed(format!(
            "machine {} did not come back with Talos {want} within {}s: {seen}",
            machine.metadata.name,
            UPGRADE_TIMEOUT.as_secs()
        )));
    }
    Ok(InFlight::Flying)
}

fn node_ref(tenant: &str, machine: &Machine) -> NodeRef {
    NodeRef {
        tenant: tenant.to_string(),
        machine: machine.metadata.name.clone(),
        management_address: machine.spec.management_address.clone().unwrap_or_default(),
    }
}

async fn pause(
    ctx: &Context,
    tenant: &str,
    generation: u64,
    reason: String,
) -> Result<Rollout, ReconcileError> {
    tracing::warn!(tenant, "rollout paused: {reason}");
    set_annotation(ctx, tenant, PAUSED_ANNOTATION, Some(generation.to_string())).await?;
    Ok(Rollout::Paused(reason))
}

/// Sets (`Some`) or clears (`None`) the machine's in-flight annotation,
/// then writes `status`; gives the machine's new resource version.
async fn mark(
    ctx: &Context,
    tenant: &str,
    machine: &Machine,
    in_flight: Option<String>,
    status: MachineStatus,
) -> Result<u64, ReconcileError> {
    let key = Key::child(Kind::Machine, tenant, machine.metadata.name.clone());
    let mut annotations = machine.metadata.annotations.clone();
    match in_flight {
        Some(value) => annotations.insert(UPGRADING_ANNOTATION.to_string(), value),
        None => annotations.remove(UPGRADING_ANNOTATION),
    };
    let draft = Draft {
        labels: machine.metadata.labels.clone(),
        annotations,
        spec: serde_json::to_value(&machine.spec).map_err(|source| corrupt(&key, source))?,
        ..Draft::default()
    };
    let version = machine.metadata.resource_version.unwrap_or_default();
    let object = ctx.store.update(key.clone(), draft, version).await?;
    let value = serde_json::to_value(&status).map_err(|source| corrupt(&key, source))?;
    let object = ctx.store.update_status(key, value, Some(object.resource_version)).await?;
    Ok(object.resource_version)
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
        let mut annotations: BTreeMap<String, String> =
            serde_json::from_value(raw["metadata"]["annotations"].clone()).unwrap_or_default();
        let changed = match &value {
            Some(value) => annotations.insert(name.to_string(), value.clone()).as_ref() != Some(value),
            None => annotations.remove(name).is_some(),
        };
        if !changed {
            return Ok(());
        }
        let labels: BTreeMap<String, String> =
            serde_json::from_value(raw["metadata"]["labels"].clone()).unwrap_or_default();
        let mut spec = raw["spec"].clone();
        if let Some(spec) = spec.as_object_mut() {
            spec.remove("nodeGroups");
        }
        let draft = Draft { labels, annotations, spec, ..Draft::default() };
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

//! Drift detection: each tenant's infrastructure planned against its last
//! apply (`plan -detailed-exitcode`, refresh on) on its own interval with
//! jitter (`drift/schedule.rs`), a bounded number at once and per interval
//! across the service, and never beside a run of the tool on the tenant.
//!
//! A tenant is planned only when its last apply had the inputs it has now
//! (its [`APPLIED_ANNOTATION`] equals the inputs hash) and did not fail: a
//! pending change is not drift, the reconciler applies it anyway. A plan
//! that would change something sets the `Drifted` condition naming the
//! resources and the attributes that differ (names only, never values); a
//! clean plan sets it `False`. In `correct` mode (`spec.drift.mode`) a
//! drifted tenant's applied inputs are dropped and, once its lease is
//! released, its reconcile woken:
//! the normal path applies it, which puts the resources back and sets the
//! condition `False` (`after_apply`).
//!
//! With several replicas on PostgreSQL one replica schedules, the holder
//! of the [`SCHEDULER_LEASE`], so the concurrency and the budget hold
//! across the service; each plan runs under the tenant's own lease, as a
//! reconcile does, with its writes fenced by it.

mod schedule;

use std::sync::Arc;
use std::time::Duration;

use cms_model::{DriftMode, Kind, Phase, Tenant, TenantStatus};
use cms_store::Key;
use cms_tofu::Drift;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::blocker::listed;
use crate::controller::while_held;
use crate::status::{self, set_condition};
use crate::{APPLIED_ANNOTATION, Context, LeaseOptions, ReconcileError, plan, rollout};

pub(crate) use schedule::Schedule;
pub use schedule::{DriftOptions, JITTER};

/// The tenant condition of drift: `True` naming what differs from the last
/// apply, `False` after a clean plan or an apply.
pub const DRIFTED: &str = "Drifted";

/// The lease of the one replica that schedules drift plans.
pub const SCHEDULER_LEASE: &str = "drift-scheduler";

/// How many attribute names are shown per resource in the condition.
const ATTRIBUTES_SHOWN: usize = 3;

/// What one check of a tenant came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Checked {
    /// The plan found nothing to change.
    Clean,
    /// The plan found `resources` to change; `correcting` when an apply
    /// was asked for.
    Drifted { resources: usize, correcting: bool },
    /// Nothing was planned, for this reason.
    Skipped(&'static str),
}

/// Wakes a tenant's reconcile.
pub type Trigger = Arc<dyn Fn(String) + Send + Sync>;

/// Plans one tenant when it may be, and records what the plan found.
pub(crate) async fn check(tenant: &str, ctx: &Context) -> Result<Checked, ReconcileError> {
    let Some(object) = ctx.store.get(&Key::tenant(tenant)) else { return Ok(Checked::Skipped("gone")) };
    if object.deleting {
        return Ok(Checked::Skipped("deleting"));
    }
    let resource: Tenant =
        object.parse().map_err(|source| ReconcileError::Corrupt { what: object.key.to_string(), source })?;
    let Some(applied) = resource.metadata.annotations.get(APPLIED_ANNOTATION) else {
        return Ok(Checked::Skipped("not applied"));
    };
    if resource.status.phase == Phase::Failed {
        return Ok(Checked::Skipped("failed"));
    }
    // An established tenant either has its endpoint (or its made one) or
    // cloud instances; one still making its endpoint is not applied as
    // planned here, and its hash differs.
    let plan = plan::desired(&resource, ctx.configs.as_deref(), &ctx.network, true).await?;
    if ctx.tofu.inputs_hash(&plan)? != *applied {
        return Ok(Checked::Skipped("pending change"));
    }
    let planned = ctx.tofu.plan(&plan).await;
    crate::record_tool_run(ctx, tenant, cms_model::ToolCommand::Plan).await;
    let Some(drift) = planned? else { return Ok(Checked::Skipped("busy")) };
    let mode = resource.spec.drift.map(|policy| policy.mode).unwrap_or_default();
    let message = message(&drift, mode);
    status::update(ctx.store.as_ref(), tenant, |status| match &message {
        None => set_condition(status, DRIFTED, false, "NoDrift", "the infrastructure matches the last apply"),
        Some(message) => set_condition(status, DRIFTED, true, "Drifted", message),
    })
    .await?;
    if drift.is_empty() {
        return Ok(Checked::Clean);
    }
    let resources = drift.resources.len();
    let addresses: Vec<&str> = drift.resources.iter().map(|r| r.address.as_str()).collect();
    tracing::warn!(tenant, mode = mode.as_str(), resources = %listed(&addresses), "the infrastructure drifted");
    if mode == DriftMode::Correct {
        // The normal reconcile applies a tenant whose applied inputs are
        // not its own, and sets the condition `False` after; the caller
        // wakes it once the tenant's lease is released.
        rollout::set_annotation(ctx, tenant, APPLIED_ANNOTATION, None).await?;
        metrics::counter!("cms_drift_corrections_total").increment(1);
        tracing::info!(tenant, "correcting the drift with an apply");
    }
    Ok(Checked::Drifted { resources, correcting: mode == DriftMode::Correct })
}

/// The `Drifted` message, `None` for no drift: `2 resources differ from
/// the last apply: terraform_data.cp-0 (update: input.shape), ...`.
pub(crate) fn message(drift: &Drift, mode: DriftMode) -> Option<String> {
    if drift.is_empty() {
        return None;
    }
    let items: Vec<String> = drift
        .resources
        .iter()
        .map(|resource| {
            let mut attributes: Vec<&str> =
                resource.attributes.iter().take(ATTRIBUTES_SHOWN).map(String::as_str).collect();
            let more = resource.attributes.len().saturating_sub(ATTRIBUTES_SHOWN);
            let more = format!("+{more}");
            if resource.attributes.len() > ATTRIBUTES_SHOWN {
                attributes.push(&more);
            }
            match attributes.is_empty() {
                true => format!("{} ({})", resource.address, resource.action),
                false => format!("{} ({}: {})", resource.address, resource.action, attributes.join(", ")),
            }
        })
        .collect();
    let count = drift.resources.len();
    let noun = if count == 1 { "resource differs" } else { "resources differ" };
    let what = match mode {
        DriftMode::Report => "reported only",
        DriftMode::Correct => "an apply puts them back",
    };
    Some(format!("{count} {noun} from the last apply ({what}): {}", listed(&items)))
}

/// After a good apply: the infrastructure is as applied, so a `Drifted`
/// condition that says otherwise says so no more.
pub(crate) fn after_apply(status: &mut TenantStatus) {
    if status.conditions.iter().any(|c| c.kind == DRIFTED && c.status == "True") {
        set_condition(status, DRIFTED, false, "Applied", "the last apply put the infrastructure back");
    }
}

/// Runs the drift scheduler until `shutdown`; with leases, only while this
/// replica holds the [`SCHEDULER_LEASE`].
pub(crate) async fn run(
    ctx: Arc<Context>,
    options: DriftOptions,
    trigger: Trigger,
    shutdown: CancellationToken,
) {
    if !options.enabled() {
        return;
    }
    let tick = (options.interval / 20).clamp(Duration::from_millis(50), Duration::from_secs(5));
    loop {
        let lease = match &ctx.leases {
            None => None,
            Some(leases) => {
                let name = SCHEDULER_LEASE.to_string();
                match leases.leases.acquire_lease(name, leases.holder.clone(), leases.ttl).await {
                    Ok(Some(lease)) => Some((leases, lease)),
                    Ok(None) | Err(_) => {
                        tokio::select! {
                            () = shutdown.cancelled() => return,
                            () = tokio::time::sleep(leases.ttl / 3) => continue,
                        }
                    }
                }
            }
        };
        schedule(&ctx, options, tick, &trigger, &shutdown, lease).await;
        if shutdown.is_cancelled() {
            return;
        }
    }
}

/// Plans due tenants while the scheduler lease (if any) holds.
async fn schedule(
    ctx: &Arc<Context>,
    options: DriftOptions,
    tick: Duration,
    trigger: &Trigger,
    shutdown: &CancellationToken,
    mut lease: Option<(&LeaseOptions, cms_store::Lease)>,
) {
    let mut schedule = Schedule::new(options);
    let mut tasks: JoinSet<(String, bool)> = JoinSet::new();
    let mut renewed = tokio::time::Instant::now();
    drifted_gauge(ctx);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            Some(joined) = tasks.join_next() => {
                if let Ok((tenant, planned)) = joined {
                    schedule.done(&tenant, planned, tokio::time::Instant::now());
                }
                metrics::gauge!("cms_drift_plans_running").set(schedule.running() as f64);
                drifted_gauge(ctx);
            }
            () = tokio::time::sleep(tick) => {
                if let Some((options, held)) = &mut lease
                    && renewed.elapsed() >= options.ttl / 3
                {
                    match options.leases.renew_lease(held.clone(), options.ttl).await {
                        Ok(next) => {
                            *held = next;
                            renewed = tokio::time::Instant::now();
                        }
                        Err(err) => {
                            tracing::warn!("lost the drift scheduler's lease: {err}");
                            tasks.abort_all();
                            schedule.clear();
                            return;
                        }
                    }
                }
                let names = tenant_names(ctx);
                for tenant in schedule.take(&names, tokio::time::Instant::now()) {
                    tasks.spawn(one(ctx.clone(), tenant, trigger.clone()));
                }
                metrics::gauge!("cms_drift_plans_running").set(schedule.running() as f64);
            }
        }
    }
    tasks.abort_all();
    if let Some((options, held)) = lease
        && let Err(err) = options.leases.release_lease(held).await
    {
        tracing::warn!("could not release the drift scheduler's lease: {err}");
    }
}

/// One check, under the tenant's lease when there are leases; gives the
/// tenant and whether the tool planned.
pub(crate) async fn one(ctx: Arc<Context>, tenant: String, trigger: Trigger) -> (String, bool) {
    let result = match &ctx.leases {
        None => check(&tenant, &ctx).await,
        Some(options) => leased(&tenant, &ctx, options).await,
    };
    if let Ok(Checked::Drifted { correcting: true, .. }) = &result {
        trigger(tenant.clone());
    }
    let (outcome, planned) = match &result {
        Ok(Checked::Clean) => ("clean", true),
        Ok(Checked::Drifted { .. }) => ("drifted", true),
        Ok(Checked::Skipped(_)) => ("skipped", false),
        Err(ReconcileError::Provision(_)) => ("failed", true),
        Err(_) => ("failed", false),
    };
    if let Err(err) = &result {
        tracing::warn!(tenant, "drift plan failed: {err}");
    }
    if let Ok(Checked::Skipped(reason)) = &result {
        tracing::debug!(tenant, reason, "no drift plan");
    }
    metrics::counter!("cms_drift_checks_total", "outcome" => outcome).increment(1);
    (tenant, planned)
}

/// A check under the tenant's lease: skipped while anything else holds it
/// (a reconcile, this replica's own included), every write fenced by it,
/// renewed while it runs. It is taken as [`drift_holder`]: the lease's own
/// holder may take it again, and its release would end this replica's
/// reconcile's hold.
async fn leased(tenant: &str, ctx: &Context, options: &LeaseOptions) -> Result<Checked, ReconcileError> {
    let name = format!("tenant/{tenant}");
    let holder = drift_holder(&options.holder);
    let options = &LeaseOptions { holder, ..options.clone() };
    let Some(lease) = options.leases.acquire_lease(name, options.holder.clone(), options.ttl).await? else {
        return Ok(Checked::Skipped("held"));
    };
    let work = |fenced: Context| async move { check(tenant, &fenced).await };
    while_held(tenant, lease, ctx, options, work).await.unwrap_or_else(|lost| Err(lost.into()))
}

/// The holder a replica's drift checks take tenants' leases as: not the
/// one its reconciles take them as.
fn drift_holder(holder: &str) -> String {
    format!("{holder}#drift")
}

fn tenant_names(ctx: &Context) -> Vec<String> {
    ctx.store.all(Kind::Tenant, None).iter().map(|object| object.key.name.clone()).collect()
}

/// `cms_drifted_tenants`: the tenants whose `Drifted` condition is `True`.
fn drifted_gauge(ctx: &Context) {
    let drifted = ctx
        .store
        .all(Kind::Tenant, None)
        .iter()
        .filter_map(|object| object.parse::<Tenant>().ok())
        .filter(|tenant| tenant.status.conditions.iter().any(|c| c.kind == DRIFTED && c.status == "True"))
        .count();
    metrics::gauge!("cms_drifted_tenants").set(drifted as f64);
}

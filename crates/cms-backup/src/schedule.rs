//! [`Scheduler`]: the tenants' scheduled backups (`spec.backups`).
//!
//! Every tick it looks at each tenant. The time the next backup is due is
//! kept in the tenant's `status.backups.nextRun`, written when a schedule
//! appears or changes. A tenant whose `nextRun` has come is due; the
//! scheduler claims that time by writing `lastScheduled` and the following
//! `nextRun` at the `resourceVersion` it read, so that of several replicas
//! (or a replica whose cache lags) exactly one claims each scheduled time,
//! then takes the backup and deletes the oldest beyond `retain`. Missed
//! times (the server was down) give one backup, then the schedule resumes.
//!
//! Each scheduled backup is on the audit log, as [`SCHEDULER_ACTOR`].
//!
//! On several replicas only the holder of the `backups/scheduler` lease
//! claims, with its writes fenced by the lease; every replica keeps its own
//! metric of each tenant's newest backup's age.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use cms_model::{AuditEntry, AuditOutcome, AuditTarget, Backup, BackupSchedule, Kind, Tenant};
use cms_store::{Audit, Lease, Leases, Store, StoreError, update_tenant_status};
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::backups::Backups;
use crate::error::BackupError;
use crate::outcome::{NEWEST_AGE, Trigger};

/// The lease whose holder runs the schedules.
pub const SCHEDULER_LEASE: &str = "backups/scheduler";

/// The actor of scheduled backups on the audit log.
pub const SCHEDULER_ACTOR: &str = "system:backup-scheduler";

/// How many scheduled backups run at once.
const PARALLEL: usize = 4;

/// How the scheduler runs.
#[derive(Clone)]
pub struct SchedulerOptions {
    /// How often the schedules are looked at: a backup starts up to this
    /// long after its time.
    pub tick: Duration,
    /// On several replicas sharing one database: the lease that picks the
    /// one replica that claims scheduled backups. `None` with one replica.
    pub lease: Option<SchedulerLease>,
    /// Where each scheduled backup is recorded, as the API's requests are
    /// (actor [`SCHEDULER_ACTOR`]); `None` records none.
    pub audit: Option<Arc<dyn Audit>>,
}

impl std::fmt::Debug for SchedulerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchedulerOptions")
            .field("tick", &self.tick)
            .field("lease", &self.lease)
            .field("audit", &self.audit.is_some())
            .finish()
    }
}

impl std::fmt::Debug for SchedulerLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchedulerLease").field("holder", &self.holder).field("ttl", &self.ttl).finish()
    }
}

/// The scheduler's lease: who holds it and for how long.
#[derive(Clone)]
pub struct SchedulerLease {
    pub leases: Arc<dyn Leases>,
    /// This replica, as lease holders are named.
    pub holder: String,
    /// How long the lease lasts unless renewed; renewed every third of it.
    pub ttl: Duration,
}

/// Runs the tenants' backup schedules.
#[derive(Debug, Clone)]
pub struct Scheduler {
    backups: Backups,
    options: SchedulerOptions,
}

/// What one look at the schedules did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Sweep {
    /// The tenants whose scheduled backup this replica claimed and ran.
    pub taken: Vec<String>,
    /// The tenants whose scheduled backup was claimed but failed.
    pub failed: Vec<String>,
}

impl Scheduler {
    /// A scheduler that takes its backups through `backups`.
    pub fn new(backups: Backups, options: SchedulerOptions) -> Scheduler {
        Scheduler { backups, options }
    }

    /// Looks at the schedules every tick until `shutdown`, then gives up
    /// its lease.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut held: Option<Lease> = None;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = tokio::time::sleep(self.options.tick) => {}
            }
            let now = Utc::now();
            let store = self.backups.store().as_ref();
            let tenants = tenants(store);
            record_ages(&tenants, now);
            let Some(lease) = &self.options.lease else {
                self.sweep_over(store, tenants, now).await;
                continue;
            };
            held = match lease
                .leases
                .acquire_lease(SCHEDULER_LEASE.into(), lease.holder.clone(), lease.ttl)
                .await
            {
                Ok(Some(taken)) => Some(taken),
                Ok(None) => None,
                Err(err) => {
                    tracing::warn!("could not take the backup scheduler's lease: {err}");
                    None
                }
            };
            let Some(current) = held.clone() else { continue };
            let fenced = lease.leases.fenced(current.clone());
            let renewed = Mutex::new(current);
            let renew = renew(lease, &renewed);
            tokio::select! {
                _ = self.sweep_over(fenced.as_ref(), tenants, now) => {}
                err = renew => tracing::warn!("lost the backup scheduler's lease: {err}"),
            }
            held = Some(renewed.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner()));
        }
        if let (Some(lease), Some(held)) = (&self.options.lease, held)
            && let Err(err) = lease.leases.release_lease(held).await
        {
            tracing::warn!("could not release the backup scheduler's lease: {err}");
        }
    }

    /// One look at every tenant's schedule at `now`, writing through
    /// `store`: keeps each `nextRun` true to its schedule, and claims and
    /// takes the backups that are due.
    pub async fn sweep(&self, store: &dyn Store, now: DateTime<Utc>) -> Sweep {
        self.sweep_over(store, tenants(store), now).await
    }

    /// [`Scheduler::sweep`] over `tenants`, as read from `store`.
    async fn sweep_over(&self, store: &dyn Store, tenants: Vec<Tenant>, now: DateTime<Utc>) -> Sweep {
        let mut due = Vec::new();
        for tenant in tenants {
            if tenant.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let name = tenant.metadata.name;
            let next_run = tenant.status.backups.and_then(|status| status.next_run);
            let Some(schedule) = tenant.spec.backups else {
                if next_run.is_some() {
                    set_next_run(store, &name, None).await;
                }
                continue;
            };
            match next_run {
                Some(slot) if slot <= now => due.push((name, schedule, slot)),
                _ => {
                    let expected = schedule.next_after(now);
                    if next_run != expected {
                        set_next_run(store, &name, expected).await;
                    }
                }
            }
        }
        let runs = futures_util::stream::iter(due)
            .map(|(name, schedule, slot)| async move {
                let outcome = self.scheduled(store, &name, &schedule, slot, now).await;
                (name, outcome)
            })
            .buffer_unordered(PARALLEL)
            .collect::<Vec<_>>()
            .await;
        let mut sweep = Sweep::default();
        for (name, outcome) in runs {
            match outcome {
                Some(true) => sweep.taken.push(name),
                Some(false) => sweep.failed.push(name),
                None => {}
            }
        }
        sweep.taken.sort();
        sweep.failed.sort();
        sweep
    }

    /// Claims the scheduled time `slot` of `tenant`, then takes the backup
    /// and prunes. `None` when the time was not claimed here; otherwise
    /// whether the backup was taken.
    async fn scheduled(
        &self,
        store: &dyn Store,
        tenant: &str,
        schedule: &BackupSchedule,
        slot: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Option<bool> {
        let next = schedule.next_after(now);
        let claim = update_tenant_status(store, tenant, |status| {
            let backups = status.backups.get_or_insert_default();
            if backups.next_run == Some(slot) {
                backups.last_scheduled = Some(slot);
                backups.next_run = next;
            }
        })
        .await;
        match claim {
            Ok(true) => {}
            Ok(false) | Err(StoreError::Conflict { .. } | StoreError::LeaseLost { .. }) => return None,
            Err(err) => {
                tracing::warn!(tenant, "could not claim a scheduled backup: {err}");
                return None;
            }
        }
        tracing::info!(tenant, scheduled = %slot, "taking a scheduled etcd backup");
        let taken = self.backups.take_as(tenant, Trigger::Scheduled).await;
        self.audit(tenant, slot, &taken).await;
        if taken.is_err() {
            return Some(false);
        }
        if let Err(err) = self.backups.prune(tenant, schedule.retain as usize).await {
            tracing::warn!(tenant, "could not delete old etcd backups: {err}");
        }
        Some(true)
    }
}

impl Scheduler {
    /// Records a scheduled backup on the audit log as the request that
    /// takes one on demand would be: 201 with the backup, else 500.
    async fn audit(&self, tenant: &str, slot: DateTime<Utc>, taken: &Result<Backup, BackupError>) {
        let Some(audit) = &self.options.audit else { return };
        let status = if taken.is_ok() { 201 } else { 500 };
        let entry = AuditEntry {
            time: Utc::now(),
            actor: SCHEDULER_ACTOR.to_string(),
            actor_role: None,
            actor_token: None,
            actor_source: None,
            actor_issuer: None,
            actor_subject: None,
            method: "POST".to_string(),
            route: Some("/api/v1/tenants/{name}/backups".to_string()),
            path: format!("/api/v1/tenants/{tenant}/backups"),
            target: Some(AuditTarget {
                kind: "Backup".to_string(),
                tenant: Some(tenant.to_string()),
                name: taken.as_ref().ok().map(|backup| backup.id.clone()),
            }),
            status,
            outcome: AuditOutcome::of_status(status),
            request_id: format!("schedule-{}", slot.format("%Y%m%dt%H%M%Sz")),
        };
        if let Err(err) = audit.record(entry).await {
            tracing::warn!(tenant, "could not record a scheduled backup on the audit log: {err}");
        }
    }
}

/// Writes `next_run` into the tenant's `status.backups`.
async fn set_next_run(store: &dyn Store, tenant: &str, next_run: Option<DateTime<Utc>>) {
    let written = update_tenant_status(store, tenant, |status| {
        let backups = status.backups.get_or_insert_default();
        backups.next_run = next_run;
        if *backups == cms_model::BackupsStatus::default() {
            status.backups = None;
        }
    })
    .await;
    match written {
        Ok(_) | Err(StoreError::Conflict { .. } | StoreError::LeaseLost { .. }) => {}
        Err(err) => tracing::warn!(tenant, "could not write the next scheduled backup's time: {err}"),
    }
}

/// Every tenant of `store`, read once per tick for both the schedules and
/// the ages; one that does not parse is left out.
fn tenants(store: &dyn Store) -> Vec<Tenant> {
    store.all(Kind::Tenant, None).iter().filter_map(|object| object.parse::<Tenant>().ok()).collect()
}

/// Sets each tenant's age-of-newest-backup gauge from its status.
fn record_ages(tenants: &[Tenant], now: DateTime<Utc>) {
    for tenant in tenants {
        let Some(success) = tenant.status.backups.as_ref().and_then(|status| status.last_success.as_ref())
        else {
            continue;
        };
        let age = (now - success.time).num_milliseconds().max(0) as f64 / 1000.0;
        metrics::gauge!(NEWEST_AGE, "tenant" => tenant.metadata.name.clone()).set(age);
    }
}

/// Renews the lease every third of its time to live; ends with why it
/// could not.
async fn renew(lease: &SchedulerLease, held: &Mutex<Lease>) -> StoreError {
    loop {
        tokio::time::sleep(lease.ttl / 3).await;
        let current = held.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        match lease.leases.renew_lease(current, lease.ttl).await {
            Ok(renewed) => *held.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = renewed,
            Err(err) => return err,
        }
    }
}

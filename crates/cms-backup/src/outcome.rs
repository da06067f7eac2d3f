//! What becomes of a backup or a restore, recorded where operators look:
//! the tenant's `status.backups` (last success, last failure), its
//! `Restoring` condition, and the metrics (`docs/backups.md`). A status
//! that cannot be written is logged and left: the backup itself stands.

use chrono::Utc;
use cms_model::{Backup, BackupFailure, BackupSuccess};
use cms_store::{Store, update_tenant_status};

use crate::error::BackupError;

/// The condition a tenant carries while its etcd is restored from a
/// backup: `True` while it runs, then `False` with `Restored` or
/// `RestoreFailed`.
pub const RESTORING: &str = "Restoring";

/// Backups taken, by trigger.
pub const TAKEN: &str = "cms_backups_taken_total";
/// Backups that failed, by trigger.
pub const FAILED: &str = "cms_backups_failed_total";
/// Snapshot bytes backed up, before encryption.
pub const BYTES: &str = "cms_backup_bytes_total";
/// Seconds since each tenant's newest successful backup, by tenant.
pub const NEWEST_AGE: &str = "cms_backup_newest_age_seconds";

/// Why a backup was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trigger {
    OnDemand,
    Scheduled,
}

impl Trigger {
    fn label(self) -> &'static str {
        match self {
            Trigger::OnDemand => "on_demand",
            Trigger::Scheduled => "scheduled",
        }
    }
}

/// Counts a backup's outcome and writes it into the tenant's status. An
/// unknown tenant, or an on-demand backup refused because another is
/// running, is no backup of the tenant and is left out.
pub(crate) async fn record(
    store: &dyn Store,
    tenant: &str,
    trigger: Trigger,
    result: &Result<Backup, BackupError>,
) {
    match result {
        Err(BackupError::TenantNotFound(_)) => {}
        Err(BackupError::Busy(_)) if trigger == Trigger::OnDemand => {}
        Ok(backup) => {
            metrics::counter!(TAKEN, "trigger" => trigger.label()).increment(1);
            metrics::counter!(BYTES).increment(backup.size);
            metrics::gauge!(NEWEST_AGE, "tenant" => tenant.to_string()).set(0.0);
            let success = BackupSuccess { time: backup.time, id: backup.id.clone(), size: backup.size };
            write(store, tenant, |status| {
                status.backups.get_or_insert_default().last_success = Some(success.clone());
            })
            .await;
        }
        Err(err) => {
            metrics::counter!(FAILED, "trigger" => trigger.label()).increment(1);
            tracing::warn!(tenant, trigger = trigger.label(), "an etcd backup failed: {err}");
            let failure = BackupFailure { time: Utc::now(), reason: err.to_string() };
            write(store, tenant, |status| {
                status.backups.get_or_insert_default().last_failure = Some(failure.clone());
            })
            .await;
        }
    }
}

/// Sets the tenant's [`RESTORING`] condition.
pub(crate) async fn restoring(store: &dyn Store, tenant: &str, value: bool, reason: &str, message: &str) {
    write(store, tenant, |status| status.set_condition(RESTORING, value, reason, message)).await;
}

async fn write(store: &dyn Store, tenant: &str, change: impl Fn(&mut cms_model::TenantStatus)) {
    if let Err(err) = update_tenant_status(store, tenant, change).await {
        tracing::warn!(tenant, "could not record a backup's outcome in the tenant's status: {err}");
    }
}

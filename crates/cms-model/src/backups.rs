//! A tenant's etcd backups: one backup as the API shows it ([`Backup`]),
//! the schedule in the tenant's spec (`spec.backups`) and what became of
//! its backups in its status (`status.backups`).

use std::str::FromStr;

use chrono::{DateTime, Utc};
use croner::Cron;
use serde::{Deserialize, Serialize};

use crate::validate::FieldError;

/// The most backups a schedule may keep.
pub const MAX_RETAIN: u32 = 1000;

/// When to back up a tenant's etcd, and how many backups to keep.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackupSchedule {
    /// A cron expression in UTC: five fields (minute, hour, day of month,
    /// month, day of week), or six with seconds first.
    #[cfg_attr(feature = "openapi", schema(example = "0 3 * * *"))]
    pub schedule: String,
    /// How many backups of the tenant to keep: after each scheduled backup
    /// the oldest beyond this many are deleted, on-demand ones included.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000, example = 7))]
    pub retain: u32,
}

impl BackupSchedule {
    /// Checks the expression and the count; `path` names the field.
    pub fn check(&self, path: &str) -> Result<(), FieldError> {
        self.cron().map_err(|why| FieldError::new(format!("{path}.schedule"), why))?;
        if !(1..=MAX_RETAIN).contains(&self.retain) {
            return Err(FieldError::new(format!("{path}.retain"), format!("must be 1 to {MAX_RETAIN}")));
        }
        Ok(())
    }

    /// The first time the schedule names strictly after `time`; `None` when
    /// the expression does not parse or names no time to come.
    pub fn next_after(&self, time: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron().ok()?.find_next_occurrence(&time, false).ok()
    }

    fn cron(&self) -> Result<Cron, String> {
        let fields = self.schedule.split_whitespace().count();
        if !(5..=6).contains(&fields) {
            return Err(format!(
                "{:?} has {fields} fields: a cron expression has five (minute hour day month weekday), \
                 or six with seconds first",
                self.schedule
            ));
        }
        let cron = Cron::from_str(&self.schedule)
            .map_err(|err| format!("{:?} is not a cron expression: {err}", self.schedule))?;
        // An expression that never fires (such as the 31st of February) is
        // refused rather than kept as a schedule that silently never runs.
        cron.find_next_occurrence(&Utc::now(), false)
            .map_err(|_| format!("{:?} names no time to come", self.schedule))?;
        Ok(cron)
    }
}

/// What the backup scheduler last did for a tenant. Written by the server's
/// backup scheduler (on-demand backups record their outcome too); the
/// reconciler keeps it as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackupsStatus {
    /// The schedule's time the last scheduled backup was for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scheduled: Option<DateTime<Utc>>,
    /// When the schedule runs next; absent without a schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_run: Option<DateTime<Utc>>,
    /// The newest backup that succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_success: Option<BackupSuccess>,
    /// The newest backup that failed, with why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<BackupFailure>,
}

/// A backup that succeeded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackupSuccess {
    pub time: DateTime<Utc>,
    /// The backup's id, as `GET /tenants/{name}/backups/{id}` takes it.
    pub id: String,
    /// The snapshot's size in bytes.
    pub size: u64,
}

/// A backup that failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackupFailure {
    pub time: DateTime<Utc>,
    pub reason: String,
}

/// One etcd backup of a tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Backup {
    /// Time-sortable: the UTC time it was taken, then a random suffix,
    /// such as `20261125t074211123z-3f9a`.
    pub id: String,
    pub tenant: String,
    /// When the snapshot was taken.
    pub time: DateTime<Utc>,
    /// The snapshot's size in bytes, before encryption.
    pub size: u64,
    /// The SHA-256 of the snapshot, before encryption, in hex.
    pub sha256: String,
    /// The machine whose etcd member the snapshot came from.
    pub machine: String,
    /// The Talos version that machine ran, if it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub talos_version: Option<String>,
    /// The etcd protocol version of that member, if it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd_version: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(expression: &str, retain: u32) -> BackupSchedule {
        BackupSchedule { schedule: expression.to_string(), retain }
    }

    #[test]
    fn five_or_six_fields_parse_and_give_the_next_time() {
        let at = |text: &str| text.parse::<DateTime<Utc>>().unwrap();
        let daily = schedule("0 3 * * *", 7);
        daily.check("spec.backups").unwrap();
        assert_eq!(daily.next_after(at("2026-11-25T03:00:00Z")), Some(at("2026-11-26T03:00:00Z")));
        let seconds = schedule("*/2 * * * * *", 1);
        seconds.check("spec.backups").unwrap();
        assert_eq!(seconds.next_after(at("2026-11-25T03:00:01Z")), Some(at("2026-11-25T03:00:02Z")));
    }

    #[test]
    fn bad_schedules_and_counts_are_named() {
        let field = |s: BackupSchedule| s.check("spec.backups").unwrap_err().field;
        assert_eq!(field(schedule("0 3 * *", 7)), "spec.backups.schedule");
        assert_eq!(field(schedule("61 * * * *", 7)), "spec.backups.schedule");
        assert_eq!(field(schedule("0 0 31 2 *", 7)), "spec.backups.schedule");
        assert_eq!(field(schedule("0 3 * * *", 0)), "spec.backups.retain");
        assert_eq!(field(schedule("0 3 * * *", MAX_RETAIN + 1)), "spec.backups.retain");
    }
}

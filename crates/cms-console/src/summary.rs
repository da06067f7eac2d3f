//! What the tenants table shows of a tenant, and what a live update sends:
//! one summary, so that a row rendered on the server and a row the script
//! updates show the same thing. Everything is read from the store's cache.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use cms_model::{Condition, Kind, Machine, Phase, Tenant};
use cms_store::{Object, Store};
use serde::Serialize;

/// A tenant as a row of the tenants table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Summary {
    pub(crate) name: String,
    pub(crate) phase: &'static str,
    pub(crate) ready: bool,
    pub(crate) kubernetes: String,
    /// The tenant's Talos version, or the default it gets.
    pub(crate) talos: String,
    /// `ready/total` of the tenant's machines.
    pub(crate) machines: String,
    pub(crate) deleting: bool,
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) message: Option<String>,
    pub(crate) conditions: Vec<Condition>,
    #[serde(skip)]
    pub(crate) created_at: Option<DateTime<Utc>>,
}

impl Summary {
    /// The summary of `tenant`, counting its machines in `store`;
    /// `default_talos` is the version a tenant that names none gets.
    pub(crate) fn of(tenant: Tenant, store: &dyn Store, default_talos: &str) -> Summary {
        let name = tenant.metadata.name;
        let machines = store.all(Kind::Machine, Some(name.clone()));
        let ready = machines.iter().filter(|object| machine_ready(object)).count();
        Summary {
            phase: phase_name(tenant.status.phase),
            ready: tenant.status.ready,
            kubernetes: tenant.spec.kubernetes_version,
            talos: tenant.spec.talos_version.unwrap_or_else(|| default_talos.to_string()),
            machines: format!("{ready}/{}", machines.len()),
            deleting: tenant.metadata.deletion_timestamp.is_some(),
            labels: tenant.metadata.labels,
            message: tenant.status.message,
            conditions: tenant.status.conditions,
            created_at: tenant.metadata.created_at,
            name,
        }
    }

    /// The summary of a stored tenant; a tenant that cannot be read is
    /// logged and shown by name only.
    pub(crate) fn of_object(object: &Object, store: &dyn Store, default_talos: &str) -> Summary {
        match object.parse::<Tenant>() {
            Ok(tenant) => Summary::of(tenant, store, default_talos),
            Err(err) => {
                tracing::error!(tenant = %object.key.name, error = %err, "stored tenant is unreadable");
                Summary::unreadable(&object.key.name)
            }
        }
    }

    fn unreadable(name: &str) -> Summary {
        Summary {
            name: name.to_string(),
            phase: "unknown",
            ready: false,
            kubernetes: String::new(),
            talos: String::new(),
            machines: String::new(),
            deleting: false,
            labels: BTreeMap::new(),
            message: None,
            conditions: Vec::new(),
            created_at: None,
        }
    }
}

fn machine_ready(object: &Object) -> bool {
    object.parse::<Machine>().is_ok_and(|machine| machine.status.ready)
}

/// A phase as the API spells it.
pub(crate) fn phase_name(phase: Phase) -> &'static str {
    match phase {
        Phase::Pending => "pending",
        Phase::Provisioning => "provisioning",
        Phase::Active => "active",
        Phase::Updating => "updating",
        Phase::Deleting => "deleting",
        Phase::Failed => "failed",
    }
}

/// Every phase, in lifecycle order, for the phase filter.
pub(crate) const PHASES: [Phase; 6] =
    [Phase::Pending, Phase::Provisioning, Phase::Active, Phase::Updating, Phase::Deleting, Phase::Failed];

/// How long ago `time` was, as `kubectl` shows ages: `45s`, `12m`, `5h`, `3d`.
pub(crate) fn age(time: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let seconds = (now - time).num_seconds().max(0);
    match seconds {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// What the console says of a tenant's `status.message`: the message; for
/// a ready tenant without one `none`, for one that is not ready and has
/// none (the reconciler has not looked at it yet) that no reason is known.
pub(crate) fn reason_text(ready: bool, message: Option<&str>) -> &str {
    match (message, ready) {
        (Some(message), _) if !message.is_empty() => message,
        (_, true) => "none",
        (_, false) => NO_REASON,
    }
}

/// The reason shown for a tenant that is not ready and has no message.
pub(crate) const NO_REASON: &str = "no reason reported yet";

/// Yes or no, in words rather than colour alone.
pub(crate) fn yes_no(value: bool) -> &'static str {
    if value { "yes" } else { "no" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeDelta;

    #[test]
    fn ages_read_like_kubectl() {
        let now = Utc::now();
        assert_eq!(age(now - TimeDelta::seconds(45), now), "45s");
        assert_eq!(age(now - TimeDelta::minutes(12), now), "12m");
        assert_eq!(age(now - TimeDelta::hours(5), now), "5h");
        assert_eq!(age(now - TimeDelta::days(3), now), "3d");
        assert_eq!(age(now + TimeDelta::seconds(5), now), "0s");
    }
}

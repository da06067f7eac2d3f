//! The health result of one tenant, in the API's shape.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

/// The error of a tenant whose secrets are missing or cannot be opened.
pub const NO_CREDENTIALS: &str = "no credentials";
/// The error of a tenant none of whose machines answered.
pub const NO_REACHABLE_MACHINES: &str = "no reachable machines";

/// `{tenant, reachable, talosVersion, machineCount, probedAt, error}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Health {
    pub tenant: String,
    /// Whether a machine answered the probe.
    pub reachable: bool,
    /// The Talos version of the first machine in probing order (control
    /// planes, workers, the rest, each by name) that answered (`1.14.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub talos_version: Option<String>,
    /// How many machines the tenant has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_count: Option<u64>,
    /// When the probe that reached a machine finished, ISO 8601 UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probed_at: Option<String>,
    /// Why the tenant is not reachable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Health {
    /// A machine answered with `talos_version` at `at`.
    pub(crate) fn reachable(tenant: &str, machines: u64, talos_version: &str, at: DateTime<Utc>) -> Health {
        Health {
            tenant: tenant.to_string(),
            reachable: true,
            talos_version: Some(talos_version.to_string()),
            machine_count: Some(machines),
            probed_at: Some(at.to_rfc3339_opts(SecondsFormat::Millis, true)),
            error: None,
        }
    }

    /// No machine answered, for the reason `error`.
    pub(crate) fn unreachable(tenant: &str, machines: u64, error: &str) -> Health {
        Health {
            tenant: tenant.to_string(),
            reachable: false,
            talos_version: None,
            machine_count: Some(machines),
            probed_at: None,
            error: Some(error.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wire_shape() {
        let at = DateTime::parse_from_rfc3339("2026-01-02T03:04:05Z").unwrap().with_timezone(&Utc);
        let up = Health::reachable("demo", 3, "1.14.0", at);
        assert_eq!(
            serde_json::to_value(&up).unwrap(),
            json!({"tenant": "demo", "reachable": true, "talosVersion": "1.14.0", "machineCount": 3,
                   "probedAt": "2026-01-02T03:04:05.000Z"})
        );
        let down = Health::unreachable("demo", 0, NO_CREDENTIALS);
        assert_eq!(
            serde_json::to_value(&down).unwrap(),
            json!({"tenant": "demo", "reachable": false, "machineCount": 0, "error": "no credentials"})
        );
    }
}

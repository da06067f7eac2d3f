//! The audit log's records: who changed what, when, and with what result.
//! They never hold a request body, a password, a token or a secret.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::user::UserRole;

/// The actor of requests that carried no valid credentials.
pub const ANONYMOUS: &str = "anonymous";

/// How a recorded request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum AuditOutcome {
    /// A 1xx, 2xx or 3xx answer.
    Succeeded,
    /// 401 or 403: the caller was not let in.
    Denied,
    /// Any other error.
    Failed,
}

impl AuditOutcome {
    /// The outcome of a request answered with `status`.
    pub fn of_status(status: u16) -> AuditOutcome {
        match status {
            401 | 403 => AuditOutcome::Denied,
            400.. => AuditOutcome::Failed,
            _ => AuditOutcome::Succeeded,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AuditOutcome::Succeeded => "succeeded",
            AuditOutcome::Denied => "denied",
            AuditOutcome::Failed => "failed",
        }
    }

    /// Parses the name written by [`AuditOutcome::as_str`].
    pub fn from_name(name: &str) -> Option<AuditOutcome> {
        match name {
            "succeeded" => Some(AuditOutcome::Succeeded),
            "denied" => Some(AuditOutcome::Denied),
            "failed" => Some(AuditOutcome::Failed),
            _ => None,
        }
    }
}

/// The resource a request was about, as far as its path (or, for creates,
/// the handler) tells.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AuditTarget {
    /// `Tenant`, `NodeGroup`, `ConfigPatch`, `Machine`, `User`, `ApiToken` or `Login`.
    pub kind: String,
    /// The tenant the resource belongs to; for a tenant, its own name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// One recorded request, before the store gives it an id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    /// When the answer was ready, UTC.
    pub time: DateTime<Utc>,
    /// The user (for an API token, its owner), the user name a login
    /// attempted, or [`ANONYMOUS`].
    pub actor: String,
    /// The actor's role when it was authenticated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor_role: Option<UserRole>,
    /// The id (the public part) of the API token the actor used, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor_token: Option<String>,
    /// Where the actor's identity comes from when it was authenticated:
    /// `local` (this server's users), `oidc` (single sign-on) or `workload`
    /// (a trusted issuer's token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor_source: Option<String>,
    /// The issuer of an `oidc` or `workload` identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor_issuer: Option<String>,
    /// The actor's subject: the `sub` of an `oidc` or `workload` identity,
    /// the user name of a `local` one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor_subject: Option<String>,
    pub method: String,
    /// The route pattern, such as `/api/v1/tenants/{name}`; absent for
    /// paths no route serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    /// The path requested, without the query; a read of a machine's log
    /// keeps the one part of it that says which log (`?service=etcd`, and
    /// `?service=kernel` for the kernel's).
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<AuditTarget>,
    /// The HTTP status of the answer.
    pub status: u16,
    pub outcome: AuditOutcome,
    /// The request's `x-request-id`.
    pub request_id: String,
}

/// A stored [`AuditEntry`] with its id, which grows with every record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AuditRecord {
    pub id: u64,
    #[serde(flatten)]
    pub entry: AuditEntry,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_follow_the_status() {
        for (status, outcome) in [
            (200, AuditOutcome::Succeeded),
            (201, AuditOutcome::Succeeded),
            (204, AuditOutcome::Succeeded),
            (401, AuditOutcome::Denied),
            (403, AuditOutcome::Denied),
            (400, AuditOutcome::Failed),
            (409, AuditOutcome::Failed),
            (422, AuditOutcome::Failed),
            (429, AuditOutcome::Failed),
            (500, AuditOutcome::Failed),
        ] {
            assert_eq!(AuditOutcome::of_status(status), outcome, "{status}");
            assert_eq!(AuditOutcome::from_name(outcome.as_str()), Some(outcome));
        }
    }
}

//! The audit records of the autoscaler's writes: one per scaling call,
//! under the autoscaler's identity, with the group it named and how the
//! call ended.

use std::sync::Arc;

use chrono::Utc;
use cms_model::{AuditEntry, AuditOutcome, AuditTarget};
use cms_store::Audit;

use crate::error::AutoscalerError;
use crate::identity::Identity;

/// The gRPC service's full name, the prefix of each call's path.
pub(crate) const SERVICE: &str = "/clusterautoscaler.cloudprovider.v1.externalgrpc.CloudProvider/";

/// Records that `identity` called `method` on group `group` of its tenant,
/// answered with `result`. A record that cannot be written is logged.
pub(crate) async fn record(
    audit: &Arc<dyn Audit>,
    identity: &Identity,
    method: &str,
    group: &str,
    result: Result<(), &AutoscalerError>,
) {
    let status = match result {
        Ok(()) => 200,
        Err(err) => err.http_status(),
    };
    let path = format!("{SERVICE}{method}");
    let entry = AuditEntry {
        time: Utc::now(),
        actor: identity.actor(),
        actor_role: None,
        actor_token: None,
        actor_source: Some("autoscaler".into()),
        actor_issuer: None,
        actor_subject: Some(identity.tenant.clone()),
        method: "POST".into(),
        route: Some(path.clone()),
        path,
        target: Some(AuditTarget {
            kind: "NodeGroup".into(),
            tenant: Some(identity.tenant.clone()),
            name: Some(crate::groups::clip(group)),
        }),
        status,
        outcome: AuditOutcome::of_status(status),
        request_id: uuid::Uuid::new_v4().to_string(),
    };
    if let Err(err) = audit.record(entry).await {
        tracing::error!(tenant = %identity.tenant, method, "could not record an autoscaler call in the audit log: {err}");
    }
}

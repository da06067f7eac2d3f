//! Writing a tenant's status, of which the reconciler writes all but
//! `status.backups` and the `Restoring` condition (the backup scheduler's):
//! read, change the reconciler's fields, write with the `resourceVersion`
//! just read, and retry when another write came in between. The one
//! condition it does not own, `ConfigPatchesResolved`, the store keeps in
//! every write's transaction, whatever status a writer sends.
//!
//! The phase of a live tenant is honest about whether it ever worked:
//! `provisioning` until it is first ready (which [`FIRST_READY_ANNOTATION`]
//! records), then `updating` while it changes and `active` otherwise,
//! ready or not; `failed` when a pass failed in a way a retry cannot mend.

use cms_model::{Phase, TenantStatus};
use cms_store::{Store, StoreError, update_tenant_status};

use crate::ReconcileError;
use crate::blocker::{CONDITION_LIMIT, TOOL_OUTPUT_LIMIT, one_line};

/// The tenant annotation holding when the tenant was first ready (RFC
/// 3339). Until then its phase stays `provisioning`, whatever was applied.
pub const FIRST_READY_ANNOTATION: &str = "service.io/first-ready";

/// The condition the reconciler keeps: whether the infrastructure matches
/// the spec.
pub const PROVISIONED: &str = "Provisioned";
/// The condition of the machines: every machine has its config (metal
/// hosts take it over the node API), answers with the tenant's
/// credentials, and its Kubernetes Node is Ready.
pub const MACHINES_READY: &str = "MachinesReady";
/// The condition of etcd's bootstrap: `True` once `Bootstrap` succeeded on
/// the chosen control plane, `False` with what it waits for.
pub const BOOTSTRAPPED: &str = "Bootstrapped";
/// The condition of etcd: every control plane is a member, a quorum of
/// members answers, and none reports an error.
pub const ETCD_HEALTHY: &str = "EtcdHealthy";
/// The condition of the Kubernetes API: `/readyz` answers `ok`.
pub const KUBERNETES_API_READY: &str = "KubernetesAPIReady";
/// The condition of the Nodes: every machine's Node is Ready.
pub const NODES_READY: &str = "NodesReady";
/// The condition of the machines' liveness: `True` while every configured
/// machine answers the node API, `False` naming the machines that are off.
pub const MACHINES_CONNECTED: &str = "MachinesConnected";
/// The condition of a rolling Talos upgrade: `True` while it runs (with
/// the progress), `False` when it is paused (with the reason) or done.
pub const UPGRADING: &str = "Upgrading";

/// Sets a condition the reconciler owns, its message on one line of at
/// most `CONDITION_LIMIT` characters (`Provisioned`, which carries the
/// tool's output, `TOOL_OUTPUT_LIMIT`).
pub(crate) fn set_condition(status: &mut TenantStatus, kind: &str, ok: bool, reason: &str, message: &str) {
    let limit = if kind == PROVISIONED { TOOL_OUTPUT_LIMIT } else { CONDITION_LIMIT };
    status.set_condition(kind, ok, reason, &one_line(message, limit));
}

/// The phase of a live tenant after a pass that went through:
/// `provisioning` until it was first ready (`ready_once`), then `updating`
/// while it changes (a rollout, machines leaving), else `active`, ready or
/// not: `ready` and the message say how it is.
pub(crate) fn phase(ready_once: bool, changing: bool) -> Phase {
    match (ready_once, changing) {
        (false, _) => Phase::Provisioning,
        (true, true) => Phase::Updating,
        (true, false) => Phase::Active,
    }
}

/// Applies `change` to the tenant's status and writes it when it differs
/// (`cms_store::update_tenant_status`). A tenant that is gone is left alone.
pub(crate) async fn update(
    store: &dyn Store,
    tenant: &str,
    change: impl Fn(&mut TenantStatus),
) -> Result<(), ReconcileError> {
    match update_tenant_status(store, tenant, change).await {
        Ok(_) => Ok(()),
        Err(StoreError::Conflict { .. }) => Err(ReconcileError::Invalid(format!(
            "tenant {tenant:?} kept changing while its status was written"
        ))),
        Err(err) => Err(err.into()),
    }
}

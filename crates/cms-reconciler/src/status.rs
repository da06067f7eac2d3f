//! Writing a tenant's status, of which the reconciler is the one writer:
//! read, change the reconciler's fields, write with the `resourceVersion`
//! just read, and retry when a spec write came in between. The one
//! condition it does not own, `ConfigPatchesResolved`, the store keeps in
//! every write's transaction, whatever status a writer sends.

use chrono::Utc;
use cms_model::{Condition, Tenant, TenantStatus};
use cms_store::{Key, Store, StoreError};

use crate::ReconcileError;

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
/// The condition of a rolling Talos upgrade: `True` while it runs (with
/// the progress), `False` when it is paused (with the reason) or done.
pub const UPGRADING: &str = "Upgrading";

/// Applies `change` to the tenant's status and writes it when it differs.
/// A tenant that is gone is left alone.
pub(crate) async fn update(
    store: &dyn Store,
    tenant: &str,
    change: impl Fn(&mut TenantStatus),
) -> Result<(), ReconcileError> {
    let key = Key::tenant(tenant);
    for _ in 0..10 {
        let Some(object) = store.get(&key) else { return Ok(()) };
        let current: Tenant =
            object.parse().map_err(|source| ReconcileError::Corrupt { what: key.to_string(), source })?;
        let mut status = current.status.clone();
        change(&mut status);
        if status == current.status {
            return Ok(());
        }
        let value = serde_json::to_value(&status)
            .map_err(|source| ReconcileError::Corrupt { what: key.to_string(), source })?;
        match store.update_status(key.clone(), value, Some(object.resource_version)).await {
            Ok(_) => return Ok(()),
            Err(StoreError::Conflict { .. }) => continue,
            Err(StoreError::NotFound(_)) => return Ok(()),
            Err(err) => return Err(err.into()),
        }
    }
    Err(ReconcileError::Invalid(format!("tenant {tenant:?} kept changing while its status was written")))
}

/// Sets a condition, keeping its transition time when the status stays.
pub(crate) fn set_condition(status: &mut TenantStatus, kind: &str, value: bool, reason: &str, message: &str) {
    let value = if value { "True" } else { "False" };
    match status.conditions.iter_mut().find(|condition| condition.kind == kind) {
        Some(condition) => {
            if condition.status != value {
                condition.last_transition_time = Utc::now();
            }
            condition.status = value.to_string();
            condition.reason = reason.to_string();
            condition.message = message.to_string();
        }
        None => status.conditions.push(Condition {
            kind: kind.to_string(),
            status: value.to_string(),
            reason: reason.to_string(),
            message: message.to_string(),
            last_transition_time: Utc::now(),
        }),
    }
}

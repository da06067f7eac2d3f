//! [`update_tenant_status`]: a change to some fields of a tenant's status,
//! written without losing another writer's fields. The reconciler owns most
//! of the status, the backup scheduler `status.backups` and the `Restoring`
//! condition; each reads the status, changes its own fields and writes at
//! the `resourceVersion` it read, and reads again when another write came
//! in between.

use cms_model::{Tenant, TenantStatus};

use crate::api::{Key, Store};
use crate::error::StoreError;

/// How many times a status write is tried when other writes keep coming in.
const ATTEMPTS: usize = 10;

/// Applies `change` to `tenant`'s status and writes it when it differs.
/// `Ok(false)` when nothing changed or the tenant is gone;
/// [`StoreError::Conflict`] when the tenant changed on each of ten tries.
pub async fn update_tenant_status(
    store: &dyn Store,
    tenant: &str,
    change: impl Fn(&mut TenantStatus),
) -> Result<bool, StoreError> {
    let key = Key::tenant(tenant);
    let mut last = None;
    for _ in 0..ATTEMPTS {
        let Some(object) = store.get(&key) else { return Ok(false) };
        let current: Tenant = object.parse().map_err(|err| StoreError::Corrupt(format!("{key}: {err}")))?;
        let mut status = current.status.clone();
        change(&mut status);
        if status == current.status {
            return Ok(false);
        }
        let value =
            serde_json::to_value(&status).map_err(|err| StoreError::Corrupt(format!("{key}: {err}")))?;
        match store.update_status(key.clone(), value, Some(object.resource_version)).await {
            Ok(_) => return Ok(true),
            Err(err @ StoreError::Conflict { .. }) => last = Some(err),
            Err(StoreError::NotFound(_)) => return Ok(false),
            Err(err) => return Err(err),
        }
    }
    Err(last.expect("every attempt conflicted"))
}

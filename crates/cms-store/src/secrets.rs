//! Tenants' sealed secrets: one row per tenant, written with the tenant's
//! create, dropped with the `service.io/secrets` finalizer or the tenant.
//! The rows stay out of the cache, the event log and every watch, and the
//! store never sees the plaintext: the service seals before it writes.

use sea_orm::{ActiveValue::Set, ConnectionTrait, EntityTrait};

use crate::entity::tenant_secret;
use crate::error::StoreError;
use crate::sql::SqlStore;

/// Writes a tenant's sealed secrets. A row left behind by an earlier tenant
/// of the same name is replaced, so a new tenant never inherits old secrets.
pub(crate) async fn insert(
    db: &impl ConnectionTrait,
    tenant: &str,
    sealed: Vec<u8>,
    now: &str,
) -> Result<(), StoreError> {
    drop(db, tenant).await?;
    let row = tenant_secret::ActiveModel {
        tenant: Set(tenant.to_string()),
        sealed: Set(sealed),
        created_at: Set(now.to_string()),
    };
    tenant_secret::Entity::insert(row).exec_without_returning(db).await?;
    Ok(())
}

/// Drops a tenant's sealed secrets, if it has any.
pub(crate) async fn drop(db: &impl ConnectionTrait, tenant: &str) -> Result<(), StoreError> {
    tenant_secret::Entity::delete_by_id(tenant.to_string()).exec(db).await?;
    Ok(())
}

impl SqlStore {
    pub(crate) async fn read_secrets(&self, tenant: String) -> Result<Option<Vec<u8>>, StoreError> {
        let row = tenant_secret::Entity::find_by_id(tenant).one(&self.db).await?;
        Ok(row.map(|row| row.sealed))
    }
}

//! The projected resources of each tenant's last provisioning run.

use chrono::Utc;
use cms_model::Projected;
use sea_orm::{ActiveValue::Set, DatabaseTransaction, EntityTrait, QueryOrder, TransactionTrait};
use tokio::sync::MutexGuard;

use crate::api::Key;
use crate::commit::stored_row;
use crate::dialect;
use crate::entity::projection;
use crate::error::StoreError;
use crate::lease::{self, Lease};
use crate::render::{format_time, json};
use crate::sql::SqlStore;

impl SqlStore {
    /// Starts a write to rows that go with `tenant`: under the write lock,
    /// held by the guard returned, fenced by `fence`, and with the tenant's
    /// row locked and required to exist.
    pub(crate) async fn begin_tenant_write(
        &self,
        tenant: &str,
        fence: Option<&Lease>,
    ) -> Result<(MutexGuard<'_, ()>, DatabaseTransaction), StoreError> {
        let guard = self.write_lock.lock().await;
        let txn = self.db.begin().await?;
        if let Some(lease) = fence {
            lease::check(&txn, lease).await?;
        }
        let key = Key::tenant(tenant.to_string());
        dialect::lock_owner(&txn, &key).await?;
        stored_row(&txn, &key).await?;
        Ok((guard, txn))
    }

    pub(crate) async fn write_projection(
        &self,
        tenant: String,
        items: Vec<Projected>,
        fence: Option<&Lease>,
    ) -> Result<(), StoreError> {
        let items = serde_json::to_string(&items).map_err(|err| StoreError::Corrupt(err.to_string()))?;
        let (_guard, txn) = self.begin_tenant_write(&tenant, fence).await?;
        projection::Entity::delete_by_id(tenant.clone()).exec(&txn).await?;
        let row = projection::ActiveModel {
            tenant: Set(tenant),
            items: Set(items),
            recorded_at: Set(format_time(Utc::now())),
        };
        projection::Entity::insert(row).exec_without_returning(&txn).await?;
        txn.commit().await?;
        Ok(())
    }

    pub(crate) async fn read_projection(
        &self,
        tenant: Option<String>,
    ) -> Result<Option<Vec<Projected>>, StoreError> {
        let rows = match tenant {
            Some(tenant) => projection::Entity::find_by_id(tenant).one(&self.db).await?.into_iter().collect(),
            None => projection::Entity::find().order_by_asc(projection::Column::Tenant).all(&self.db).await?,
        };
        if rows.is_empty() {
            return Ok(None);
        }
        let mut items = Vec::new();
        for row in rows {
            items.extend(json::<Vec<Projected>>(&row.items)?);
        }
        Ok(Some(items))
    }
}

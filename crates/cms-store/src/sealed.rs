//! The store's sealed data, for moving it to another sealing key: each
//! tenant's sealed secrets and the settings that hold sealed values (the
//! canary). Reads come a page at a time in name order, and every write is a
//! compare-and-swap on the bytes read, so a blob that changed meanwhile (a
//! tenant recreated, another replica faster) is left alone and nothing is
//! re-sealed twice.

use async_trait::async_trait;
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{ActiveValue::Set, ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};

use crate::entity::{setting, tenant_secret};
use crate::error::StoreError;
use crate::sql::SqlStore;

/// Sealed data and the settings that steer sealing.
#[cfg_attr(any(test, feature = "testsuite"), mockall::automock)]
#[async_trait]
pub trait Sealed: Send + Sync + 'static {
    /// Up to `limit` tenants' sealed secrets, `(tenant, sealed)`, after the
    /// tenant `after`, by tenant name.
    async fn sealed_secrets(
        &self,
        after: Option<String>,
        limit: u64,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError>;

    /// Replaces the sealed secrets of `tenant` with `new` when they still
    /// are `old`. `false`, writing nothing, when they changed or are gone.
    async fn replace_secrets(&self, tenant: String, old: Vec<u8>, new: Vec<u8>) -> Result<bool, StoreError>;

    /// The setting `name`, if it is set.
    async fn setting(&self, name: String) -> Result<Option<String>, StoreError>;

    /// Sets `name` to `value`, whatever it held.
    async fn put_setting(&self, name: String, value: String) -> Result<(), StoreError>;

    /// Replaces the setting `name` with `new` when it still is `old`.
    /// `false`, writing nothing, when it is not.
    async fn replace_setting(&self, name: String, old: String, new: String) -> Result<bool, StoreError>;
}

#[async_trait]
impl Sealed for SqlStore {
    async fn sealed_secrets(
        &self,
        after: Option<String>,
        limit: u64,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let mut query =
            tenant_secret::Entity::find().order_by_asc(tenant_secret::Column::Tenant).limit(limit);
        if let Some(after) = after {
            query = query.filter(tenant_secret::Column::Tenant.gt(after));
        }
        let rows = query.all(&self.db).await?;
        Ok(rows.into_iter().map(|row| (row.tenant, row.sealed)).collect())
    }

    async fn replace_secrets(&self, tenant: String, old: Vec<u8>, new: Vec<u8>) -> Result<bool, StoreError> {
        let _guard = self.write_lock.lock().await;
        let done = tenant_secret::Entity::update_many()
            .col_expr(tenant_secret::Column::Sealed, Expr::value(new))
            .filter(tenant_secret::Column::Tenant.eq(tenant))
            .filter(tenant_secret::Column::Sealed.eq(old))
            .exec(&self.db)
            .await?;
        Ok(done.rows_affected == 1)
    }

    async fn setting(&self, name: String) -> Result<Option<String>, StoreError> {
        Ok(setting::Entity::find_by_id(name).one(&self.db).await?.map(|row| row.value))
    }

    async fn put_setting(&self, name: String, value: String) -> Result<(), StoreError> {
        let _guard = self.write_lock.lock().await;
        let row = setting::ActiveModel { name: Set(name), value: Set(value) };
        let on_conflict = sea_orm::sea_query::OnConflict::column(setting::Column::Name)
            .update_column(setting::Column::Value)
            .to_owned();
        setting::Entity::insert(row).on_conflict(on_conflict).exec_without_returning(&self.db).await?;
        Ok(())
    }

    async fn replace_setting(&self, name: String, old: String, new: String) -> Result<bool, StoreError> {
        let _guard = self.write_lock.lock().await;
        let done = setting::Entity::update_many()
            .col_expr(setting::Column::Value, Expr::value(new))
            .filter(setting::Column::Name.eq(name))
            .filter(Expr::col(setting::Column::Value).eq(old))
            .exec(&self.db)
            .await?;
        Ok(done.rows_affected == 1)
    }
}

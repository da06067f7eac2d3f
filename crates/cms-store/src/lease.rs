//! Work leases: which replica may do a piece of work (a tenant's
//! reconcile), in which epoch, until when; and fenced writes, which check in
//! their own transaction that the lease they carry is still held.
//!
//! Times are the database's clock (milliseconds since the Unix epoch), so
//! the replicas' clocks do not matter. The epoch of a lease grows each time
//! it changes hands (a release counts), so a holder that lost its lease, even
//! to itself after a release, can never write with the old one. On
//! PostgreSQL a fenced write holds a share lock on the lease row until it
//! commits: a takeover waits for it, and no write under the old epoch
//! commits after the takeover.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use cms_model::{Kind, LabelSelector, Page, Projected};
use sea_orm::sea_query::{Alias, Expr, ExprTrait, LockType, OnConflict, Query};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseTransaction, EntityTrait, QueryFilter, QuerySelect,
    TransactionTrait,
};
use serde_json::Value;

use crate::api::{Deleted, Draft, Key, Listing, Object, Store, WatchRequest, WatchStream};
use crate::dialect::now_millis;
use crate::entity::lease;
use crate::error::StoreError;
use crate::sql::SqlStore;

/// A held lease. Hand it back to [`Leases::renew_lease`] and
/// [`Leases::release_lease`], and to [`Leases::fenced`] for writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// What the lease is for, such as `tenant/acme`.
    pub name: String,
    /// Who holds it, such as a replica's id.
    pub holder: String,
    /// Grows by one each time the lease changes hands.
    pub epoch: u64,
    /// When it expires unless renewed, by the database's clock.
    pub expires_at: DateTime<Utc>,
}

/// Leases on named work, shared by every replica of one database.
#[cfg_attr(any(test, feature = "testsuite"), mockall::automock)]
#[async_trait]
pub trait Leases: Send + Sync + 'static {
    /// Takes the lease `name` for `holder` for `ttl`, if it is free, expired,
    /// or already `holder`'s (then it is extended, in the same epoch).
    /// `None` when another holder has it.
    async fn acquire_lease(
        &self,
        name: String,
        holder: String,
        ttl: Duration,
    ) -> Result<Option<Lease>, StoreError>;

    /// Extends a held lease by `ttl` from now. [`StoreError::LeaseLost`]
    /// when it changed hands meanwhile; an expired lease that nobody took
    /// is still renewed.
    async fn renew_lease(&self, lease: Lease, ttl: Duration) -> Result<Lease, StoreError>;

    /// Gives a lease up, so that any holder can take it at once. Releasing
    /// a lease that was lost already does nothing.
    async fn release_lease(&self, lease: Lease) -> Result<(), StoreError>;

    /// The store as seen by the holder of `lease`: reads as usual, and every
    /// write (create, update, status, delete, finalizers, projection) fails
    /// with [`StoreError::LeaseLost`], writing nothing, unless the lease is
    /// still held, unexpired, in its epoch, when the write commits.
    fn fenced(&self, lease: Lease) -> Arc<dyn Store>;
}

/// Checks, inside a write transaction, that `lease` is still held; on
/// PostgreSQL it keeps the lease row share-locked until the commit.
pub(crate) async fn check(txn: &DatabaseTransaction, lease: &Lease) -> Result<(), StoreError> {
    let held = lease::Entity::find_by_id(lease.name.clone())
        .filter(lease::Column::Holder.eq(lease.holder.as_str()))
        .filter(lease::Column::Epoch.eq(lease.epoch as i64))
        .filter(Expr::col(lease::Column::ExpiresAt).gt(now_millis(txn.get_database_backend())))
        .lock(LockType::Share)
        .one(txn)
        .await?;
    match held {
        Some(_) => Ok(()),
        None => Err(lost(lease)),
    }
}

fn lost(lease: &Lease) -> StoreError {
    StoreError::LeaseLost { name: lease.name.clone(), epoch: lease.epoch }
}

fn millis(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX / 2)
}

async fn read(txn: &DatabaseTransaction, name: &str) -> Result<Lease, StoreError> {
    let row = lease::Entity::find_by_id(name.to_string())
        .one(txn)
        .await?
        .ok_or_else(|| StoreError::Corrupt(format!("lease {name:?} vanished")))?;
    let expires_at = DateTime::from_timestamp_millis(row.expires_at)
        .ok_or_else(|| StoreError::Corrupt(format!("lease {name:?} expires at {}", row.expires_at)))?;
    Ok(Lease { name: row.name, holder: row.holder, epoch: row.epoch as u64, expires_at })
}

#[async_trait]
impl Leases for SqlStore {
    async fn acquire_lease(
        &self,
        name: String,
        holder: String,
        ttl: Duration,
    ) -> Result<Option<Lease>, StoreError> {
        if holder.is_empty() {
            return Err(StoreError::Refused("a lease holder needs a name".into()));
        }
        let backend = self.db.get_database_backend();
        let now = || now_millis(backend);
        let (table, excluded) = (Alias::new("leases"), Alias::new("excluded"));
        let current = |column: lease::Column| Expr::col((table.clone(), column));
        let proposed = |column: lease::Column| Expr::col((excluded.clone(), column));
        let same_holder = current(lease::Column::Holder).eq(proposed(lease::Column::Holder));
        let upsert = Query::insert()
            .into_table(lease::Entity)
            .columns([
                lease::Column::Name,
                lease::Column::Holder,
                lease::Column::Epoch,
                lease::Column::ExpiresAt,
            ])
            .values_panic([name.clone().into(), holder.into(), 1i64.into(), now().add(millis(ttl))])
            .on_conflict(
                OnConflict::column(lease::Column::Name)
                    .value(lease::Column::Holder, proposed(lease::Column::Holder))
                    .value(
                        lease::Column::Epoch,
                        Expr::case(same_holder.clone(), current(lease::Column::Epoch))
                            .finally(current(lease::Column::Epoch).add(1)),
                    )
                    .value(lease::Column::ExpiresAt, proposed(lease::Column::ExpiresAt))
                    .action_and_where(same_holder.or(current(lease::Column::ExpiresAt).lte(now())))
                    .to_owned(),
            )
            .to_owned();
        let _guard = self.write_lock.lock().await;
        let txn = self.db.begin().await?;
        let taken = txn.execute(&upsert).await?.rows_affected() == 1;
        let lease = if taken { Some(read(&txn, &name).await?) } else { None };
        txn.commit().await?;
        Ok(lease)
    }

    async fn renew_lease(&self, held: Lease, ttl: Duration) -> Result<Lease, StoreError> {
        let backend = self.db.get_database_backend();
        let _guard = self.write_lock.lock().await;
        let txn = self.db.begin().await?;
        let renewed = lease::Entity::update_many()
            .col_expr(lease::Column::ExpiresAt, now_millis(backend).add(millis(ttl)))
            .filter(lease::Column::Name.eq(held.name.as_str()))
            .filter(lease::Column::Holder.eq(held.holder.as_str()))
            .filter(lease::Column::Epoch.eq(held.epoch as i64))
            .exec(&txn)
            .await?;
        if renewed.rows_affected != 1 {
            return Err(lost(&held));
        }
        let lease = read(&txn, &held.name).await?;
        txn.commit().await?;
        Ok(lease)
    }

    async fn release_lease(&self, held: Lease) -> Result<(), StoreError> {
        let _guard = self.write_lock.lock().await;
        lease::Entity::update_many()
            .col_expr(lease::Column::Holder, Expr::value(""))
            .col_expr(lease::Column::ExpiresAt, Expr::value(0i64))
            .filter(lease::Column::Name.eq(held.name.as_str()))
            .filter(lease::Column::Holder.eq(held.holder.as_str()))
            .filter(lease::Column::Epoch.eq(held.epoch as i64))
            .exec(&self.db)
            .await?;
        Ok(())
    }

    fn fenced(&self, lease: Lease) -> Arc<dyn Store> {
        let store = self.this.upgrade().expect("a SqlStore lives in the Arc that SqlStore::open returned");
        Arc::new(Fenced { store, lease })
    }
}

/// The store as the holder of one lease sees it.
struct Fenced {
    store: Arc<SqlStore>,
    lease: Lease,
}

#[async_trait]
impl Store for Fenced {
    fn get(&self, key: &Key) -> Option<Arc<Object>> {
        self.store.get(key)
    }

    fn list(&self, kind: Kind, tenant: Option<String>, page: Page) -> Listing {
        self.store.list(kind, tenant, page)
    }

    fn select(&self, kind: Kind, tenant: Option<String>, selector: &LabelSelector, page: Page) -> Listing {
        self.store.select(kind, tenant, selector, page)
    }

    fn all(&self, kind: Kind, tenant: Option<String>) -> Vec<Arc<Object>> {
        self.store.all(kind, tenant)
    }

    async fn create(&self, key: Key, draft: Draft) -> Result<Arc<Object>, StoreError> {
        self.store.create_object(key, draft, Some(&self.lease)).await
    }

    async fn update(&self, key: Key, draft: Draft, expected: u64) -> Result<Arc<Object>, StoreError> {
        self.store.update_object(key, draft, expected, Some(&self.lease)).await
    }

    async fn update_status(
        &self,
        key: Key,
        status: Value,
        expected: Option<u64>,
    ) -> Result<Arc<Object>, StoreError> {
        self.store.update_object_status(key, status, expected, Some(&self.lease)).await
    }

    async fn delete(&self, key: Key) -> Result<Deleted, StoreError> {
        self.store.delete_object(key, Some(&self.lease)).await
    }

    async fn remove_finalizer(&self, key: Key, finalizer: String) -> Result<Option<Arc<Object>>, StoreError> {
        self.store.clear_finalizer(key, finalizer, Some(&self.lease)).await
    }

    async fn watch(&self, kind: Kind, since: Option<u64>) -> Result<WatchStream, StoreError> {
        self.store.watch(kind, since).await
    }

    async fn watch_with(&self, request: WatchRequest) -> Result<WatchStream, StoreError> {
        self.store.watch_with(request).await
    }

    async fn set_projection(&self, tenant: String, items: Vec<Projected>) -> Result<(), StoreError> {
        self.store.write_projection(tenant, items, Some(&self.lease)).await
    }

    async fn projection(&self, tenant: Option<String>) -> Result<Option<Vec<Projected>>, StoreError> {
        self.store.projection(tenant).await
    }

    async fn set_tool_run(&self, tenant: String, run: cms_model::ToolRun) -> Result<(), StoreError> {
        self.store.write_tool_run(tenant, run, Some(&self.lease)).await
    }

    async fn tool_runs(&self, tenant: String) -> Result<Vec<cms_model::ToolRun>, StoreError> {
        self.store.tool_runs(tenant).await
    }

    async fn secrets(&self, tenant: String) -> Result<Option<Vec<u8>>, StoreError> {
        self.store.secrets(tenant).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.store.ping().await
    }

    fn revision(&self) -> u64 {
        self.store.revision()
    }
}

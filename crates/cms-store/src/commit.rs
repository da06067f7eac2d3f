//! The database side of the writes: each write of the [`Store`](crate::Store)
//! handed, as its rule from [`crate::write`], to the batch writer of
//! [`crate::batch`] (with its [`Lease`] when fenced); the counter rows read;
//! a committed batch published to the cache; the event log compacted.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, ConnectionTrait, DatabaseTransaction, EntityTrait, QueryFilter};
use serde_json::Value;

use crate::api::{Deleted, Draft, Key, Object, WatchEvent};
use crate::entity::{counter, event, object};
use crate::error::StoreError;
use crate::lease::Lease;
use crate::sql::SqlStore;
use crate::write;

/// The value of a named counter.
pub(crate) async fn counter(db: &impl ConnectionTrait, name: &str) -> Result<u64, StoreError> {
    let row = counter::Entity::find_by_id(name.to_string())
        .one(db)
        .await?
        .ok_or_else(|| StoreError::Corrupt(format!("counter {name:?} is missing")))?;
    Ok(row.value as u64)
}

/// The stored row of `key`, or `NotFound`.
pub(crate) async fn stored_row(db: &impl ConnectionTrait, key: &Key) -> Result<object::Model, StoreError> {
    object::Entity::find_by_id((key.kind.as_str().to_string(), key.tenant.clone(), key.name.clone()))
        .one(db)
        .await?
        .ok_or_else(|| StoreError::NotFound(key.to_string()))
}

impl SqlStore {
    /// Applies a committed write to the cache. When other replicas' writes
    /// come first, reads them from the log; when that fails, the listener
    /// applies everything once the database answers again.
    pub(crate) async fn publish(&self, events: Vec<WatchEvent>) {
        if events.is_empty() || self.cache.apply(events).is_ok() {
            return;
        }
        if let Err(err) = self.catch_up().await {
            tracing::warn!(error = %err, "a write committed but the event log could not be read back yet");
        }
    }

    /// Drops events the log no longer needs to keep.
    /// `compacted` remembers the last compaction seen, so that the counter
    /// is read only when the log may have outgrown its retention.
    pub(crate) async fn compact(&self, txn: &DatabaseTransaction, last: u64) -> Result<(), StoreError> {
        let slack = Ord::max(self.retention / 10, 1);
        let seen = self.compacted.load(Ordering::Relaxed);
        if last.saturating_sub(seen) <= self.retention + slack {
            return Ok(());
        }
        let compacted = counter(txn, counter::COMPACTED).await?;
        self.compacted.fetch_max(compacted, Ordering::Relaxed);
        if last.saturating_sub(compacted) <= self.retention + slack {
            return Ok(());
        }
        let upto = last - self.retention;
        event::Entity::delete_many().filter(event::Column::Revision.lte(upto as i64)).exec(txn).await?;
        counter::Entity::update_many()
            .col_expr(counter::Column::Value, Expr::value(upto as i64))
            .filter(counter::Column::Name.eq(counter::COMPACTED))
            .exec(txn)
            .await?;
        // Should this roll back, the log only keeps more than it needs until
        // a later write compacts it.
        self.compacted.fetch_max(upto, Ordering::Relaxed);
        Ok(())
    }

    pub(crate) async fn create_object(
        &self,
        key: Key,
        draft: Draft,
        fence: Option<&Lease>,
    ) -> Result<Arc<Object>, StoreError> {
        let max = self.max_machines;
        self.submit(&key.clone(), fence, move |view| {
            write::machines_within(view, &key, max, |view| write::create(view, &key, &draft))
        })
        .await
    }

    pub(crate) async fn update_object(
        &self,
        key: Key,
        draft: Draft,
        expected: u64,
        fence: Option<&Lease>,
    ) -> Result<Arc<Object>, StoreError> {
        let max = self.max_machines;
        self.submit(&key.clone(), fence, move |view| {
            write::machines_within(view, &key, max, |view| write::update(view, &key, &draft, expected))
        })
        .await
    }

    pub(crate) async fn update_object_status(
        &self,
        key: Key,
        status: Value,
        expected: Option<u64>,
        fence: Option<&Lease>,
    ) -> Result<Arc<Object>, StoreError> {
        self.submit(&key.clone(), fence, move |view| write::update_status(view, &key, &status, expected))
            .await
    }

    pub(crate) async fn delete_object(&self, key: Key, fence: Option<&Lease>) -> Result<Deleted, StoreError> {
        self.submit(&key.clone(), fence, move |view| write::delete(view, &key)).await
    }

    pub(crate) async fn clear_finalizer(
        &self,
        key: Key,
        finalizer: String,
        fence: Option<&Lease>,
    ) -> Result<Option<Arc<Object>>, StoreError> {
        self.submit(&key.clone(), fence, move |view| write::clear(view, &key, &finalizer)).await
    }
}

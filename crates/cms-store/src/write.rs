//! The write path: every operation is one transaction that changes rows,
//! takes revisions from the counter row and appends to the event log.
//!
//! The counter row is taken last, by an `UPDATE` inside the transaction, so
//! on PostgreSQL concurrent replicas' transactions queue on it and commit in
//! the order of their revisions: a reader of the log never sees revision
//! `r + 1` before `r`. A fenced write (one that carries a [`Lease`]) first
//! checks, in the same transaction, that the lease is still held.

use std::sync::Arc;

use chrono::Utc;
use cms_model::Kind;
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseTransaction, EntityTrait, QueryFilter,
    TransactionTrait,
};
use serde_json::Value;
use tokio::sync::MutexGuard;

use crate::api::{Deleted, Draft, EventType, Key, Object, WatchEvent};
use crate::dialect;
use crate::entity::{counter, event, object};
use crate::error::StoreError;
use crate::lease::{self, Lease};
use crate::render::{format_time, json, map_text};
use crate::rows::{self, text};
use crate::secrets;
use crate::sql::SqlStore;
use crate::{FINALIZER_MACHINES, FINALIZER_SECRETS};

/// The value of a named counter.
pub(crate) async fn counter(db: &impl ConnectionTrait, name: &str) -> Result<u64, StoreError> {
    let row = counter::Entity::find_by_id(name.to_string())
        .one(db)
        .await?
        .ok_or_else(|| StoreError::Corrupt(format!("counter {name:?} is missing")))?;
    Ok(row.value as u64)
}

/// The changes of one transaction, in the order their events are logged.
#[derive(Default)]
struct Changes(Vec<Change>);

enum Change {
    /// An object added or modified; rendered at commit.
    Upsert(EventType, Key),
    /// An object removed; rendered before its row went.
    Deleted(Object),
}

impl Changes {
    fn upsert(&mut self, event_type: EventType, key: Key) {
        self.0.push(Change::Upsert(event_type, key));
    }
}

/// An open write: the replica's write lock and the transaction.
struct Write<'a> {
    _guard: MutexGuard<'a, ()>,
    txn: DatabaseTransaction,
    now: String,
    changes: Changes,
}

impl SqlStore {
    /// Opens a write of `key`: checks the fence, if any, and locks the row
    /// of the tenant that owns `key`.
    async fn begin(&self, key: &Key, fence: Option<&Lease>) -> Result<Write<'_>, StoreError> {
        let guard = self.write_lock.lock().await;
        let txn = self.db.begin().await?;
        if let Some(lease) = fence {
            lease::check(&txn, lease).await?;
        }
        dialect::lock_owner(&txn, key).await?;
        Ok(Write { _guard: guard, txn, now: format_time(Utc::now()), changes: Changes::default() })
    }

    /// Logs the changes, commits, and applies them to the cache.
    async fn commit(&self, write: Write<'_>) -> Result<Vec<WatchEvent>, StoreError> {
        let Write { _guard, txn, changes, .. } = write;
        let count = changes.0.len() as i64;
        if count == 0 {
            txn.commit().await?;
            return Ok(Vec::new());
        }
        counter::Entity::update_many()
            .col_expr(counter::Column::Value, Expr::col(counter::Column::Value).add(count))
            .filter(counter::Column::Name.eq(counter::REVISION))
            .exec(&txn)
            .await?;
        let last = counter(&txn, counter::REVISION).await?;
        let first = last + 1 - count as u64;
        let mut events = Vec::with_capacity(changes.0.len());
        for (revision, change) in (first..).zip(changes.0) {
            let (event_type, object) = match change {
                Change::Upsert(event_type, key) => (event_type, rows::render_current(&txn, &key).await?),
                Change::Deleted(object) => (EventType::Deleted, object),
            };
            events.push(WatchEvent { revision, event_type, object: Arc::new(object) });
        }
        let logged = events.iter().map(|event| event::ActiveModel {
            revision: Set(event.revision as i64),
            kind: Set(event.object.key.kind.as_str().to_string()),
            tenant: Set(event.object.key.tenant.clone()),
            name: Set(event.object.key.name.clone()),
            event_type: Set(event.event_type.as_str().to_string()),
            object: Set(String::from_utf8_lossy(&event.object.json).into_owned()),
        });
        event::Entity::insert_many(logged).exec_without_returning(&txn).await?;
        self.compact(&txn, last).await?;
        dialect::notify(&txn, last).await?;
        txn.commit().await?;
        self.publish(events.clone()).await;
        Ok(events)
    }

    /// Applies a committed write to the cache. When other replicas' writes
    /// come first, reads them from the log; when that fails, the listener
    /// applies everything once the database answers again.
    async fn publish(&self, events: Vec<WatchEvent>) {
        if self.cache.apply(events).is_ok() {
            return;
        }
        if let Err(err) = self.catch_up().await {
            tracing::warn!(error = %err, "a write committed but the event log could not be read back yet");
        }
    }

    /// Drops events the log no longer needs to keep.
    async fn compact(&self, txn: &DatabaseTransaction, last: u64) -> Result<(), StoreError> {
        let compacted = counter(txn, counter::COMPACTED).await?;
        let slack = Ord::max(self.retention / 10, 1);
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
        Ok(())
    }

    /// The tenant that `key` lives in, which must exist and not be deleting.
    async fn live_owner(&self, write: &Write<'_>, key: &Key) -> Result<object::Model, StoreError> {
        let owner = rows::get(&write.txn, &key.owner()).await?;
        if owner.deletion_timestamp.is_some() {
            return Err(StoreError::Refused(format!("tenant {:?} is being deleted", owner.name)));
        }
        Ok(owner)
    }

    /// Records that a tenant's spec changed through one of its node groups.
    async fn touch_owner(&self, write: &mut Write<'_>, key: &Key) -> Result<(), StoreError> {
        let owner = key.owner();
        let row = rows::get(&write.txn, &owner).await?;
        let sets = vec![
            (object::Column::Generation, Expr::col(object::Column::Generation).add(1)),
            (object::Column::UpdatedAt, text(&write.now)),
        ];
        rows::write_if_current(&write.txn, &owner, row.resource_version, sets).await?;
        write.changes.upsert(EventType::Modified, owner);
        Ok(())
    }

    pub(crate) async fn create_object(
        &self,
        key: Key,
        draft: Draft,
        fence: Option<&Lease>,
    ) -> Result<Arc<Object>, StoreError> {
        let mut write = self.begin(&key, fence).await?;
        if rows::find(&write.txn, &key).await?.is_some() {
            return Err(StoreError::AlreadyExists(key.to_string()));
        }
        let (spec, groups) = rows::split_groups(key.kind, draft.spec)?;
        match (key.kind, draft.secrets) {
            (Kind::Tenant, Some(sealed)) => {
                secrets::insert(&write.txn, &key.name, sealed, &write.now).await?
            }
            (Kind::Tenant, None) => {}
            (_, Some(_)) => return Err(StoreError::Refused(format!("{key} cannot carry secrets"))),
            (_, None) => {
                self.live_owner(&write, &key).await?;
            }
        }
        let status = draft.status.unwrap_or_else(|| rows::default_status(key.kind));
        let row = rows::new_row(&key, &draft.labels, &draft.annotations, &spec, &status, &write.now);
        rows::insert(&write.txn, &key, row).await?;
        write.changes.upsert(EventType::Added, key.clone());
        for group in groups.unwrap_or_default() {
            let group_key = Key::child(Kind::NodeGroup, &key.name, rows::group_name(&group)?);
            insert_group(&mut write, group_key, &group).await?;
        }
        if key.kind == Kind::NodeGroup {
            self.touch_owner(&mut write, &key).await?;
        }
        let events = self.commit(write).await?;
        latest(&events, &key)
    }

    pub(crate) async fn update_object(
        &self,
        key: Key,
        draft: Draft,
        expected: u64,
        fence: Option<&Lease>,
    ) -> Result<Arc<Object>, StoreError> {
        let mut write = self.begin(&key, fence).await?;
        let row = rows::get(&write.txn, &key).await?;
        if row.resource_version as u64 != expected {
            let current = row.resource_version as u64;
            return Err(StoreError::Conflict { what: key.to_string(), expected, current });
        }
        if row.deletion_timestamp.is_some() {
            return Err(StoreError::Refused(format!("{key} is being deleted")));
        }
        if key.kind != Kind::Tenant {
            self.live_owner(&write, &key).await?;
        }
        let (spec, groups) = rows::split_groups(key.kind, draft.spec)?;
        let plan = match groups {
            Some(groups) => GroupPlan::new(&write.txn, &key.name, groups).await?,
            None => GroupPlan::default(),
        };
        let changed = json::<Value>(&row.spec)? != spec || !plan.is_empty();
        let mut sets = vec![
            (object::Column::Spec, text(spec.to_string())),
            (object::Column::Labels, text(map_text(&draft.labels))),
            (object::Column::Annotations, text(map_text(&draft.annotations))),
            (object::Column::UpdatedAt, text(&write.now)),
        ];
        if changed {
            sets.push((object::Column::Generation, Expr::col(object::Column::Generation).add(1)));
        }
        rows::write_if_current(&write.txn, &key, expected as i64, sets).await?;
        plan.apply(&mut write).await?;
        write.changes.upsert(EventType::Modified, key.clone());
        if key.kind == Kind::NodeGroup && changed {
            self.touch_owner(&mut write, &key).await?;
        }
        let events = self.commit(write).await?;
        latest(&events, &key)
    }

    pub(crate) async fn update_object_status(
        &self,
        key: Key,
        status: Value,
        expected: Option<u64>,
        fence: Option<&Lease>,
    ) -> Result<Arc<Object>, StoreError> {
        let mut write = self.begin(&key, fence).await?;
        let row = rows::get(&write.txn, &key).await?;
        let expected = expected.unwrap_or(row.resource_version as u64);
        let sets = vec![
            (object::Column::Status, text(status.to_string())),
            (object::Column::UpdatedAt, text(&write.now)),
        ];
        rows::write_if_current(&write.txn, &key, expected as i64, sets).await?;
        write.changes.upsert(EventType::Modified, key.clone());
        let events = self.commit(write).await?;
        latest(&events, &key)
    }

    pub(crate) async fn delete_object(&self, key: Key, fence: Option<&Lease>) -> Result<Deleted, StoreError> {
        let mut write = self.begin(&key, fence).await?;
        let row = rows::get(&write.txn, &key).await?;
        let finalizers: &[&str] = match key.kind {
            Kind::Tenant => &[FINALIZER_MACHINES, FINALIZER_SECRETS],
            Kind::Machine => &[FINALIZER_MACHINES],
            Kind::NodeGroup | Kind::ConfigPatch => {
                let object = rows::render_current(&write.txn, &key).await?;
                rows::remove(&write.txn, &key).await?;
                write.changes.0.push(Change::Deleted(object));
                if key.kind == Kind::NodeGroup {
                    self.touch_owner(&mut write, &key).await?;
                }
                self.commit(write).await?;
                return Ok(Deleted::Removed);
            }
        };
        if row.deletion_timestamp.is_none() {
            let sets = vec![
                (object::Column::DeletionTimestamp, text(&write.now)),
                (object::Column::Finalizers, text(serde_json::json!(finalizers).to_string())),
                (object::Column::UpdatedAt, text(&write.now)),
            ];
            rows::write_if_current(&write.txn, &key, row.resource_version, sets).await?;
            write.changes.upsert(EventType::Modified, key.clone());
        }
        let object = rows::render_current(&write.txn, &key).await?;
        self.commit(write).await?;
        Ok(Deleted::Marked(Arc::new(object)))
    }

    pub(crate) async fn clear_finalizer(
        &self,
        key: Key,
        finalizer: String,
        fence: Option<&Lease>,
    ) -> Result<Option<Arc<Object>>, StoreError> {
        let mut write = self.begin(&key, fence).await?;
        let row = rows::get(&write.txn, &key).await?;
        let mut finalizers: Vec<String> = json(&row.finalizers)?;
        let before = finalizers.len();
        finalizers.retain(|f| *f != finalizer);
        if key.kind == Kind::Tenant && finalizer == FINALIZER_SECRETS && finalizers.len() != before {
            secrets::drop(&write.txn, &key.name).await?;
        }
        if finalizers.is_empty() && row.deletion_timestamp.is_some() {
            let last = rows::render_current(&write.txn, &key).await?;
            if key.kind == Kind::Tenant {
                for child in rows::children(&write.txn, &key.name, None).await? {
                    let child_key = crate::render::key_of(&child)?;
                    let object = rows::render_current(&write.txn, &child_key).await?;
                    rows::remove(&write.txn, &child_key).await?;
                    write.changes.0.push(Change::Deleted(object));
                }
                crate::entity::projection::Entity::delete_by_id(key.name.clone()).exec(&write.txn).await?;
                secrets::drop(&write.txn, &key.name).await?;
            }
            rows::remove(&write.txn, &key).await?;
            write.changes.0.push(Change::Deleted(last));
            self.commit(write).await?;
            return Ok(None);
        }
        if finalizers.len() != before {
            let sets = vec![
                (object::Column::Finalizers, text(serde_json::json!(finalizers).to_string())),
                (object::Column::UpdatedAt, text(&write.now)),
            ];
            rows::write_if_current(&write.txn, &key, row.resource_version, sets).await?;
            write.changes.upsert(EventType::Modified, key.clone());
        }
        let object = rows::render_current(&write.txn, &key).await?;
        self.commit(write).await?;
        Ok(Some(Arc::new(object)))
    }
}

async fn insert_group(write: &mut Write<'_>, key: Key, spec: &Value) -> Result<(), StoreError> {
    let status = rows::default_status(Kind::NodeGroup);
    let row = rows::new_row(&key, &Default::default(), &Default::default(), spec, &status, &write.now);
    rows::insert(&write.txn, &key, row).await?;
    write.changes.upsert(EventType::Added, key);
    Ok(())
}

/// How a tenant update changes its set of node groups.
#[derive(Default)]
struct GroupPlan {
    added: Vec<(Key, Value)>,
    changed: Vec<(Key, i64, Value)>,
    removed: Vec<Key>,
}

impl GroupPlan {
    async fn new(
        txn: &DatabaseTransaction,
        tenant: &str,
        wanted: Vec<Value>,
    ) -> Result<GroupPlan, StoreError> {
        let mut current = rows::children(txn, tenant, Some(Kind::NodeGroup)).await?;
        let mut plan = GroupPlan::default();
        for spec in wanted {
            let key = Key::child(Kind::NodeGroup, tenant, rows::group_name(&spec)?);
            match current.iter().position(|row| row.name == key.name) {
                Some(index) => {
                    let row = current.swap_remove(index);
                    if json::<Value>(&row.spec)? != spec {
                        plan.changed.push((key, row.resource_version, spec));
                    }
                }
                None => plan.added.push((key, spec)),
            }
        }
        plan.removed =
            current.iter().map(|row| Key::child(Kind::NodeGroup, tenant, row.name.clone())).collect();
        Ok(plan)
    }

    fn is_empty(&self) -> bool {
        self.added.is_empty() && self.changed.is_empty() && self.removed.is_empty()
    }

    async fn apply(self, write: &mut Write<'_>) -> Result<(), StoreError> {
        for key in self.removed {
            let object = rows::render_current(&write.txn, &key).await?;
            rows::remove(&write.txn, &key).await?;
            write.changes.0.push(Change::Deleted(object));
        }
        for (key, version, spec) in self.changed {
            let sets = vec![
                (object::Column::Spec, text(spec.to_string())),
                (object::Column::Generation, Expr::col(object::Column::Generation).add(1)),
                (object::Column::UpdatedAt, text(&write.now)),
            ];
            rows::write_if_current(&write.txn, &key, version, sets).await?;
            write.changes.upsert(EventType::Modified, key);
        }
        for (key, spec) in self.added {
            insert_group(write, key, &spec).await?;
        }
        Ok(())
    }
}

/// The newest state of `key` among the events of a write.
fn latest(events: &[WatchEvent], key: &Key) -> Result<Arc<Object>, StoreError> {
    events
        .iter()
        .rev()
        .find(|event| event.object.key == *key)
        .map(|event| event.object.clone())
        .ok_or_else(|| StoreError::Corrupt(format!("no event for {key}")))
}

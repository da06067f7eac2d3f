//! The writes, each a function of the rows of one tenant as a [`View`]
//! shows them. [`crate::batch`] runs them in batches, one transaction each,
//! which takes revisions from the counter row and appends to the event log.
//!
//! The counter row is taken last, by an `UPDATE` inside the transaction, so
//! on PostgreSQL concurrent replicas' transactions queue on it and commit in
//! the order of their revisions: a reader of the log never sees revision
//! `r + 1` before `r`. A fenced write (one that carries a [`Lease`]) is
//! checked, in the same transaction, against the lease.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use cms_model::Kind;
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, ConnectionTrait, DatabaseTransaction, EntityTrait, QueryFilter};
use serde_json::Value;

use crate::api::{Deleted, Draft, EventType, Key, Object, WatchEvent};
use crate::entity::{counter, event};
use crate::error::StoreError;
use crate::lease::Lease;
use crate::render::{json, map_text};
use crate::rows;
use crate::sql::SqlStore;
use crate::view::{Side, View};
use crate::{FINALIZER_MACHINES, FINALIZER_SECRETS};

/// The value of a named counter.
pub(crate) async fn counter(db: &impl ConnectionTrait, name: &str) -> Result<u64, StoreError> {
    let row = counter::Entity::find_by_id(name.to_string())
        .one(db)
        .await?
        .ok_or_else(|| StoreError::Corrupt(format!("counter {name:?} is missing")))?;
    Ok(row.value as u64)
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
        self.submit(&key.owner(), fence, move |view| create(view, &key, &draft)).await
    }

    pub(crate) async fn update_object(
        &self,
        key: Key,
        draft: Draft,
        expected: u64,
        fence: Option<&Lease>,
    ) -> Result<Arc<Object>, StoreError> {
        self.submit(&key.owner(), fence, move |view| update(view, &key, &draft, expected)).await
    }

    pub(crate) async fn update_object_status(
        &self,
        key: Key,
        status: Value,
        expected: Option<u64>,
        fence: Option<&Lease>,
    ) -> Result<Arc<Object>, StoreError> {
        let status = status.to_string();
        self.submit(&key.owner(), fence, move |view| {
            let expected = match expected {
                Some(expected) => expected as i64,
                None => view.get(&key)?.resource_version,
            };
            let now = view.now().to_string();
            view.update(&key, expected, |row| {
                row.status = status.clone();
                row.updated_at = now;
            })?;
            view.changed(EventType::Modified, key.clone());
            view.render(&key)
        })
        .await
    }

    pub(crate) async fn delete_object(&self, key: Key, fence: Option<&Lease>) -> Result<Deleted, StoreError> {
        self.submit(&key.owner(), fence, move |view| delete(view, &key)).await
    }

    pub(crate) async fn clear_finalizer(
        &self,
        key: Key,
        finalizer: String,
        fence: Option<&Lease>,
    ) -> Result<Option<Arc<Object>>, StoreError> {
        self.submit(&key.owner(), fence, move |view| clear(view, &key, &finalizer)).await
    }
}

fn create(view: &mut View<'_>, key: &Key, draft: &Draft) -> Result<Arc<Object>, StoreError> {
    if view.find(key).is_some() {
        return Err(StoreError::AlreadyExists(key.to_string()));
    }
    let (spec, groups) = rows::split_groups(key.kind, draft.spec.clone())?;
    match (key.kind, &draft.secrets) {
        (Kind::Tenant, Some(sealed)) => view.side(Side::Secrets(key.name.clone(), sealed.clone())),
        (Kind::Tenant, None) => {}
        (_, Some(_)) => return Err(StoreError::Refused(format!("{key} cannot carry secrets"))),
        (_, None) => live_owner(view, key)?,
    }
    let status = draft.status.clone().unwrap_or_else(|| rows::default_status(key.kind));
    let row = rows::new_row(key, &draft.labels, &draft.annotations, &spec, &status, view.now());
    view.insert(key, row)?;
    view.changed(EventType::Added, key.clone());
    for group in groups.unwrap_or_default() {
        let group_key = Key::child(Kind::NodeGroup, &key.name, rows::group_name(&group)?);
        insert_group(view, group_key, &group)?;
    }
    if key.kind == Kind::NodeGroup {
        touch_owner(view, key)?;
    }
    view.render(key)
}

fn update(view: &mut View<'_>, key: &Key, draft: &Draft, expected: u64) -> Result<Arc<Object>, StoreError> {
    let row = view.get(key)?;
    if row.resource_version as u64 != expected {
        let current = row.resource_version as u64;
        return Err(StoreError::Conflict { what: key.to_string(), expected, current });
    }
    if row.deletion_timestamp.is_some() {
        return Err(StoreError::Refused(format!("{key} is being deleted")));
    }
    let old_spec = json::<Value>(&row.spec)?;
    if key.kind != Kind::Tenant {
        live_owner(view, key)?;
    }
    let (spec, groups) = rows::split_groups(key.kind, draft.spec.clone())?;
    let plan = match groups {
        Some(groups) => GroupPlan::new(view, &key.name, groups)?,
        None => GroupPlan::default(),
    };
    let changed = old_spec != spec || !plan.is_empty();
    let (labels, annotations) = (map_text(&draft.labels), map_text(&draft.annotations));
    let now = view.now().to_string();
    view.update(key, expected as i64, |row| {
        row.spec = spec.to_string();
        row.labels = labels;
        row.annotations = annotations;
        row.updated_at = now;
        if changed {
            row.generation += 1;
        }
    })?;
    plan.apply(view)?;
    view.changed(EventType::Modified, key.clone());
    if key.kind == Kind::NodeGroup && changed {
        touch_owner(view, key)?;
    }
    view.render(key)
}

fn delete(view: &mut View<'_>, key: &Key) -> Result<Deleted, StoreError> {
    let row = view.get(key)?;
    let finalizers: &[&str] = match key.kind {
        Kind::Tenant => &[FINALIZER_MACHINES, FINALIZER_SECRETS],
        Kind::Machine => &[FINALIZER_MACHINES],
        Kind::NodeGroup | Kind::ConfigPatch => {
            view.remove(key)?;
            if key.kind == Kind::NodeGroup {
                touch_owner(view, key)?;
            }
            return Ok(Deleted::Removed);
        }
    };
    if row.deletion_timestamp.is_none() {
        let version = row.resource_version;
        let now = view.now().to_string();
        view.update(key, version, |row| {
            row.deletion_timestamp = Some(now.clone());
            row.finalizers = serde_json::json!(finalizers).to_string();
            row.updated_at = now;
        })?;
        view.changed(EventType::Modified, key.clone());
    }
    Ok(Deleted::Marked(view.render(key)?))
}

fn clear(view: &mut View<'_>, key: &Key, finalizer: &str) -> Result<Option<Arc<Object>>, StoreError> {
    let row = view.get(key)?;
    let (version, deleting) = (row.resource_version, row.deletion_timestamp.is_some());
    let mut finalizers: Vec<String> = json(&row.finalizers)?;
    let before = finalizers.len();
    finalizers.retain(|f| f != finalizer);
    if key.kind == Kind::Tenant && finalizer == FINALIZER_SECRETS && finalizers.len() != before {
        view.side(Side::DropSecrets(key.name.clone()));
    }
    if finalizers.is_empty() && deleting {
        let last = view.render(key)?;
        if key.kind == Kind::Tenant {
            for child in view.keys_inside(&key.name, None) {
                view.remove(&child)?;
            }
            view.side(Side::DropProjection(key.name.clone()));
            view.side(Side::DropSecrets(key.name.clone()));
        }
        view.remove_as(key, last);
        return Ok(None);
    }
    if finalizers.len() != before {
        let now = view.now().to_string();
        view.update(key, version, |row| {
            row.finalizers = serde_json::json!(finalizers).to_string();
            row.updated_at = now;
        })?;
        view.changed(EventType::Modified, key.clone());
    }
    Ok(Some(view.render(key)?))
}

/// The tenant that `key` lives in, which must exist and not be deleting.
fn live_owner(view: &View<'_>, key: &Key) -> Result<(), StoreError> {
    let owner = view.get(&key.owner())?;
    if owner.deletion_timestamp.is_some() {
        return Err(StoreError::Refused(format!("tenant {:?} is being deleted", owner.name)));
    }
    Ok(())
}

/// Records that a tenant's spec changed through one of its node groups.
fn touch_owner(view: &mut View<'_>, key: &Key) -> Result<(), StoreError> {
    let owner = key.owner();
    let version = view.get(&owner)?.resource_version;
    let now = view.now().to_string();
    view.update(&owner, version, |row| {
        row.generation += 1;
        row.updated_at = now;
    })?;
    view.changed(EventType::Modified, owner);
    Ok(())
}

fn insert_group(view: &mut View<'_>, key: Key, spec: &Value) -> Result<(), StoreError> {
    let status = rows::default_status(Kind::NodeGroup);
    let row = rows::new_row(&key, &Default::default(), &Default::default(), spec, &status, view.now());
    view.insert(&key, row)?;
    view.changed(EventType::Added, key);
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
    fn new(view: &View<'_>, tenant: &str, wanted: Vec<Value>) -> Result<GroupPlan, StoreError> {
        let mut current = view.children(tenant, Some(Kind::NodeGroup));
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

    fn apply(self, view: &mut View<'_>) -> Result<(), StoreError> {
        for key in self.removed {
            view.remove(&key)?;
        }
        for (key, version, spec) in self.changed {
            let now = view.now().to_string();
            view.update(&key, version, |row| {
                row.spec = spec.to_string();
                row.generation += 1;
                row.updated_at = now;
            })?;
            view.changed(EventType::Modified, key);
        }
        for (key, spec) in self.added {
            insert_group(view, key, &spec)?;
        }
        Ok(())
    }
}

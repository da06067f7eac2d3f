//! What one write sees and changes: the rows of the tenants it touches, as
//! loaded (and locked) for its batch, with the changes of the batch's
//! earlier writes and its own laid over them. Nothing here talks to the
//! database; [`crate::batch`] loads the rows and writes the result.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use cms_model::Kind;

use crate::api::{EventType, Key, Object};
use crate::entity::object;
use crate::error::StoreError;
use crate::render::render;

/// Rows by key; `None` is a row removed.
pub(crate) type Overlay = HashMap<Key, Option<object::Model>>;

/// A change to the sealed secrets of a tenant, which stay out of the cache.
pub(crate) enum Side {
    /// Replaces the tenant's sealed secrets.
    Secrets(String, Vec<u8>),
    /// Drops the tenant's sealed secrets.
    DropSecrets(String),
    /// Drops the tenant's projected resources.
    DropProjection(String),
}

/// One write's view of the rows.
pub(crate) struct View<'a> {
    base: &'a BTreeMap<Key, object::Model>,
    batch: &'a Overlay,
    own: Overlay,
    now: &'a str,
    changes: Vec<Change>,
    side: Vec<Side>,
    /// Bumped on every change, so that a render can be reused until the
    /// next change.
    stamp: u64,
    rendered: Option<(u64, Key, Arc<Object>)>,
}

enum Change {
    Upsert(EventType, Key),
    Deleted(Arc<Object>),
}

/// What a write changed: its rows, its side changes, and its events in order.
pub(crate) struct Outcome {
    pub(crate) rows: Overlay,
    pub(crate) side: Vec<Side>,
    pub(crate) events: Vec<(EventType, Arc<Object>)>,
}

impl<'a> View<'a> {
    pub(crate) fn new(base: &'a BTreeMap<Key, object::Model>, batch: &'a Overlay, now: &'a str) -> View<'a> {
        View {
            base,
            batch,
            own: Overlay::new(),
            now,
            changes: Vec::new(),
            side: Vec::new(),
            stamp: 0,
            rendered: None,
        }
    }

    /// The time of the write, as stored.
    pub(crate) fn now(&self) -> &str {
        self.now
    }

    /// The row of `key`, if any.
    pub(crate) fn find(&self, key: &Key) -> Option<&object::Model> {
        match self.own.get(key).or_else(|| self.batch.get(key)) {
            Some(row) => row.as_ref(),
            None => self.base.get(key),
        }
    }

    /// The row of `key`, or `NotFound`.
    pub(crate) fn get(&self, key: &Key) -> Result<&object::Model, StoreError> {
        self.find(key).ok_or_else(|| StoreError::NotFound(key.to_string()))
    }

    /// The rows inside `tenant`, of one kind or of all, sorted by kind and name.
    pub(crate) fn children(&self, tenant: &str, kind: Option<Kind>) -> Vec<object::Model> {
        self.keys_inside(tenant, kind).iter().filter_map(|key| self.find(key).cloned()).collect()
    }

    /// The keys of the rows inside `tenant`, of one kind or of all, sorted by
    /// kind and name.
    pub(crate) fn keys_inside(&self, tenant: &str, kind: Option<Kind>) -> Vec<Key> {
        let wanted = |key: &Key| key.tenant == tenant && kind.is_none_or(|kind| key.kind == kind);
        // The base is sorted by kind, tenant and name: each kind's children
        // of `tenant` are one range of it.
        let mut keys: Vec<&Key> = Vec::new();
        for kind in Kind::ALL.into_iter().filter(|k| *k != Kind::Tenant && kind.is_none_or(|kind| kind == *k))
        {
            let from = Key::child(kind, tenant, "");
            keys.extend(self.base.range(from..).map(|(key, _)| key).take_while(|key| wanted(key)));
        }
        keys.extend(self.batch.keys().chain(self.own.keys()).filter(|key| wanted(key)));
        keys.sort_by(|a, b| (a.kind.as_str(), &a.name).cmp(&(b.kind.as_str(), &b.name)));
        keys.dedup();
        keys.into_iter().filter(|key| self.find(key).is_some()).cloned().collect()
    }

    /// Adds a row; one already there is `AlreadyExists`.
    pub(crate) fn insert(&mut self, key: &Key, row: object::Model) -> Result<(), StoreError> {
        if self.find(key).is_some() {
            return Err(StoreError::AlreadyExists(key.to_string()));
        }
        self.put(key, Some(row));
        Ok(())
    }

    /// Changes the row of `key` with `change`, bumping its resource version,
    /// if that version is still `expected`; otherwise `Conflict`.
    pub(crate) fn update(
        &mut self,
        key: &Key,
        expected: i64,
        change: impl FnOnce(&mut object::Model),
    ) -> Result<(), StoreError> {
        let mut row = self.get(key)?.clone();
        if row.resource_version != expected {
            let current = row.resource_version as u64;
            return Err(StoreError::Conflict { what: key.to_string(), expected: expected as u64, current });
        }
        change(&mut row);
        row.resource_version += 1;
        self.put(key, Some(row));
        Ok(())
    }

    /// Changes the row of `key` with `change` as part of this write. A row
    /// this write already changed is changed in place: its resource version
    /// was bumped once, and its event, rendered as the write leaves it, is
    /// logged once. Any other row is bumped and logged as `Modified`.
    pub(crate) fn amend(
        &mut self,
        key: &Key,
        change: impl FnOnce(&mut object::Model),
    ) -> Result<(), StoreError> {
        let Some(Some(row)) = self.own.get_mut(key) else {
            let version = self.get(key)?.resource_version;
            self.update(key, version, change)?;
            self.changed(EventType::Modified, key.clone());
            return Ok(());
        };
        change(row);
        self.stamp += 1;
        let logged = self.changes.iter().any(|c| matches!(c, Change::Upsert(_, logged) if logged == key));
        if !logged {
            self.changed(EventType::Modified, key.clone());
        }
        Ok(())
    }

    /// Removes the row of `key` and logs its deletion, as it last was.
    pub(crate) fn remove(&mut self, key: &Key) -> Result<(), StoreError> {
        let last = self.render(key)?;
        self.remove_as(key, last);
        Ok(())
    }

    /// Removes the row of `key` and logs its deletion as `last`, a render
    /// from before the write changed what it shows.
    pub(crate) fn remove_as(&mut self, key: &Key, last: Arc<Object>) {
        self.put(key, None);
        self.changes.push(Change::Deleted(last));
    }

    /// Logs that `key` was added or modified; it is rendered as the write
    /// leaves it.
    pub(crate) fn changed(&mut self, event_type: EventType, key: Key) {
        self.changes.push(Change::Upsert(event_type, key));
    }

    pub(crate) fn side(&mut self, change: Side) {
        self.side.push(change);
    }

    /// The current state of `key`, rendered.
    pub(crate) fn render(&mut self, key: &Key) -> Result<Arc<Object>, StoreError> {
        if let Some((stamp, rendered_key, object)) = &self.rendered
            && *stamp == self.stamp
            && rendered_key == key
        {
            return Ok(object.clone());
        }
        let row = self.get(key)?;
        let groups = match key.kind {
            Kind::Tenant => self.children(&key.name, Some(Kind::NodeGroup)),
            _ => Vec::new(),
        };
        let object = Arc::new(render(row, &groups)?);
        self.rendered = Some((self.stamp, key.clone(), object.clone()));
        Ok(object)
    }

    /// Ends the write: renders its events.
    pub(crate) fn finish(mut self) -> Result<Outcome, StoreError> {
        let mut events = Vec::with_capacity(self.changes.len());
        for change in std::mem::take(&mut self.changes) {
            events.push(match change {
                Change::Upsert(event_type, key) => (event_type, self.render(&key)?),
                Change::Deleted(object) => (EventType::Deleted, object),
            });
        }
        Ok(Outcome { rows: self.own, side: self.side, events })
    }

    fn put(&mut self, key: &Key, row: Option<object::Model>) {
        self.stamp += 1;
        self.own.insert(key.clone(), row);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rows::new_row;

    const NOW: &str = "2026-11-22T00:00:00.000Z";

    fn row(key: &Key) -> object::Model {
        new_row(
            key,
            &Default::default(),
            &Default::default(),
            &serde_json::json!({}),
            &serde_json::json!({}),
            NOW,
        )
    }

    #[test]
    fn own_changes_lie_over_the_batch_and_the_base() {
        let tenant = Key::tenant("a");
        let group = Key::child(Kind::NodeGroup, "a", "workers");
        let base = BTreeMap::from([(tenant.clone(), row(&tenant))]);
        let batch = Overlay::from([(group.clone(), Some(row(&group)))]);
        let mut view = View::new(&base, &batch, NOW);
        assert_eq!(view.children("a", None).len(), 1);
        view.update(&tenant, 1, |row| row.generation = 7).unwrap();
        assert_eq!(view.get(&tenant).unwrap().resource_version, 2);
        let err = view.update(&tenant, 1, |_| {}).unwrap_err();
        assert!(matches!(err, StoreError::Conflict { expected: 1, current: 2, .. }), "{err}");
        view.remove(&group).unwrap();
        assert!(view.find(&group).is_none());
        assert!(matches!(view.insert(&tenant, row(&tenant)), Err(StoreError::AlreadyExists(_))));
        view.changed(EventType::Modified, tenant.clone());
        let outcome = view.finish().unwrap();
        let types: Vec<_> = outcome.events.iter().map(|(t, o)| (*t, o.key.clone())).collect();
        assert_eq!(types, vec![(EventType::Deleted, group.clone()), (EventType::Modified, tenant)]);
        assert_eq!(outcome.rows.get(&group), Some(&None));
        assert_eq!(base.len(), 1, "the base is never changed");
    }

    #[test]
    fn amend_bumps_and_logs_a_row_once_per_write() {
        let (tenant, other) = (Key::tenant("a"), Key::tenant("b"));
        let base = BTreeMap::from([(tenant.clone(), row(&tenant)), (other.clone(), row(&other))]);
        let batch = Overlay::new();
        let mut view = View::new(&base, &batch, NOW);
        view.update(&tenant, 1, |row| row.generation = 2).unwrap();
        view.changed(EventType::Modified, tenant.clone());
        view.amend(&tenant, |row| row.status = "{\"phase\":\"active\"}".into()).unwrap();
        view.amend(&other, |row| row.status = "{\"phase\":\"failed\"}".into()).unwrap();
        view.amend(&other, |row| row.generation = 3).unwrap();
        assert_eq!(view.get(&tenant).unwrap().resource_version, 2, "changed here: in place");
        assert_eq!(view.get(&other).unwrap().resource_version, 2, "bumped once");
        let outcome = view.finish().unwrap();
        let events: Vec<_> =
            outcome.events.iter().map(|(t, o)| (*t, o.key.clone(), o.resource_version)).collect();
        assert_eq!(events, [(EventType::Modified, tenant, 2), (EventType::Modified, other, 2)]);
        let status: serde_json::Value = serde_json::from_slice(&outcome.events[0].1.json).unwrap();
        assert_eq!(status["status"]["phase"], "active", "the event shows the amended row");
    }

    #[test]
    fn a_render_is_reused_until_the_next_change() {
        let tenant = Key::tenant("a");
        let base = BTreeMap::from([(tenant.clone(), row(&tenant))]);
        let batch = Overlay::new();
        let mut view = View::new(&base, &batch, NOW);
        let first = view.render(&tenant).unwrap();
        assert!(Arc::ptr_eq(&first, &view.render(&tenant).unwrap()));
        view.update(&tenant, 1, |_| {}).unwrap();
        let second = view.render(&tenant).unwrap();
        assert_eq!(second.resource_version, 2);
    }
}

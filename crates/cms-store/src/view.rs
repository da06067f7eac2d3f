//! What one write sees and changes: the rows its batch has read (under the
//! locks of the tenants it touches), with the changes of the batch's earlier
//! writes and its own laid over them. Nothing here talks to the database;
//! [`crate::batch`] reads the rows and writes the result.
//!
//! A batch reads only what its writes look at: single rows by key, and the
//! rows of one kind inside a tenant. A write that looks at something its
//! batch has not read sees it as absent and notes it in its [`Needs`]; the
//! batch then reads what was needed and runs its writes again, so that a
//! write's cost follows what it touches, never the size of its tenant.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
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

/// The rows a batch has read, and what it has read: single keys (found or
/// not) and every row of a kind inside a tenant.
#[derive(Default)]
pub(crate) struct Base {
    rows: BTreeMap<Key, object::Model>,
    keys: HashSet<Key>,
    ranges: HashSet<(String, Kind)>,
    /// Every row there is has been read.
    whole: bool,
}

impl Base {
    /// A base that holds every row there is.
    #[cfg(test)]
    pub(crate) fn whole(rows: BTreeMap<Key, object::Model>) -> Base {
        Base { rows, whole: true, ..Base::default() }
    }

    /// The row of `key`, if it has been read and exists.
    pub(crate) fn get(&self, key: &Key) -> Option<&object::Model> {
        self.rows.get(key)
    }

    /// The rows read, by key.
    #[cfg(test)]
    pub(crate) fn rows(&self) -> &BTreeMap<Key, object::Model> {
        &self.rows
    }

    /// Records the read of `key`, which found `row`.
    pub(crate) fn add_key(&mut self, key: Key, row: Option<object::Model>) {
        if let Some(row) = row {
            self.rows.insert(key.clone(), row);
        }
        self.keys.insert(key);
    }

    /// Records the read of every row of `kind` inside `tenant`: `rows`.
    pub(crate) fn add_range(&mut self, tenant: &str, kind: Kind, rows: Vec<(Key, object::Model)>) {
        self.rows.extend(rows);
        self.ranges.insert((tenant.to_string(), kind));
    }

    fn has_read(&self, key: &Key) -> bool {
        self.whole || self.keys.contains(key) || self.has_read_range(&key.tenant, key.kind)
    }

    fn has_read_range(&self, tenant: &str, kind: Kind) -> bool {
        self.whole || self.ranges.contains(&(tenant.to_string(), kind))
    }
}

/// What a write looked at that its batch had not read.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Needs {
    pub(crate) keys: BTreeSet<Key>,
    /// Every row of a kind inside a tenant.
    pub(crate) ranges: BTreeSet<(String, Kind)>,
}

impl Needs {
    pub(crate) fn is_empty(&self) -> bool {
        self.keys.is_empty() && self.ranges.is_empty()
    }

    pub(crate) fn extend(&mut self, other: Needs) {
        self.keys.extend(other.keys);
        self.ranges.extend(other.ranges);
    }
}

/// One write's view of the rows.
pub(crate) struct View<'a> {
    base: &'a Base,
    needs: RefCell<Needs>,
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
    pub(crate) fn new(base: &'a Base, batch: &'a Overlay, now: &'a str) -> View<'a> {
        View {
            base,
            needs: RefCell::default(),
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

    /// The row of `key`, if any. One the batch has not read is absent, and
    /// needed.
    pub(crate) fn find(&self, key: &Key) -> Option<&object::Model> {
        match self.own.get(key).or_else(|| self.batch.get(key)) {
            Some(row) => row.as_ref(),
            None => {
                let row = self.base.get(key);
                if row.is_none() && !self.base.has_read(key) {
                    self.needs.borrow_mut().keys.insert(key.clone());
                }
                row
            }
        }
    }

    /// What this write looked at that its batch had not read; when there is
    /// any, the write must run again once the batch has read it.
    pub(crate) fn take_needs(&mut self) -> Needs {
        self.needs.take()
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
            if !self.base.has_read_range(tenant, kind) {
                self.needs.borrow_mut().ranges.insert((tenant.to_string(), kind));
            }
            let from = Key::child(kind, tenant, "");
            keys.extend(self.base.rows.range(from..).map(|(key, _)| key).take_while(|key| wanted(key)));
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
        let base = Base::whole(BTreeMap::from([(tenant.clone(), row(&tenant))]));
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
        assert_eq!(base.rows().len(), 1, "the base is never changed");
    }

    #[test]
    fn amend_bumps_and_logs_a_row_once_per_write() {
        let (tenant, other) = (Key::tenant("a"), Key::tenant("b"));
        let base =
            Base::whole(BTreeMap::from([(tenant.clone(), row(&tenant)), (other.clone(), row(&other))]));
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
        let base = Base::whole(BTreeMap::from([(tenant.clone(), row(&tenant))]));
        let batch = Overlay::new();
        let mut view = View::new(&base, &batch, NOW);
        let first = view.render(&tenant).unwrap();
        assert!(Arc::ptr_eq(&first, &view.render(&tenant).unwrap()));
        view.update(&tenant, 1, |_| {}).unwrap();
        let second = view.render(&tenant).unwrap();
        assert_eq!(second.resource_version, 2);
    }
}

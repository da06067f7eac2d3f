//! The read cache: every object, kept coherent by applying the event log in
//! revision order, and the broadcast that feeds watchers.
//!
//! Events apply strictly one revision after another: an event past the next
//! revision is a gap, which the caller fills by reading the event log (or,
//! when the log was compacted past the cache, by reloading every object).

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use cms_model::{Kind, Page};
use tokio::sync::broadcast;

use crate::api::{EventType, Key, Listing, Object, WatchEvent};

pub(crate) struct Cache {
    inner: RwLock<Inner>,
    events: broadcast::Sender<Broadcast>,
}

/// What the cache publishes to watchers.
#[derive(Debug, Clone)]
pub(crate) enum Broadcast {
    /// The next change.
    Event(Arc<WatchEvent>),
    /// The cache was reloaded past changes it never saw, so a watcher
    /// following it would miss them: every watcher is cut off.
    Reset,
}

/// Events that do not follow the cache's revision: the log must be read
/// from `after` first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Gap {
    pub(crate) after: u64,
    pub(crate) found: u64,
}

#[derive(Default)]
struct Inner {
    objects: BTreeMap<Key, Arc<Object>>,
    /// How many objects each `(kind, tenant)` holds, and each kind in all.
    scoped: HashMap<(Kind, String), u64>,
    by_kind: HashMap<Kind, u64>,
    /// The newest revision applied.
    revision: u64,
}

impl Cache {
    /// A cache holding `objects` as of `revision`. Watchers more than
    /// `buffer` events behind are cut off.
    pub(crate) fn new(objects: Vec<Object>, revision: u64, buffer: usize) -> Cache {
        let mut inner = Inner { revision, ..Inner::default() };
        for object in objects {
            inner.insert(Arc::new(object));
        }
        let (events, _) = broadcast::channel(buffer.max(1));
        Cache { inner: RwLock::new(inner), events }
    }

    pub(crate) fn get(&self, key: &Key) -> Option<Arc<Object>> {
        self.read().objects.get(key).cloned()
    }

    pub(crate) fn revision(&self) -> u64 {
        self.read().revision
    }

    pub(crate) fn list(&self, kind: Kind, tenant: Option<&str>, page: Page) -> Listing {
        let inner = self.read();
        let total = inner.count(kind, tenant);
        let items = inner.range(kind, tenant).skip(page.offset).take(page.limit).cloned().collect();
        Listing { items, total }
    }

    /// Every object of `kind` (in `tenant` when given), sorted by tenant,
    /// then name.
    pub(crate) fn all(&self, kind: Kind, tenant: Option<&str>) -> Vec<Arc<Object>> {
        let inner = self.read();
        let count = inner.count(kind, tenant);
        let mut objects = Vec::with_capacity(count as usize);
        objects.extend(inner.range(kind, tenant).cloned());
        objects
    }

    /// Every object of `kind`, the revision they are current at, and a
    /// receiver of every later event: nothing is missed or seen twice.
    pub(crate) fn snapshot(&self, kind: Kind) -> (Vec<Arc<Object>>, u64, broadcast::Receiver<Broadcast>) {
        let inner = self.read();
        let objects = inner.range(kind, None).cloned().collect();
        (objects, inner.revision, self.events.subscribe())
    }

    /// A receiver of every event after the returned revision.
    pub(crate) fn subscribe(&self) -> (u64, broadcast::Receiver<Broadcast>) {
        let inner = self.read();
        (inner.revision, self.events.subscribe())
    }

    /// Applies events newer than the cache, in revision order, and publishes
    /// them; events the cache already holds are skipped. Stops at the first
    /// event that is not the next revision. Returns the revision the cache
    /// then stands at.
    pub(crate) fn apply(&self, events: Vec<WatchEvent>) -> Result<u64, Gap> {
        let mut inner = self.write();
        for event in events {
            if event.revision <= inner.revision {
                continue;
            }
            if event.revision != inner.revision + 1 {
                return Err(Gap { after: inner.revision, found: event.revision });
            }
            inner.revision = event.revision;
            match event.event_type {
                EventType::Deleted => inner.remove(&event.object.key),
                EventType::Added | EventType::Modified => inner.insert(event.object.clone()),
            }
            // Nobody listening is not an error.
            let _ = self.events.send(Broadcast::Event(Arc::new(event)));
        }
        Ok(inner.revision)
    }

    /// Replaces every object with a fresh load at `revision`, unless the
    /// cache is already there, and cuts off every watcher.
    pub(crate) fn replace(&self, objects: Vec<Object>, revision: u64) {
        let mut inner = self.write();
        if revision <= inner.revision {
            return;
        }
        let mut fresh = Inner { revision, ..Inner::default() };
        for object in objects {
            fresh.insert(Arc::new(object));
        }
        *inner = fresh;
        let _ = self.events.send(Broadcast::Reset);
    }

    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Inner {
    fn insert(&mut self, object: Arc<Object>) {
        let key = object.key.clone();
        if self.objects.insert(key.clone(), object).is_none() {
            *self.scoped.entry((key.kind, key.tenant)).or_default() += 1;
            *self.by_kind.entry(key.kind).or_default() += 1;
        }
    }

    /// How many objects of `kind` there are (in `tenant` when given).
    fn count(&self, kind: Kind, tenant: Option<&str>) -> u64 {
        match tenant {
            Some(tenant) => self.scoped.get(&(kind, tenant.to_string())).copied().unwrap_or(0),
            None => self.by_kind.get(&kind).copied().unwrap_or(0),
        }
    }

    fn remove(&mut self, key: &Key) {
        if self.objects.remove(key).is_some() {
            if let Some(count) = self.scoped.get_mut(&(key.kind, key.tenant.clone())) {
                *count -= 1;
            }
            if let Some(count) = self.by_kind.get_mut(&key.kind) {
                *count -= 1;
            }
        }
    }

    fn range<'a>(
        &'a self,
        kind: Kind,
        tenant: Option<&'a str>,
    ) -> impl Iterator<Item = &'a Arc<Object>> + 'a {
        let start = Key { kind, tenant: tenant.unwrap_or_default().to_string(), name: String::new() };
        self.objects.range((Bound::Included(start), Bound::Unbounded)).map(|(_, object)| object).take_while(
            move |object| object.key.kind == kind && tenant.is_none_or(|tenant| object.key.tenant == tenant),
        )
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn object(kind: Kind, tenant: &str, name: &str) -> Object {
        Object {
            key: Key::child(kind, tenant, name),
            resource_version: 1,
            generation: 1,
            deleting: false,
            json: Bytes::from_static(b"{}"),
        }
    }

    fn event(revision: u64, event_type: EventType, object: Object) -> WatchEvent {
        WatchEvent { revision, event_type, object: Arc::new(object) }
    }

    #[test]
    fn lists_are_scoped_sorted_and_counted() {
        let cache = Cache::new(
            vec![
                object(Kind::Machine, "b", "m1"),
                object(Kind::Machine, "a", "m2"),
                object(Kind::Machine, "a", "m1"),
                object(Kind::NodeGroup, "a", "g"),
            ],
            0,
            8,
        );
        let names = |listing: Listing| {
            listing.items.iter().map(|o| format!("{}/{}", o.key.tenant, o.key.name)).collect::<Vec<_>>()
        };
        let all = cache.list(Kind::Machine, None, Page::default());
        assert_eq!(all.total, 3);
        assert_eq!(names(all), ["a/m1", "a/m2", "b/m1"]);
        let page = cache.list(Kind::Machine, Some("a"), Page { limit: 1, offset: 1 });
        assert_eq!(page.total, 2);
        assert_eq!(names(page), ["a/m2"]);
        let keys = |objects: Vec<Arc<Object>>| objects.iter().map(|o| o.key.clone()).collect::<Vec<_>>();
        assert_eq!(keys(cache.all(Kind::Machine, None)), keys(all_items(&cache, Kind::Machine)));
        assert_eq!(keys(cache.all(Kind::Machine, Some("b"))), [Key::child(Kind::Machine, "b", "m1")]);
        assert!(cache.all(Kind::Tenant, None).is_empty());
        assert!(cache.all(Kind::Machine, Some("c")).is_empty());
    }

    fn all_items(cache: &Cache, kind: Kind) -> Vec<Arc<Object>> {
        cache.list(kind, None, Page { limit: 100, offset: 0 }).items
    }

    fn revision_of(item: Broadcast) -> u64 {
        match item {
            Broadcast::Event(event) => event.revision,
            Broadcast::Reset => panic!("unexpected reset"),
        }
    }

    #[tokio::test]
    async fn apply_skips_old_events_and_publishes_new_ones() {
        let cache = Cache::new(vec![], 0, 8);
        let (revision, mut receiver) = cache.subscribe();
        assert_eq!(revision, 0);
        assert_eq!(cache.apply(vec![event(1, EventType::Added, object(Kind::Tenant, "", "t"))]), Ok(1));
        let applied = cache.apply(vec![
            event(1, EventType::Added, object(Kind::Tenant, "", "dup")),
            event(2, EventType::Deleted, object(Kind::Tenant, "", "t")),
        ]);
        assert_eq!(applied, Ok(2));
        assert!(cache.get(&Key::tenant("t")).is_none());
        assert!(cache.get(&Key::tenant("dup")).is_none());
        assert_eq!(revision_of(receiver.recv().await.unwrap()), 1);
        assert_eq!(revision_of(receiver.recv().await.unwrap()), 2);
        assert_eq!(cache.list(Kind::Tenant, None, Page::default()).total, 0);
    }

    #[tokio::test]
    async fn a_gap_stops_apply_and_nothing_past_it_is_published() {
        let cache = Cache::new(vec![], 0, 8);
        let (_, mut receiver) = cache.subscribe();
        let applied = cache.apply(vec![
            event(1, EventType::Added, object(Kind::Tenant, "", "a")),
            event(3, EventType::Added, object(Kind::Tenant, "", "c")),
        ]);
        assert_eq!(applied, Err(Gap { after: 1, found: 3 }));
        assert_eq!(cache.revision(), 1);
        assert!(cache.get(&Key::tenant("c")).is_none());
        assert_eq!(revision_of(receiver.recv().await.unwrap()), 1);
        assert!(receiver.try_recv().is_err(), "nothing past the gap");
    }

    #[tokio::test]
    async fn replace_reloads_and_cuts_off_watchers() {
        let cache = Cache::new(vec![object(Kind::Tenant, "", "old")], 4, 8);
        let (_, mut receiver) = cache.subscribe();
        cache.replace(vec![object(Kind::Tenant, "", "new")], 9);
        assert_eq!(cache.revision(), 9);
        assert!(cache.get(&Key::tenant("old")).is_none());
        assert_eq!(cache.list(Kind::Tenant, None, Page::default()).total, 1);
        assert!(matches!(receiver.recv().await.unwrap(), Broadcast::Reset));
        cache.replace(vec![], 8);
        assert_eq!(cache.revision(), 9, "an older load changes nothing");
    }
}

//! The read cache: every object, kept coherent by applying the event log in
//! revision order, and the broadcast that feeds watchers.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use cms_model::{Kind, Page};
use tokio::sync::broadcast;

use crate::api::{EventType, Key, Listing, Object, WatchEvent};

pub(crate) struct Cache {
    inner: RwLock<Inner>,
    events: broadcast::Sender<Arc<WatchEvent>>,
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
        let total = match tenant {
            Some(tenant) => inner.scoped.get(&(kind, tenant.to_string())).copied().unwrap_or(0),
            None => inner.by_kind.get(&kind).copied().unwrap_or(0),
        };
        let items = inner.range(kind, tenant).skip(page.offset).take(page.limit).cloned().collect();
        Listing { items, total }
    }

    /// Every object of `kind`, the revision they are current at, and a
    /// receiver of every later event: nothing is missed or seen twice.
    pub(crate) fn snapshot(
        &self,
        kind: Kind,
    ) -> (Vec<Arc<Object>>, u64, broadcast::Receiver<Arc<WatchEvent>>) {
        let inner = self.read();
        let objects = inner.range(kind, None).cloned().collect();
        (objects, inner.revision, self.events.subscribe())
    }

    /// A receiver of every event after the returned revision.
    pub(crate) fn subscribe(&self) -> (u64, broadcast::Receiver<Arc<WatchEvent>>) {
        let inner = self.read();
        (inner.revision, self.events.subscribe())
    }

    /// Applies events newer than the cache, in order, and publishes them.
    /// Returns the revision the cache then stands at.
    pub(crate) fn apply(&self, events: Vec<WatchEvent>) -> u64 {
        let mut inner = self.write();
        for event in events {
            if event.revision <= inner.revision {
                continue;
            }
            inner.revision = event.revision;
            match event.event_type {
                EventType::Deleted => inner.remove(&event.object.key),
                EventType::Added | EventType::Modified => inner.insert(event.object.clone()),
            }
            // Nobody listening is not an error.
            let _ = self.events.send(Arc::new(event));
        }
        inner.revision
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
    }

    #[tokio::test]
    async fn apply_skips_old_events_and_publishes_new_ones() {
        let cache = Cache::new(vec![], 0, 8);
        let (revision, mut receiver) = cache.subscribe();
        assert_eq!(revision, 0);
        cache.apply(vec![event(1, EventType::Added, object(Kind::Tenant, "", "t"))]);
        cache.apply(vec![
            event(1, EventType::Added, object(Kind::Tenant, "", "dup")),
            event(2, EventType::Deleted, object(Kind::Tenant, "", "t")),
        ]);
        assert_eq!(cache.revision(), 2);
        assert!(cache.get(&Key::tenant("t")).is_none());
        assert!(cache.get(&Key::tenant("dup")).is_none());
        assert_eq!(receiver.recv().await.unwrap().revision, 1);
        assert_eq!(receiver.recv().await.unwrap().revision, 2);
        assert_eq!(cache.list(Kind::Tenant, None, Page::default()).total, 0);
    }
}

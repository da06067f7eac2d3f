//! The read cache: every object, kept coherent by applying the event log in
//! revision order, and the broadcast that feeds watchers.
//!
//! Events apply strictly one revision after another: an event past the next
//! revision is a gap, which the caller fills by reading the event log (or,
//! when the log was compacted past the cache, by reloading every object).
//! Each object is kept with the revision of its last change, which tells a
//! watch of that one object whether it changed after a resume point, and
//! with its labels, read from its JSON once as it enters the cache, so a
//! list by label selector filters without parsing anything.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use cms_model::{Kind, LabelSelector, Page};
use serde::Deserialize;
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

/// A receiver of the events after `revision`, and the revision of the last
/// change of the object asked about, if it exists.
pub(crate) struct Subscription {
    pub(crate) revision: u64,
    pub(crate) receiver: broadcast::Receiver<Broadcast>,
    pub(crate) changed: Option<u64>,
}

/// Events that do not follow the cache's revision: the log must be read
/// from `after` first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Gap {
    pub(crate) after: u64,
    pub(crate) found: u64,
}

/// An object and the store-wide revision of its last change.
struct Entry {
    object: Arc<Object>,
    changed: u64,
    /// The object's `metadata.labels`.
    labels: BTreeMap<String, String>,
}

/// The labels of an object's JSON, `metadata.labels`; none when the JSON
/// has none (or is not an object, which the store never writes).
fn labels_of(json: &[u8]) -> BTreeMap<String, String> {
    #[derive(Deserialize)]
    struct Labelled {
        metadata: Metadata,
    }
    #[derive(Deserialize)]
    struct Metadata {
        #[serde(default)]
        labels: BTreeMap<String, String>,
    }
    serde_json::from_slice::<Labelled>(json).map(|labelled| labelled.metadata.labels).unwrap_or_default()
}

#[derive(Default)]
struct Inner {
    objects: BTreeMap<Key, Entry>,
    /// Every object again, by key: a point lookup hashes the key once,
    /// where the ordered map compares it with a string comparison or two
    /// at each of its levels (a tenant's GET spent about a tenth of the
    /// server's time in them, `docs/performance.md`).
    points: HashMap<Key, Arc<Object>>,
    /// How many objects each `(kind, tenant)` holds, and each kind in all.
    scoped: HashMap<(Kind, String), u64>,
    by_kind: HashMap<Kind, u64>,
    /// The newest revision applied.
    revision: u64,
}

impl Cache {
    /// A cache holding `objects`, each with the revision of its last
    /// change, as of `revision`. Watchers more than `buffer` events behind
    /// are cut off.
    pub(crate) fn new(objects: Vec<(Object, u64)>, revision: u64, buffer: usize) -> Cache {
        let mut inner = Inner { revision, ..Inner::default() };
        for (object, changed) in objects {
            inner.insert(Arc::new(object), changed);
        }
        let (events, _) = broadcast::channel(buffer.max(1));
        Cache { inner: RwLock::new(inner), events }
    }

    pub(crate) fn get(&self, key: &Key) -> Option<Arc<Object>> {
        self.read().points.get(key).cloned()
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

    /// Like [`Cache::list`], of the objects whose labels `selector`
    /// matches: `total` counts the matches and `page` slices them, in one
    /// pass under the read lock.
    pub(crate) fn select(
        &self,
        kind: Kind,
        tenant: Option<&str>,
        selector: &LabelSelector,
        page: Page,
    ) -> Listing {
        if selector.is_empty() {
            return self.list(kind, tenant, page);
        }
        let inner = self.read();
        let mut total: usize = 0;
        let mut items = Vec::new();
        for entry in inner.entries(kind, tenant).filter(|entry| selector.matches(&entry.labels)) {
            if total >= page.offset && items.len() < page.limit {
                items.push(entry.object.clone());
            }
            total += 1;
        }
        Listing { items, total: total as u64 }
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

    /// Every object of `kind` (only the object of `only`, if it exists,
    /// when given), the revision they are current at, and a receiver of
    /// every later event: nothing is missed or seen twice.
    pub(crate) fn snapshot(
        &self,
        kind: Kind,
        only: Option<&Key>,
    ) -> (Vec<Arc<Object>>, u64, broadcast::Receiver<Broadcast>) {
        let inner = self.read();
        let objects = match only {
            Some(key) => inner.points.get(key).cloned().into_iter().collect(),
            None => inner.range(kind, None).cloned().collect(),
        };
        (objects, inner.revision, self.events.subscribe())
    }

    /// A receiver of every event after the returned revision, and, when
    /// `only` is given and exists, the revision of its last change up to
    /// that revision.
    pub(crate) fn subscribe(&self, only: Option<&Key>) -> Subscription {
        let inner = self.read();
        let changed = only.and_then(|key| inner.objects.get(key)).map(|entry| entry.changed);
        Subscription { revision: inner.revision, receiver: self.events.subscribe(), changed }
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
                EventType::Added | EventType::Modified => inner.insert(event.object.clone(), event.revision),
            }
            // Nobody listening is not an error.
            let _ = self.events.send(Broadcast::Event(Arc::new(event)));
        }
        Ok(inner.revision)
    }

    /// Replaces every object with a fresh load at `revision`, unless the
    /// cache is already there, and cuts off every watcher.
    pub(crate) fn replace(&self, objects: Vec<(Object, u64)>, revision: u64) {
        let mut inner = self.write();
        if revision <= inner.revision {
            return;
        }
        let mut fresh = Inner { revision, ..Inner::default() };
        for (object, changed) in objects {
            fresh.insert(Arc::new(object), changed);
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
    fn insert(&mut self, object: Arc<Object>, changed: u64) {
        let key = object.key.clone();
        self.points.insert(key.clone(), object.clone());
        if self
            .objects
            .insert(key.clone(), Entry { labels: labels_of(&object.json), object, changed })
            .is_none()
        {
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
        self.points.remove(key);
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
        self.entries(kind, tenant).map(|entry| &entry.object)
    }

    /// The entries of `kind` (in `tenant` when given), sorted by tenant, then name.
    fn entries<'a>(&'a self, kind: Kind, tenant: Option<&'a str>) -> impl Iterator<Item = &'a Entry> + 'a {
        let start = Key { kind, tenant: tenant.unwrap_or_default().to_string(), name: String::new() };
        self.objects.range((Bound::Included(start), Bound::Unbounded)).map(|(_, entry)| entry).take_while(
            move |entry| {
                let key = &entry.object.key;
                key.kind == kind && tenant.is_none_or(|tenant| key.tenant == tenant)
            },
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

    /// An object as loaded, last changed at revision 1.
    fn loaded(kind: Kind, tenant: &str, name: &str) -> (Object, u64) {
        (object(kind, tenant, name), 1)
    }

    fn event(revision: u64, event_type: EventType, object: Object) -> WatchEvent {
        WatchEvent { revision, event_type, object: Arc::new(object) }
    }

    #[test]
    fn lists_are_scoped_sorted_and_counted() {
        let cache = Cache::new(
            vec![
                loaded(Kind::Machine, "b", "m1"),
                loaded(Kind::Machine, "a", "m2"),
                loaded(Kind::Machine, "a", "m1"),
                loaded(Kind::NodeGroup, "a", "g"),
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

    #[test]
    fn point_lookups_follow_every_change_and_reload() {
        let key = Key::child(Kind::Machine, "a", "m1");
        let cache = Cache::new(vec![loaded(Kind::Machine, "a", "m1")], 1, 8);
        assert_eq!(cache.get(&key).map(|o| o.resource_version), Some(1));
        let mut changed = object(Kind::Machine, "a", "m1");
        changed.resource_version = 2;
        cache.apply(vec![event(2, EventType::Modified, changed)]).unwrap();
        assert_eq!(cache.get(&key).map(|o| o.resource_version), Some(2));
        cache.apply(vec![event(3, EventType::Deleted, object(Kind::Machine, "a", "m1"))]).unwrap();
        assert!(cache.get(&key).is_none());
        assert!(all_items(&cache, Kind::Machine).is_empty());
        cache.replace(vec![loaded(Kind::Machine, "b", "m1")], 9);
        assert!(cache.get(&key).is_none(), "a reload drops what it does not hold");
        assert!(cache.get(&Key::child(Kind::Machine, "b", "m1")).is_some());
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
        let Subscription { revision, mut receiver, .. } = cache.subscribe(None);
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
        let mut receiver = cache.subscribe(None).receiver;
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
        let cache = Cache::new(vec![loaded(Kind::Tenant, "", "old")], 4, 8);
        let mut receiver = cache.subscribe(None).receiver;
        cache.replace(vec![loaded(Kind::Tenant, "", "new")], 9);
        assert_eq!(cache.revision(), 9);
        assert!(cache.get(&Key::tenant("old")).is_none());
        assert_eq!(cache.list(Kind::Tenant, None, Page::default()).total, 1);
        assert!(matches!(receiver.recv().await.unwrap(), Broadcast::Reset));
        cache.replace(vec![], 8);
        assert_eq!(cache.revision(), 9, "an older load changes nothing");
    }

    #[test]
    fn each_object_keeps_the_revision_of_its_last_change() {
        let quiet = Key::tenant("quiet");
        let busy = Key::tenant("busy");
        let cache = Cache::new(vec![(object(Kind::Tenant, "", "quiet"), 3)], 5, 8);
        assert_eq!(cache.subscribe(Some(&quiet)).changed, Some(3), "as loaded");
        cache
            .apply(vec![
                event(6, EventType::Added, object(Kind::Tenant, "", "busy")),
                event(7, EventType::Modified, object(Kind::Tenant, "", "busy")),
            ])
            .unwrap();
        let subscription = cache.subscribe(Some(&busy));
        assert_eq!((subscription.revision, subscription.changed), (7, Some(7)));
        assert_eq!(cache.subscribe(Some(&quiet)).changed, Some(3), "others' changes leave it");
        cache.apply(vec![event(8, EventType::Deleted, object(Kind::Tenant, "", "busy"))]).unwrap();
        assert_eq!(cache.subscribe(Some(&busy)).changed, None, "a deleted object has none");
        let (objects, revision, _) = cache.snapshot(Kind::Tenant, Some(&quiet));
        assert_eq!((objects.len(), revision), (1, 8));
        assert!(cache.snapshot(Kind::Tenant, Some(&busy)).0.is_empty());
    }

    fn labelled(name: &str, labels: &str) -> Object {
        let json =
            format!(r#"{{"metadata":{{"name":"{name}","labels":{labels}}},"spec":{{}},"status":{{}}}}"#);
        Object { json: Bytes::from(json), ..object(Kind::Tenant, "", name) }
    }

    #[test]
    fn selections_count_and_page_the_matches_and_follow_label_changes() {
        let cache = Cache::new(
            vec![
                (labelled("a", r#"{"team":"x"}"#), 1),
                (labelled("b", r#"{"team":"y"}"#), 1),
                (labelled("c", r#"{"team":"x","env":"prod"}"#), 1),
                (labelled("d", "{}"), 1),
                (labelled("e", r#"{"team":"x"}"#), 1),
            ],
            1,
            8,
        );
        let select = |text: &str, limit: usize, offset: usize| {
            let selector = LabelSelector::parse(text).unwrap();
            let listing = cache.select(Kind::Tenant, None, &selector, Page { limit, offset });
            let names: Vec<String> = listing.items.iter().map(|o| o.key.name.clone()).collect();
            (names, listing.total)
        };
        assert_eq!(select("team=x", 100, 0), (vec!["a".into(), "c".into(), "e".into()], 3));
        assert_eq!(select("team=x", 1, 1), (vec!["c".into()], 3), "paged over the matches");
        assert_eq!(select("team=x", 5, 3), (vec![], 3));
        assert_eq!(select("team=x,env!=prod", 100, 0), (vec!["a".into(), "e".into()], 2));
        assert_eq!(select("!team", 100, 0), (vec!["d".into()], 1));
        assert_eq!(select("", 2, 1), (vec!["b".into(), "c".into()], 5), "empty matches everything");
        assert_eq!(
            cache.select(Kind::Machine, None, &LabelSelector::parse("team").unwrap(), Page::default()).total,
            0
        );
        cache.apply(vec![event(2, EventType::Modified, labelled("b", r#"{"team":"x"}"#))]).unwrap();
        cache.apply(vec![event(3, EventType::Deleted, labelled("a", "{}"))]).unwrap();
        assert_eq!(select("team=x", 100, 0), (vec!["b".into(), "c".into(), "e".into()], 3));
    }
}

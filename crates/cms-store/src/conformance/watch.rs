//! Conformance cases for watches: bursts, live order, resumes, compaction
//! and slow watchers.

use cms_model::Kind;
use futures_util::StreamExt;
use serde_json::json;

use super::{event_of, next_event, open, open_with, tenant_draft};
use crate::api::{Draft, EventType, Key, Store, WatchItem, WatchRequest};
use crate::error::StoreError;
use crate::sql::StoreOptions;

pub async fn watch_burst_then_live(url: &str) {
    let store = open(url).await;
    for name in ["b", "a"] {
        store.create(Key::tenant(name), tenant_draft("1.31.0", None)).await.expect("create");
    }
    let mut watch = store.watch(Kind::Tenant, None).await.expect("watch");
    let burst: Vec<_> =
        [next_event(&mut watch).await, next_event(&mut watch).await].into_iter().map(event_of).collect();
    assert_eq!(
        burst.iter().map(|e| (e.0, e.1.as_str())).collect::<Vec<_>>(),
        [(EventType::Added, "a"), (EventType::Added, "b")]
    );
    let synced = next_event(&mut watch).await;
    assert_eq!(synced, WatchItem::Synced(store.revision()));
    store.create(Key::tenant("c"), tenant_draft("1.31.0", None)).await.expect("c");
    store.update(Key::tenant("a"), tenant_draft("1.31.1", None), 1).await.expect("a");
    store
        .create(Key::child(Kind::ConfigPatch, "a", "p"), Draft { spec: json!({}), ..Draft::default() })
        .await
        .expect("p");
    store.delete(Key::tenant("b")).await.expect("b");
    let live: Vec<_> =
        [next_event(&mut watch).await, next_event(&mut watch).await, next_event(&mut watch).await]
            .into_iter()
            .map(event_of)
            .collect();
    let summary: Vec<_> = live.iter().map(|e| (e.0, e.1.as_str())).collect();
    assert_eq!(summary, [(EventType::Added, "c"), (EventType::Modified, "a"), (EventType::Modified, "b")]);
    assert!(live.windows(2).all(|pair| pair[0].2 < pair[1].2), "revisions grow: {live:?}");
}

pub async fn watch_resumes_from_log(url: &str) {
    let store = open(url).await;
    store.create(Key::tenant("a"), tenant_draft("1.31.0", None)).await.expect("a");
    let mark = store.revision();
    store.create(Key::tenant("b"), tenant_draft("1.31.0", None)).await.expect("b");
    store.update(Key::tenant("a"), tenant_draft("1.31.1", None), 1).await.expect("a");
    // A second replica resumes from the shared log.
    let other = open(url).await;
    let mut watch = other.watch(Kind::Tenant, Some(mark)).await.expect("watch");
    let replayed = [event_of(next_event(&mut watch).await), event_of(next_event(&mut watch).await)];
    assert_eq!((replayed[0].0, replayed[0].1.as_str()), (EventType::Added, "b"));
    assert_eq!((replayed[1].0, replayed[1].1.as_str()), (EventType::Modified, "a"));
    other.create(Key::tenant("c"), tenant_draft("1.31.0", None)).await.expect("c");
    assert_eq!(event_of(next_event(&mut watch).await).1, "c");
}

/// A resume far behind replays the log page by page, every event in order,
/// then goes on live.
pub async fn long_replays_come_in_pages(url: &str) {
    let store = open(url).await;
    let names: Vec<String> = (0..2500).map(|i| format!("t{i}")).collect();
    let creates = names.iter().map(|name| {
        let store = store.clone();
        let key = Key::tenant(name.clone());
        tokio::spawn(async move { store.create(key, tenant_draft("1.31.0", None)).await })
    });
    for create in creates.collect::<Vec<_>>() {
        create.await.expect("task").expect("create");
    }
    assert_eq!(store.revision(), 2500);
    let mut watch = store.watch(Kind::Tenant, Some(0)).await.expect("watch");
    for revision in 1..=2500 {
        assert_eq!(event_of(next_event(&mut watch).await).2, revision);
    }
    store.create(Key::tenant("live"), tenant_draft("1.31.0", None)).await.expect("live");
    assert_eq!(event_of(next_event(&mut watch).await), (EventType::Added, "live".to_string(), 2501));
}

pub async fn watch_refuses_compacted_and_future(url: &str) {
    let store = open_with(url, StoreOptions { event_retention: 5, ..StoreOptions::new(url) }).await;
    store.create(Key::tenant("a"), tenant_draft("1.31.0", None)).await.expect("a");
    for version in 1..=20 {
        store
            .update(Key::tenant("a"), tenant_draft(&format!("1.31.{version}"), None), version)
            .await
            .expect("update");
    }
    let gone = store.watch(Kind::Tenant, Some(1)).await.err();
    assert!(matches!(gone, Some(StoreError::Gone { requested: 1, .. })), "{gone:?}");
    let recent = store.watch(Kind::Tenant, Some(store.revision() - 3)).await;
    assert!(recent.is_ok(), "recent revisions stay in the log");
    let future = store.watch(Kind::Tenant, Some(store.revision() + 1)).await.err();
    assert!(matches!(future, Some(StoreError::Future { .. })), "{future:?}");
}

pub async fn slow_watchers_are_cut_off(url: &str) {
    let store = open_with(url, StoreOptions { watch_buffer: 4, ..StoreOptions::new(url) }).await;
    let mut slow = store.watch(Kind::Tenant, Some(0)).await.expect("watch");
    for i in 0..10 {
        store.create(Key::tenant(format!("t{i}")), tenant_draft("1.31.0", None)).await.expect("create");
    }
    let mut saw_lag = false;
    while let Ok(Some(item)) = tokio::time::timeout(std::time::Duration::from_secs(2), slow.next()).await {
        if item.is_err() {
            saw_lag = true;
        }
    }
    assert!(saw_lag, "a watcher that does not read is disconnected");
}

/// A watch of one object resumes past a compacted log when that object has
/// not changed since its resume point, on this replica and on one that
/// loads the store afresh; the object's own compacted changes are still 410.
pub async fn one_object_watches_resume_past_compaction(url: &str) {
    let store = open_with(url, StoreOptions { event_retention: 5, ..StoreOptions::new(url) }).await;
    let (quiet, busy) = (Key::tenant("quiet"), Key::tenant("busy"));
    store.create(quiet.clone(), tenant_draft("1.31.0", None)).await.expect("quiet");
    store.create(busy.clone(), tenant_draft("1.31.0", None)).await.expect("busy");
    let mark = store.revision();
    for version in 1..=20 {
        let draft = tenant_draft(&format!("1.31.{version}"), None);
        store.update(busy.clone(), draft, version).await.expect("busy update");
    }
    let gone = store.watch(Kind::Tenant, Some(mark)).await.err();
    assert!(matches!(gone, Some(StoreError::Gone { .. })), "the whole kind's log is compacted: {gone:?}");
    let busy_gone = store.watch_with(WatchRequest::only(busy.clone()).since(Some(mark))).await.err();
    assert!(matches!(busy_gone, Some(StoreError::Gone { .. })), "busy's own changes are gone: {busy_gone:?}");

    // A fresh replica loads each object's last change from the database.
    let reopened = open_with(url, StoreOptions { event_retention: 5, ..StoreOptions::new(url) }).await;
    for replica in [&store, &reopened] {
        let request = WatchRequest::only(quiet.clone()).since(Some(mark)).with_progress();
        let mut watch = replica.watch_with(request).await.expect("quiet resumes");
        assert_eq!(next_event(&mut watch).await, WatchItem::Synced(replica.revision()), "nothing to replay");
    }

    let request = WatchRequest::only(quiet.clone()).since(Some(mark)).with_progress();
    let mut watch = store.watch_with(request).await.expect("quiet resumes");
    assert_eq!(next_event(&mut watch).await, WatchItem::Synced(store.revision()));
    store.update(busy.clone(), tenant_draft("1.32.0", None), 21).await.expect("busy");
    assert_eq!(next_event(&mut watch).await, WatchItem::Synced(store.revision()), "progress past busy");
    store.update(quiet.clone(), tenant_draft("1.31.9", None), 1).await.expect("quiet");
    let (event_type, name, revision) = event_of(next_event(&mut watch).await);
    assert_eq!((event_type, name.as_str(), revision), (EventType::Modified, "quiet", store.revision()));

    // Resumed from before that change, it is replayed from the log, even
    // from before the compaction: the change follows one at `mark`.
    for from in [revision - 1, mark] {
        let mut replayed =
            store.watch_with(WatchRequest::only(quiet.clone()).since(Some(from))).await.expect("replay");
        let expected = (EventType::Modified, "quiet".to_string(), revision);
        assert_eq!(event_of(next_event(&mut replayed).await), expected, "from {from}");
    }
    // Two changes, the first compacted: its resume would miss it.
    store.update(quiet.clone(), tenant_draft("1.31.10", None), 2).await.expect("quiet");
    for version in 22..=30 {
        let draft = tenant_draft(&format!("1.32.{version}"), None);
        store.update(busy.clone(), draft, version).await.expect("busy update");
    }
    let gone = store.watch_with(WatchRequest::only(quiet.clone()).since(Some(mark))).await.err();
    assert!(matches!(gone, Some(StoreError::Gone { .. })), "a change of quiet was compacted: {gone:?}");
}

/// A fresh watch of one object opens with that object alone, and follows
/// only its changes; a watch without progress reports none.
pub async fn one_object_watches_burst_and_follow_that_object(url: &str) {
    let store = open(url).await;
    for name in ["a", "b", "c"] {
        store.create(Key::tenant(name), tenant_draft("1.31.0", None)).await.expect("create");
    }
    let mut watch = store.watch_with(WatchRequest::only(Key::tenant("b"))).await.expect("watch b");
    assert_eq!(event_of(next_event(&mut watch).await).1, "b");
    assert_eq!(next_event(&mut watch).await, WatchItem::Synced(store.revision()));
    store.update(Key::tenant("a"), tenant_draft("1.31.1", None), 1).await.expect("a");
    store.delete(Key::tenant("b")).await.expect("b");
    let (event_type, name, _) = event_of(next_event(&mut watch).await);
    assert_eq!((event_type, name.as_str()), (EventType::Modified, "b"), "a's change is left out");

    let mut missing = store.watch_with(WatchRequest::only(Key::tenant("later"))).await.expect("watch later");
    assert_eq!(next_event(&mut missing).await, WatchItem::Synced(store.revision()), "an empty burst");
    store.create(Key::tenant("later"), tenant_draft("1.31.0", None)).await.expect("later");
    assert_eq!(event_of(next_event(&mut missing).await).0, EventType::Added);

    let refused =
        store.watch_with(WatchRequest { kind: Kind::Machine, ..WatchRequest::only(Key::tenant("a")) });
    assert!(matches!(refused.await.err(), Some(StoreError::Refused(_))), "the object must be of the kind");
}

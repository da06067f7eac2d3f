//! Conformance cases for watches: bursts, live order, resumes, compaction
//! and slow watchers.

use cms_model::Kind;
use futures_util::StreamExt;
use serde_json::json;

use super::{event_of, next_event, open, open_with, tenant_draft};
use crate::api::{Draft, EventType, Key, Store, WatchItem};
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

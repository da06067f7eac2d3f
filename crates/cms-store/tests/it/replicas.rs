//! Several replicas on one PostgreSQL database: each follows the others'
//! writes through the event log, in order and complete; compare-and-set and
//! revisions hold across them; a partitioned replica catches up.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cms_model::Kind;
use cms_store::pgtest::PgServer;
use cms_store::{
    Draft, EventType, Key, SqlStore, Store, StoreError, StoreOptions, WatchError, WatchItem, WatchStream,
};
use futures_util::StreamExt;
use serde_json::json;

use crate::proxy::Proxy;

/// Options under which only notifications, never the safety-net poll, can
/// bring another replica's writes within a test's deadlines.
pub(crate) fn options(url: &str) -> StoreOptions {
    StoreOptions { poll_interval: Duration::from_secs(600), ..StoreOptions::new(url) }
}

pub(crate) async fn replica(options: StoreOptions) -> Arc<SqlStore> {
    SqlStore::open(&options).await.expect("a replica opens")
}

pub(crate) fn tenant(version: &str) -> Draft {
    Draft { spec: json!({"kubernetesVersion": version}), ..Draft::default() }
}

/// The next item of a watch, within `limit`.
pub(crate) async fn next(watch: &mut WatchStream, limit: Duration) -> Result<WatchItem, WatchError> {
    tokio::time::timeout(limit, watch.next()).await.expect("a watch item in time").expect("the watch goes on")
}

/// `(type, name, revision)` of the next `count` events.
pub(crate) async fn events(watch: &mut WatchStream, count: usize) -> Vec<(EventType, String, u64)> {
    let mut seen = Vec::with_capacity(count);
    while seen.len() < count {
        match next(watch, Duration::from_secs(10)).await.expect("no watch error") {
            WatchItem::Event(event) => {
                seen.push((event.event_type, event.object.key.name.clone(), event.revision))
            }
            WatchItem::Synced(_) => {}
        }
    }
    seen
}

/// Waits until `check` holds, for up to ten seconds.
pub(crate) async fn eventually(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(Instant::now() < deadline, "{what}: not within ten seconds");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_write_on_one_replica_reaches_a_watch_on_another_in_order() {
    let url = PgServer::shared().database();
    let (a, b) = (replica(options(&url)).await, replica(options(&url)).await);
    let mut watch = b.watch(Kind::Tenant, None).await.expect("watch");
    assert_eq!(next(&mut watch, Duration::from_secs(5)).await, Ok(WatchItem::Synced(0)));

    let mut written = Vec::new();
    for i in 0..20 {
        a.create(Key::tenant(format!("t{i:02}")), tenant("1.31.0")).await.expect("create");
        written.push((EventType::Added, format!("t{i:02}"), a.revision()));
    }
    for i in [3, 7] {
        a.update(Key::tenant(format!("t{i:02}")), tenant("1.31.1"), 1).await.expect("update");
        written.push((EventType::Modified, format!("t{i:02}"), a.revision()));
    }
    a.delete(Key::tenant("t05")).await.expect("delete");
    written.push((EventType::Modified, "t05".to_string(), a.revision()));
    let last_write = Instant::now();

    let seen = events(&mut watch, written.len()).await;
    let latency = last_write.elapsed();
    assert_eq!(seen, written, "B's watch sees A's writes, in order and complete");
    assert!(latency < Duration::from_secs(5), "woken by NOTIFY, not by the 600 s poll: {latency:?}");
    assert_eq!(b.revision(), a.revision());
    for i in 0..20 {
        let key = Key::tenant(format!("t{i:02}"));
        assert_eq!(b.get(&key), a.get(&key), "{key} reads the same on both replicas");
    }
}

#[tokio::test]
async fn concurrent_updates_across_replicas_have_one_winner() {
    let url = PgServer::shared().database();
    let (a, b) = (replica(options(&url)).await, replica(options(&url)).await);
    let key = Key::tenant("contested");
    a.create(key.clone(), tenant("1.31.0")).await.expect("create");
    eventually("B sees the tenant", || b.get(&key).is_some()).await;

    let attempts: Vec<_> = (0..32)
        .map(|i| {
            let store = if i % 2 == 0 { a.clone() } else { b.clone() };
            let key = key.clone();
            tokio::spawn(async move { store.update(key, tenant(&format!("1.31.{}", i + 1)), 1).await })
        })
        .collect();
    let mut winners = Vec::new();
    for attempt in attempts {
        match attempt.await.expect("task") {
            Ok(object) => winners.push(object),
            Err(StoreError::Conflict { expected: 1, current: 2, .. }) => {}
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one of 32 writers, 16 per replica, wins");
    let winner = &winners[0];
    assert_eq!(winner.resource_version, 2);
    eventually("both replicas show the winner", || {
        a.get(&key).as_deref() == Some(winner.as_ref()) && b.get(&key).as_deref() == Some(winner.as_ref())
    })
    .await;
}

#[tokio::test]
async fn concurrent_writers_on_two_replicas_commit_in_revision_order() {
    let url = PgServer::shared().database();
    let (a, b) = (replica(options(&url)).await, replica(options(&url)).await);
    let mut on_a = a.watch(Kind::Tenant, None).await.expect("watch on A");
    let mut on_b = b.watch(Kind::Tenant, None).await.expect("watch on B");

    let writers: Vec<_> = (0..40)
        .map(|i| {
            let (store, name) =
                if i % 2 == 0 { (a.clone(), format!("a{i}")) } else { (b.clone(), format!("b{i}")) };
            tokio::spawn(async move { store.create(Key::tenant(name), tenant("1.31.0")).await })
        })
        .collect();
    for writer in writers {
        writer.await.expect("task").expect("create");
    }

    let seen_on_a = events(&mut on_a, 40).await;
    let seen_on_b = events(&mut on_b, 40).await;
    let revisions: Vec<u64> = seen_on_a.iter().map(|event| event.2).collect();
    assert_eq!(revisions, (1..=40).collect::<Vec<_>>(), "one revision each, none skipped, in order");
    assert_eq!(seen_on_a, seen_on_b, "both replicas see one history");
    let c = replica(options(&url)).await;
    let mut replay = c.watch(Kind::Tenant, Some(0)).await.expect("replay the log");
    assert_eq!(events(&mut replay, 40).await, seen_on_a, "the log holds that same history");
}

#[tokio::test]
async fn a_partitioned_replica_catches_up_on_what_it_missed() {
    let server = PgServer::shared();
    let url = server.database();
    let proxy = Proxy::start(server.port()).await;
    let a = replica(options(&url)).await;
    let b = replica(StoreOptions {
        acquire_timeout: Duration::from_secs(1),
        ..options(&proxy.url(&url, server.port()))
    })
    .await;
    a.create(Key::tenant("before"), tenant("1.31.0")).await.expect("create");
    let mut watch = b.watch(Kind::Tenant, Some(0)).await.expect("watch");
    assert_eq!(events(&mut watch, 1).await[0].1, "before");

    proxy.cut();
    let mut written = Vec::new();
    for i in 0..5 {
        a.create(Key::tenant(format!("during{i}")), tenant("1.31.0")).await.expect("A writes on");
        written.push((EventType::Added, format!("during{i}"), a.revision()));
    }
    let started = Instant::now();
    let cut_off = b.ping().await;
    assert!(matches!(cut_off, Err(StoreError::Unavailable(_))), "{cut_off:?}");
    assert!(started.elapsed() < Duration::from_secs(3), "fails fast: {:?}", started.elapsed());
    assert!(b.get(&Key::tenant("during0")).is_none());

    proxy.restore();
    assert_eq!(events(&mut watch, 5).await, written, "B catches up, in order, once it reconnects");
    assert_eq!(b.revision(), a.revision());
    b.create(Key::tenant("after"), tenant("1.31.0")).await.expect("B writes again");
    eventually("A sees B's write", || a.get(&Key::tenant("after")).is_some()).await;
}

#[tokio::test]
async fn a_replica_that_lags_past_the_log_reloads_and_cuts_off_its_watchers() {
    let server = PgServer::shared();
    let url = server.database();
    let proxy = Proxy::start(server.port()).await;
    let a = replica(StoreOptions { event_retention: 5, ..options(&url) }).await;
    let b = replica(options(&proxy.url(&url, server.port()))).await;
    let key = Key::tenant("busy");
    a.create(key.clone(), tenant("1.31.0")).await.expect("create");
    eventually("B sees the tenant", || b.get(&key).is_some()).await;
    let mut watch = b.watch(Kind::Tenant, None).await.expect("watch");

    proxy.cut();
    for version in 1..=30 {
        a.update(key.clone(), tenant(&format!("1.31.{version}")), version).await.expect("update");
    }
    a.delete(Key::tenant("busy")).await.expect("delete");
    proxy.restore();

    let ended = loop {
        match next(&mut watch, Duration::from_secs(10)).await {
            Ok(_) => continue,
            Err(err) => break err,
        }
    };
    assert_eq!(ended, WatchError::Lagged, "a watcher that would miss compacted events is cut off");
    eventually("B reloads to A's state", || b.revision() == a.revision()).await;
    assert_eq!(b.get(&key), a.get(&key));
    let mut resumed = b.watch(Kind::Tenant, Some(b.revision())).await.expect("a new watch");
    a.create(Key::tenant("next"), tenant("1.31.0")).await.expect("create");
    assert_eq!(events(&mut resumed, 1).await[0].1, "next");
}

#[tokio::test]
async fn writes_inside_one_tenant_from_two_replicas_never_deadlock() {
    let url = PgServer::shared().database();
    let (a, b) = (replica(options(&url)).await, replica(options(&url)).await);
    let group = |name: &str, count: u32| {
        json!({"name": name, "role": "worker", "count": count, "providerClass": "metal:bare",
               "providerConfig": {"hosts": []}, "configPatches": []})
    };
    let with_groups = |count: u32| Draft {
        spec: json!({"kubernetesVersion": "1.31.0", "nodeGroups": [group("g", count), group("h", count)]}),
        ..Draft::default()
    };
    let t = Key::tenant("shared");
    a.create(t.clone(), with_groups(1)).await.expect("create");
    let g = Key::child(Kind::NodeGroup, "shared", "g");
    eventually("B sees the group", || b.get(&g).is_some()).await;
    // A tenant PUT rewrites its groups (tenant row, then group rows) while a
    // group PUT on the other replica touches its tenant (group row, then
    // tenant row): without one lock order, they deadlock.
    for round in 0..20u32 {
        let (on_a, t) = (a.clone(), t.clone());
        let draft = with_groups(round + 2);
        let tenant_put = tokio::spawn(async move {
            let version = on_a.get(&t).expect("tenant").resource_version;
            on_a.update(t, draft, version).await
        });
        let (on_b, g) = (b.clone(), g.clone());
        let draft = Draft { spec: group("g", 100 + round), ..Draft::default() };
        let group_put = tokio::spawn(async move {
            let version = on_b.get(&g).expect("group").resource_version;
            on_b.update(g, draft, version).await
        });
        for result in [tenant_put.await.expect("task"), group_put.await.expect("task")] {
            match result {
                Ok(_) | Err(StoreError::Conflict { .. }) => {}
                Err(other) => panic!("round {round}: {other:?}"),
            }
        }
        eventually("the replicas agree", || a.revision() == b.revision()).await;
    }
}

#[tokio::test]
async fn tenants_created_at_once_on_two_replicas_have_one_creator_each() {
    let url = PgServer::shared().database();
    let (a, b) = (replica(options(&url)).await, replica(options(&url)).await);
    let mut attempts = Vec::new();
    for round in 0..3 {
        for store in [&a, &b] {
            for i in 0..16 {
                let store = store.clone();
                let key = Key::tenant(format!("t{i}"));
                let draft = tenant(&format!("1.31.{round}"));
                attempts.push(tokio::spawn(async move { (i, store.create(key, draft).await) }));
            }
        }
    }
    let mut creators = [0; 16];
    for attempt in attempts {
        match attempt.await.expect("task") {
            (i, Ok(_)) => creators[i] += 1,
            (_, Err(StoreError::AlreadyExists(_))) => {}
            (_, Err(other)) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(creators, [1; 16], "each tenant has exactly one creator");
    eventually("both replicas hold the 16 tenants", || {
        [&a, &b].iter().all(|store| {
            store.revision() == 16 && (0..16).all(|i| store.get(&Key::tenant(format!("t{i}"))).is_some())
        })
    })
    .await;
}

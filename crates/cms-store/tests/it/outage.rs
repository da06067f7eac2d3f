//! PostgreSQL stopped under two replicas: every call fails fast with
//! `Unavailable` (never another error), reads keep coming from the cache,
//! and once the server is back everything recovers by itself.

use std::time::{Duration, Instant};

use cms_model::{Kind, Page};
use cms_store::pgtest::PgServer;
use cms_store::{Accounts, Draft, EventType, Key, Leases, SqlStore, Store, StoreError, StoreOptions};
use serde_json::json;

use crate::replicas::{events, eventually, options, replica, tenant};

/// How long a call may wait for a connection.
const ACQUIRE: Duration = Duration::from_secs(1);

fn unavailable<T: std::fmt::Debug>(what: &str, result: Result<T, StoreError>, took: Duration) {
    assert!(matches!(result, Err(StoreError::Unavailable(_))), "{what} during the outage: {result:?}");
    assert!(took < ACQUIRE + Duration::from_secs(2), "{what} failed fast: {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_gives_unavailable_and_everything_recovers() {
    let server = std::sync::Arc::new(tokio::task::spawn_blocking(PgServer::start).await.expect("server"));
    let url = server.database();
    let opts =
        || StoreOptions { acquire_timeout: ACQUIRE, poll_interval: Duration::from_secs(1), ..options(&url) };
    let (a, b) = (replica(opts()).await, replica(opts()).await);
    let key = Key::tenant("steady");
    a.create(key.clone(), tenant("1.31.0")).await.expect("create");
    let mut watch = b.watch(Kind::Tenant, Some(0)).await.expect("watch");
    assert_eq!(events(&mut watch, 1).await[0].1, "steady");

    // A writer that keeps going through the outage: calls in flight when
    // the server stops fail as unavailable too, never as another error.
    let (stop_writing, mut stopped) = tokio::sync::watch::channel(false);
    let writer = {
        let a = a.clone();
        tokio::spawn(async move {
            let (mut written, mut refused) = (0, 0);
            for i in 0.. {
                if *stopped.borrow_and_update() {
                    break;
                }
                let patch = Draft { spec: json!({"format": "strategic", "patches": []}), ..Draft::default() };
                match a.create(Key::child(Kind::ConfigPatch, "steady", format!("p{i}")), patch).await {
                    Ok(_) => written += 1,
                    Err(StoreError::Unavailable(_)) => refused += 1,
                    Err(other) => panic!("write {i} through the outage: {other:?}"),
                }
            }
            (written, refused)
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stopping = server.clone();
    tokio::task::spawn_blocking(move || stopping.stop()).await.expect("stop");
    let down = Instant::now();
    let mut calls = 0;
    while down.elapsed() < Duration::from_secs(5) {
        let started = Instant::now();
        unavailable("update", a.update(key.clone(), tenant("1.31.1"), 1).await, started.elapsed());
        let started = Instant::now();
        unavailable("create", b.create(Key::tenant("new"), tenant("1.31.0")).await, started.elapsed());
        let started = Instant::now();
        unavailable("ping", a.ping().await, started.elapsed());
        let started = Instant::now();
        unavailable("user", a.user("admin".into()).await, started.elapsed());
        let started = Instant::now();
        unavailable(
            "lease",
            b.acquire_lease("tenant/steady".into(), "b".into(), ACQUIRE).await,
            started.elapsed(),
        );
        assert!(a.get(&key).is_some(), "reads come from the cache meanwhile");
        calls += 5;
    }
    assert!(calls >= 5);

    let starting = server.clone();
    tokio::task::spawn_blocking(move || starting.restart()).await.expect("restart");
    let up = Instant::now();
    let updated = loop {
        match a.update(key.clone(), tenant("1.31.1"), 1).await {
            Ok(object) => break object,
            Err(StoreError::Unavailable(_)) if up.elapsed() < Duration::from_secs(10) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(other) => panic!("after the restart: {other:?}"),
        }
    };
    assert_eq!(updated.resource_version, 2);
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop_writing.send(true).expect("the writer listens");
    let (written, refused) = writer.await.expect("the writer never sees another error");
    assert!(written > 0 && refused > 0, "{written} writes went through, {refused} were refused");
    b.create(Key::tenant("after"), tenant("1.31.0")).await.expect("B writes again");
    b.ping().await.expect("B answers");
    let seen = events(&mut watch, 2).await;
    assert_eq!(
        seen.iter().map(|(t, name, _)| (*t, name.as_str())).collect::<Vec<_>>(),
        [(EventType::Modified, "steady"), (EventType::Added, "after")],
        "B's watch goes on, in order"
    );
    assert!(seen[0].2 < seen[1].2);
    let patches = |store: &SqlStore| store.list(Kind::ConfigPatch, None, Page { limit: 1, offset: 0 }).total;
    eventually("B has every patch A wrote", || patches(&b) == patches(&a)).await;
    assert!(patches(&a) >= written);
    eprintln!("recovered {:?} after the restart", up.elapsed());
}

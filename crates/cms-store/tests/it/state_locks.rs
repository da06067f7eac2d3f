//! The tool's state locks on a real PostgreSQL server: a session named
//! after a tenant's schema holding an advisory lock, as the tool's `pg`
//! backend does, is found with its start, ended, and its lock goes with it;
//! a lease holder is alive while its lease is held and unexpired.

use std::time::Duration;

use cms_store::pgtest::PgServer;
use cms_store::{Leases, StateLocks};
use sea_orm::{ConnectionTrait, Database, DbBackend, Statement};

use crate::replicas::{options, replica};

const PREFIX: &str = "cms_tofu_0123456789abcdef0123456789abcdef ";

fn sql(text: &str) -> Statement {
    Statement::from_string(DbBackend::Postgres, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_state_lock_is_found_and_ended_and_lease_holders_are_told() {
    let url = PgServer::shared().database();
    let store = replica(options(&url)).await;
    assert!(store.state_lock_sessions(PREFIX.into()).await.unwrap().is_empty());

    // The tool's run: its connection named `<schema> <replica>`, holding
    // the state's advisory lock; another tenant's (a `_` where the schema
    // has a digit: `LIKE` would take it) holds one too.
    let named = |name: &str| format!("{url}?application_name={}", name.replace(' ', "%20"));
    let run = Database::connect(named(&format!("{PREFIX}7/abc"))).await.unwrap();
    run.execute_raw(sql("SELECT pg_advisory_lock(1)")).await.unwrap();
    let other = Database::connect(named("cms_tofu_0123456789abcdef0123456789abcde_ 8/def")).await.unwrap();
    other.execute_raw(sql("SELECT pg_advisory_lock(2)")).await.unwrap();
    // This replica's own run of the tenant, which a release leaves alone.
    let own = Database::connect(named(&format!("{PREFIX}9/own"))).await.unwrap();
    own.execute_raw(sql("SELECT pg_advisory_lock(3)")).await.unwrap();
    let sessions = store.state_lock_sessions(PREFIX.into()).await.unwrap();
    assert_eq!(sessions.len(), 2, "{sessions:?}");
    assert_eq!(sessions[0].application_name, format!("{PREFIX}7/abc"));
    assert!(sessions[0].since.is_some());

    let ended = store.end_state_lock_sessions(PREFIX.into(), format!("{PREFIX}9/own")).await.unwrap();
    assert_eq!(ended, 1);
    let mut gone = false;
    for _ in 0..50 {
        let left = store.state_lock_sessions(PREFIX.into()).await.unwrap();
        if left.iter().all(|session| session.application_name == format!("{PREFIX}9/own")) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "the ended session's lock went");
    let taken = other.query_one_raw(sql("SELECT pg_try_advisory_lock(1) AS taken")).await.unwrap().unwrap();
    assert!(taken.try_get::<bool>("", "taken").unwrap(), "the lock is free again");
    let left = store.state_lock_sessions("cms_tofu_0123456789abcdef0123456789abcde_ ".into()).await.unwrap();
    assert_eq!(left.len(), 1, "the other tenant's lock stays: {left:?}");
    let still =
        own.query_one_raw(sql("SELECT 1 AS alive")).await.expect("this replica's own session is not ended");
    assert!(still.is_some());
    assert_eq!(store.state_lock_sessions(PREFIX.into()).await.unwrap().len(), 1, "its lock stays");

    // Lease holders.
    let lease = store.acquire_lease("tenant/acme".into(), "h/1/a".into(), Duration::from_secs(30)).await;
    let lease = lease.unwrap().expect("taken");
    assert!(store.holds_lease("tenant/acme".into(), "h/1/a".into()).await.unwrap());
    assert!(!store.holds_lease("tenant/acme".into(), "h/2/b".into()).await.unwrap());
    store.release_lease(lease).await.unwrap();
    assert!(!store.holds_lease("tenant/acme".into(), "h/1/a".into()).await.unwrap());
}

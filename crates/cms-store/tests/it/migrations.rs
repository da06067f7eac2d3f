//! Replicas that start at the same moment on one fresh PostgreSQL database
//! take turns on the migrations, under an advisory lock.

use std::sync::Arc;

use cms_store::pgtest::PgServer;
use cms_store::{SqlStore, Store};
use sea_orm::{ConnectionTrait, Database, DbBackend, Statement};

use crate::replicas::options;

/// How many replicas start together.
const REPLICAS: usize = 6;

/// The versions recorded in `seaql_migrations`, in order.
async fn applied(url: &str) -> Vec<String> {
    let db = Database::connect(url).await.expect("connect");
    let sql = "SELECT version FROM seaql_migrations ORDER BY version";
    let rows = db.query_all_raw(Statement::from_string(DbBackend::Postgres, sql)).await.expect("read");
    rows.iter().map(|row| row.try_get_by_index::<String>(0).expect("version")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_started_at_once_migrate_once() {
    let server = PgServer::shared();
    let reference = server.database();
    SqlStore::open(&options(&reference)).await.expect("one replica alone");
    let expected = applied(&reference).await;
    assert!(!expected.is_empty(), "a lone replica migrates");

    let url = server.database();
    let start = Arc::new(tokio::sync::Barrier::new(REPLICAS));
    let replicas: Vec<_> = (0..REPLICAS)
        .map(|_| {
            let (start, options) = (start.clone(), options(&url));
            tokio::spawn(async move {
                start.wait().await;
                SqlStore::open(&options).await
            })
        })
        .collect();
    let mut opened = Vec::new();
    let mut failed = Vec::new();
    for replica in replicas {
        match replica.await.expect("task") {
            Ok(store) => opened.push(store),
            Err(err) => failed.push(format!("{err:?}")),
        }
    }
    assert!(failed.is_empty(), "every replica opens: {failed:?}");
    assert_eq!(applied(&url).await, expected, "each migration ran once");
    for store in &opened {
        store.ping().await.expect("usable");
    }
}

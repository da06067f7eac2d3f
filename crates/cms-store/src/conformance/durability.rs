//! Conformance cases for the durability the store asks of its database,
//! read back from the database on the store's own connections.

use sea_orm::{ConnectionTrait, DbBackend, Statement, TransactionTrait, TryGetable};

use super::open;

/// The first column of the one row `sql` answers on `db`.
async fn ask<T: TryGetable>(db: &impl ConnectionTrait, sql: &str) -> T {
    let statement = Statement::from_string(db.get_database_backend(), sql);
    let row = db.query_one_raw(statement).await.unwrap_or_else(|err| panic!("{sql}: {err}"));
    let row = row.unwrap_or_else(|| panic!("{sql}: no row"));
    row.try_get_by_index(0).unwrap_or_else(|err| panic!("{sql}: {err:?}"))
}

/// Each commit is flushed before it is acknowledged, as the database
/// itself reports: SQLite in WAL mode with `synchronous` FULL on each of
/// the pool's connections, PostgreSQL with `synchronous_commit` and `fsync`
/// on.
pub async fn the_database_commits_durably(url: &str) {
    let store = open(url).await;
    if store.db.get_database_backend() == DbBackend::Postgres {
        assert_eq!(ask::<String>(&store.db, "SHOW synchronous_commit").await, "on");
        assert_eq!(ask::<String>(&store.db, "SHOW fsync").await, "on");
        return;
    }
    // `synchronous` is a setting of each connection: hold the pool's four
    // at once and ask each.
    let mut held = Vec::new();
    for _ in 0..4 {
        let txn = store.db.begin().await.expect("a connection of the pool");
        assert_eq!(ask::<i64>(&txn, "PRAGMA synchronous").await, 2, "synchronous is FULL");
        assert_eq!(ask::<String>(&txn, "PRAGMA journal_mode").await, "wal");
        held.push(txn);
    }
}

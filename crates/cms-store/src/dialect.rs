//! The few places where SQLite and PostgreSQL differ. Everything else runs
//! the same statements on both.
//!
//! On PostgreSQL several replicas write at once, so a write transaction
//! locks what it decides on: the tenant row of the object it changes (so
//! that writes inside one tenant take their row locks in one order and
//! never deadlock) and, last, the revision counter row (so that
//! transactions take revisions in the order they commit). On SQLite one
//! writer at a time is the database's own rule.

use sea_orm::sea_query::{Expr, LockType, SimpleExpr};
use sea_orm::{
    AccessMode, ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend, EntityTrait,
    IsolationLevel, QuerySelect, Statement, TransactionTrait,
};
use sea_orm_migration::MigratorTrait;

use crate::api::Key;
use crate::entity::{counter, object};
use crate::error::StoreError;
use crate::migration::Migrator;

/// The channel on which each write announces its last revision.
pub(crate) const EVENTS_CHANNEL: &str = "cms_events";

/// The key of the advisory lock that serializes migrations: "cms_mig" in ASCII.
const MIGRATION_LOCK: i64 = 0x0063_6d73_5f6d_6967;

pub(crate) fn is_postgres(db: &impl ConnectionTrait) -> bool {
    db.get_database_backend() == DbBackend::Postgres
}

/// Runs the migrations. On PostgreSQL, replicas that start together take
/// turns: each migrates inside one transaction holding an advisory lock.
pub(crate) async fn migrate(db: &DatabaseConnection) -> Result<(), StoreError> {
    if !is_postgres(db) {
        return Ok(Migrator::up(db, None).await?);
    }
    let txn = db.begin().await?;
    txn.execute_raw(Statement::from_sql_and_values(
        DbBackend::Postgres,
        "SELECT pg_advisory_xact_lock($1)",
        [MIGRATION_LOCK.into()],
    ))
    .await?;
    Migrator::up(&txn, None).await?;
    txn.commit().await?;
    Ok(())
}

/// A read-only transaction whose reads all see one snapshot.
pub(crate) async fn begin_snapshot(db: &DatabaseConnection) -> Result<DatabaseTransaction, StoreError> {
    if !is_postgres(db) {
        // SQLite's read transactions are snapshots already (WAL).
        return Ok(db.begin().await?);
    }
    Ok(db.begin_with_config(Some(IsolationLevel::RepeatableRead), Some(AccessMode::ReadOnly)).await?)
}

/// Locks the row of the tenant that owns `key`, if it exists, until the
/// transaction ends. Nothing on SQLite.
pub(crate) async fn lock_owner(txn: &DatabaseTransaction, key: &Key) -> Result<(), StoreError> {
    if !is_postgres(txn) {
        return Ok(());
    }
    let owner = key.owner();
    object::Entity::find_by_id((owner.kind.as_str().to_string(), owner.tenant, owner.name))
        .lock(LockType::Update)
        .one(txn)
        .await?;
    Ok(())
}

/// Takes the next `count` store-wide revisions from the counter row, which
/// stays locked until the commit, and returns the last. On PostgreSQL the
/// same statement announces, at commit, that the event log now reaches it;
/// SQLite's single replica applies its own writes.
pub(crate) async fn take_revisions(txn: &DatabaseTransaction, count: u64) -> Result<u64, StoreError> {
    let statement = match is_postgres(txn) {
        true => Statement::from_sql_and_values(
            DbBackend::Postgres,
            "WITH taken AS (UPDATE counters SET value = value + $1 WHERE name = $2 RETURNING value) \
             SELECT value, pg_notify($3, value::text) FROM taken",
            [(count as i64).into(), counter::REVISION.into(), EVENTS_CHANNEL.into()],
        ),
        false => Statement::from_sql_and_values(
            DbBackend::Sqlite,
            "UPDATE counters SET value = value + ? WHERE name = ? RETURNING value",
            [(count as i64).into(), counter::REVISION.into()],
        ),
    };
    let row = txn
        .query_one_raw(statement)
        .await?
        .ok_or_else(|| StoreError::Corrupt("the revision counter is missing".into()))?;
    let last: i64 = row.try_get("", "value")?;
    Ok(last as u64)
}

/// The database's clock, in milliseconds since the Unix epoch, so that
/// leases do not depend on the replicas' clocks.
pub(crate) fn now_millis(backend: DbBackend) -> SimpleExpr {
    match backend {
        DbBackend::Postgres => Expr::cust("(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint"),
        _ => Expr::cust("CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"),
    }
}

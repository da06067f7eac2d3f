//! The provisioning tool's state locks as the database holds them.
//!
//! On PostgreSQL the tool's `pg` backend locks a tenant's state with a
//! session advisory lock of its connection, keyed by the state's row id in
//! the tenant's schema; each run names its connection in
//! `application_name`, starting with the tenant's schema (`cms-tofu`'s
//! `lock.rs`). [`StateLocks::state_lock_sessions`] finds the sessions so
//! named that hold an advisory lock (`pg_locks` joined with
//! `pg_stat_activity`), and [`StateLocks::end_state_lock_sessions`] ends
//! them (`pg_terminate_backend`), which releases the lock. SQLite has no
//! sessions: its tool state is a local file.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DbBackend, Statement};

use crate::dialect::is_postgres;
use crate::error::StoreError;
use crate::sql::SqlStore;

/// A database session holding a tool state lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockSession {
    /// The server process of the session.
    pub pid: i32,
    /// Its `application_name`: the tenant's schema and the replica.
    pub application_name: String,
    /// When the session began.
    pub since: Option<DateTime<Utc>>,
}

/// The tool's state locks in the database, and whether a replica still
/// holds its lease.
#[cfg_attr(any(test, feature = "testsuite"), mockall::automock)]
#[async_trait]
pub trait StateLocks: Send + Sync + 'static {
    /// The sessions whose `application_name` starts with `prefix` that hold
    /// an advisory lock. Always none on SQLite.
    async fn state_lock_sessions(&self, prefix: String) -> Result<Vec<LockSession>, StoreError>;

    /// Ends the sessions of [`StateLocks::state_lock_sessions`] but those
    /// named `except` (this replica's own runs) and this connection's (the
    /// process is told to stop, and its locks go with it); how many. One
    /// statement picks and ends them, so that a server process that ended
    /// meanwhile and whose pid went to another session is not taken for
    /// one of them.
    async fn end_state_lock_sessions(&self, prefix: String, except: String) -> Result<u64, StoreError>;

    /// Whether `holder` holds the lease `name`, unexpired, by the
    /// database's clock. On SQLite, where one server holds the database
    /// and takes no leases, whether `holder` is this process's
    /// [`replica_id`] (a previous process on the same host, in a container
    /// with the same pid, is not).
    async fn holds_lease(&self, name: String, holder: String) -> Result<bool, StoreError>;
}

/// The sessions named `$1...` holding an advisory lock. `left()` rather
/// than `LIKE`, whose `_` the schema names are full of.
const SESSIONS: &str = "SELECT DISTINCT a.pid, a.application_name, \
     (extract(epoch FROM a.backend_start) * 1000)::bigint AS since \
     FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid \
     WHERE l.locktype = 'advisory' AND l.granted AND a.datname = current_database() \
     AND left(a.application_name, length($1)) = $1 ORDER BY a.pid";

/// Ends the sessions named `$1...` holding an advisory lock, but those
/// named `$2` and this one, as it picks them.
const END_SESSIONS: &str = "SELECT a.pid, a.application_name, pg_terminate_backend(a.pid) AS ended \
     FROM pg_stat_activity a \
     WHERE a.datname = current_database() AND a.pid <> pg_backend_pid() \
     AND left(a.application_name, length($1)) = $1 AND a.application_name <> $2 \
     AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.locktype = 'advisory' AND l.granted)";

fn postgres(sql: &str, values: impl IntoIterator<Item = sea_orm::Value>) -> Statement {
    Statement::from_sql_and_values(DbBackend::Postgres, sql, values)
}

/// This process's name as a lease and state lock holder:
/// `<host>/<pid>/<random>`, the same for the life of the process, so that
/// a restarted process (in a container, the same host and pid) never passes
/// for its predecessor.
pub fn replica_id() -> &'static str {
    static REPLICA: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    REPLICA.get_or_init(|| {
        let host =
            std::fs::read_to_string("/etc/hostname").map(|name| name.trim().to_string()).unwrap_or_default();
        let host = if host.is_empty() { "host".to_string() } else { host };
        format!("{host}/{}/{}", std::process::id(), uuid::Uuid::new_v4().simple())
    })
}

/// Whether `holder` names this process: all of it, not its pid alone.
fn is_this_process(holder: &str) -> bool {
    holder == replica_id()
}

#[async_trait]
impl StateLocks for SqlStore {
    async fn state_lock_sessions(&self, prefix: String) -> Result<Vec<LockSession>, StoreError> {
        if !is_postgres(&self.db) || prefix.is_empty() {
            return Ok(Vec::new());
        }
        let rows = self.db.query_all_raw(postgres(SESSIONS, [prefix.into()])).await?;
        let mut sessions = Vec::with_capacity(rows.len());
        for row in rows {
            let since: Option<i64> = row.try_get("", "since")?;
            sessions.push(LockSession {
                pid: row.try_get("", "pid")?,
                application_name: row.try_get::<Option<String>>("", "application_name")?.unwrap_or_default(),
                since: since.and_then(DateTime::from_timestamp_millis),
            });
        }
        Ok(sessions)
    }

    async fn end_state_lock_sessions(&self, prefix: String, except: String) -> Result<u64, StoreError> {
        if !is_postgres(&self.db) || prefix.is_empty() {
            return Ok(0);
        }
        let mut ended = 0;
        for row in self.db.query_all_raw(postgres(END_SESSIONS, [prefix.into(), except.into()])).await? {
            let pid: i32 = row.try_get("", "pid")?;
            let name = row.try_get::<Option<String>>("", "application_name")?.unwrap_or_default();
            if row.try_get::<Option<bool>>("", "ended")?.unwrap_or(false) {
                tracing::info!(pid, name = %name, "ended a session holding a tool state lock");
                ended += 1;
            }
        }
        Ok(ended)
    }

    async fn holds_lease(&self, name: String, holder: String) -> Result<bool, StoreError> {
        if !is_postgres(&self.db) {
            return Ok(is_this_process(&holder));
        }
        let sql = "SELECT 1 AS held FROM leases WHERE name = $1 AND holder = $2 \
                   AND expires_at > (extract(epoch FROM clock_timestamp()) * 1000)::bigint";
        Ok(self.db.query_one_raw(postgres(sql, [name.into(), holder.into()])).await?.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holder_is_this_process_by_its_whole_name_not_its_pid() {
        assert!(is_this_process(replica_id()));
        assert_eq!(replica_id(), replica_id(), "one name for the life of the process");
        let (host, rest) = replica_id().split_once('/').unwrap();
        assert!(rest.starts_with(&format!("{}/", std::process::id())));
        // A previous process on the same host with the same pid.
        assert!(!is_this_process(&format!("{host}/{}/0123456789abcdef", std::process::id())));
        assert!(!is_this_process("host/0/abc"));
        assert!(!is_this_process("host"));
    }

    #[tokio::test]
    async fn on_sqlite_only_this_process_s_replica_holds_the_tenant() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}/cms.db?mode=rwc", dir.path().display());
        let store = SqlStore::open(&crate::StoreOptions::new(url)).await.unwrap();
        let name = || "tenant/acme".to_string();
        assert!(store.holds_lease(name(), replica_id().to_string()).await.unwrap());
        let predecessor = format!("host/{}/ffffffffffffffffffffffffffffffff", std::process::id());
        assert!(!store.holds_lease(name(), predecessor).await.unwrap(), "a previous server is gone");
    }
}

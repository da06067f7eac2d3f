//! [`SqlStore`]: the store on a SQL database through sea-orm, SQLite or
//! PostgreSQL.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use cms_model::{Kind, LabelSelector, Page, Projected};
use sea_orm::sqlx::sqlite::{SqliteJournalMode, SqliteSynchronous};
use sea_orm::{ConnectOptions, ConnectionTrait, Database, DatabaseConnection, EntityTrait, QueryOrder};
use serde_json::Value;

use crate::api::{Deleted, Draft, Key, Listing, Object, Store, WatchRequest, WatchStream};
use crate::cache::Cache;
use crate::dialect;
use crate::entity::{counter, object};
use crate::error::StoreError;
use crate::listener::Listener;
use crate::render::render;

/// The default of [`StoreOptions::max_machines_per_tenant`].
pub const DEFAULT_MAX_MACHINES_PER_TENANT: u64 = 500;

/// How to open a [`SqlStore`]. Its `Debug` hides the URL's password.
#[derive(Clone)]
pub struct StoreOptions {
    /// `sqlite://PATH?mode=rwc`, or `postgres://USER:PASSWORD@HOST:PORT/DB`
    /// for several replicas sharing one database.
    pub url: String,
    /// How many events the log keeps for watchers that resume.
    pub event_retention: u64,
    /// How many events a watcher may fall behind before it is cut off.
    pub watch_buffer: usize,
    /// How many audit records are kept; older ones are dropped as new ones
    /// are written.
    pub audit_retention: u64,
    /// On PostgreSQL, the longest a call waits for a database connection
    /// before it fails with [`StoreError::Unavailable`]. (Embedded SQLite
    /// is never unreachable; its calls queue for up to ten seconds.)
    pub acquire_timeout: Duration,
    /// On PostgreSQL, how often a replica reads the event log even without a
    /// notification, as a safety net.
    pub poll_interval: Duration,
    /// The most machines a tenant may have: the sum of its node groups'
    /// counts. A write over it that grows the sum is [`StoreError::Invalid`].
    pub max_machines_per_tenant: u64,
}

impl StoreOptions {
    /// Options for `url` with the defaults.
    pub fn new(url: impl Into<String>) -> StoreOptions {
        StoreOptions {
            url: url.into(),
            event_retention: 10_000,
            watch_buffer: 4096,
            audit_retention: 100_000,
            acquire_timeout: Duration::from_secs(3),
            poll_interval: Duration::from_secs(5),
            max_machines_per_tenant: DEFAULT_MAX_MACHINES_PER_TENANT,
        }
    }
}

impl std::fmt::Debug for StoreOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreOptions")
            .field("url", &redacted(&self.url))
            .field("event_retention", &self.event_retention)
            .field("watch_buffer", &self.watch_buffer)
            .field("audit_retention", &self.audit_retention)
            .field("acquire_timeout", &self.acquire_timeout)
            .field("poll_interval", &self.poll_interval)
            .field("max_machines_per_tenant", &self.max_machines_per_tenant)
            .finish()
    }
}

/// `url` with the password of its user info, if any, replaced.
fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else { return url.to_string() };
    match rest[..at].split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***{}", &rest[at..]),
        None => url.to_string(),
    }
}

/// The store on a SQL database: SQLite, embedded, or PostgreSQL, shared by
/// several replicas.
pub struct SqlStore {
    pub(crate) db: DatabaseConnection,
    pub(crate) cache: Cache,
    /// Where this replica's writes of objects queue for their batch.
    pub(crate) queue: crate::batch::Queue,
    /// Serializes this replica's writes on SQLite, which has one writer.
    /// Across replicas, PostgreSQL serializes them on the revision counter
    /// row.
    pub(crate) write_lock: tokio::sync::Mutex<()>,
    /// One catch-up with the event log at a time.
    pub(crate) catch_up_lock: tokio::sync::Mutex<()>,
    pub(crate) retention: u64,
    /// The newest compaction of the event log this replica has seen.
    pub(crate) compacted: std::sync::atomic::AtomicU64,
    /// How many audit records are kept.
    pub(crate) audit_retention: u64,
    /// The most machines a tenant may have.
    pub(crate) max_machines: u64,
    /// This store, for the fenced views it hands out.
    pub(crate) this: Weak<SqlStore>,
    /// On PostgreSQL, the tasks that follow other replicas' writes; they
    /// stop with the store.
    _listener: Option<Listener>,
}

impl std::fmt::Debug for SqlStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlStore").field("revision", &self.cache.revision()).finish_non_exhaustive()
    }
}

impl SqlStore {
    /// Connects, runs the migrations and loads the cache. On PostgreSQL it
    /// also starts following the writes of other replicas.
    pub async fn open(options: &StoreOptions) -> Result<Arc<SqlStore>, StoreError> {
        let postgres = options.url.starts_with("postgres://") || options.url.starts_with("postgresql://");
        if !postgres && !options.url.starts_with("sqlite:") {
            return Err(StoreError::Refused(format!(
                "unsupported database URL scheme {:?}: use sqlite:// or postgres://",
                options.url.split("://").next().unwrap_or_default()
            )));
        }
        // The embedded database's files are owner-only: those an older
        // version left readable before SQLite opens them (it gives a new
        // `-wal` and `-shm` the database's mode), and a new database after.
        let database = (!postgres).then(|| crate::backup::sqlite_file(&options.url).ok()).flatten();
        if let Some(path) = &database {
            crate::file_modes::restrict_database(path);
        }
        let db = Database::connect(connect_options(options, postgres)).await?;
        if let Some(path) = &database {
            crate::file_modes::restrict_database(path);
        }
        dialect::migrate(&db).await?;
        let (objects, revision) = load(&db).await?;
        tracing::info!(objects = objects.len(), revision, "store loaded");
        let listener = postgres.then(|| db.get_postgres_connection_pool().clone());
        let store = Arc::new_cyclic(|this: &Weak<SqlStore>| SqlStore {
            _listener: listener.map(|pool| Listener::start(pool, this.clone(), options.poll_interval)),
            queue: crate::batch::start(this.clone(), postgres),
            db,
            cache: Cache::new(objects, revision, options.watch_buffer),
            write_lock: tokio::sync::Mutex::new(()),
            catch_up_lock: tokio::sync::Mutex::new(()),
            retention: options.event_retention.max(1),
            compacted: std::sync::atomic::AtomicU64::new(0),
            audit_retention: options.audit_retention.max(1),
            max_machines: options.max_machines_per_tenant,
            this: this.clone(),
        });
        Ok(store)
    }
}

fn connect_options(options: &StoreOptions, postgres: bool) -> ConnectOptions {
    let mut connect = ConnectOptions::new(options.url.clone());
    connect.sqlx_logging(false);
    if postgres {
        connect
            .max_connections(16)
            .min_connections(0)
            .connect_timeout(options.acquire_timeout)
            .acquire_timeout(options.acquire_timeout)
            // The statements are prepared once per connection and planned
            // once: the batch's take their rows as arrays, whose lengths a
            // plan made for each call would weigh at every call, for nothing.
            .map_sqlx_postgres_opts(|postgres| postgres.options([("plan_cache_mode", "force_generic_plan")]));
        return connect;
    }
    connect
        .max_connections(4)
        .min_connections(1)
        .connect_timeout(Duration::from_secs(10))
        .map_sqlx_sqlite_opts(|sqlite| {
            sqlite
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Full)
                .busy_timeout(Duration::from_secs(10))
                .create_if_missing(true)
        });
    connect
}

/// Reads every object, with the revision of its last change, and the
/// current revision, from one snapshot.
pub(crate) async fn load(db: &DatabaseConnection) -> Result<(Vec<(Object, u64)>, u64), StoreError> {
    let txn = dialect::begin_snapshot(db).await?;
    let revision = crate::commit::counter(&txn, counter::REVISION).await?;
    let rows = object::Entity::find()
        .order_by_asc(object::Column::Kind)
        .order_by_asc(object::Column::Tenant)
        .order_by_asc(object::Column::Name)
        .all(&txn)
        .await?;
    txn.commit().await?;
    let mut groups: HashMap<&str, Vec<object::Model>> = HashMap::new();
    for row in rows.iter().filter(|row| row.kind == Kind::NodeGroup.as_str()) {
        groups.entry(row.tenant.as_str()).or_default().push(row.clone());
    }
    let objects = rows
        .iter()
        .map(|row| {
            let own = if row.kind == Kind::Tenant.as_str() { groups.get(row.name.as_str()) } else { None };
            let object = render(row, own.map(Vec::as_slice).unwrap_or_default())?;
            Ok((object, row.revision as u64))
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok((objects, revision))
}

#[async_trait]
impl Store for SqlStore {
    fn get(&self, key: &Key) -> Option<Arc<Object>> {
        self.cache.get(key)
    }

    fn list(&self, kind: Kind, tenant: Option<String>, page: Page) -> Listing {
        self.cache.list(kind, tenant.as_deref(), page)
    }

    fn select(&self, kind: Kind, tenant: Option<String>, selector: &LabelSelector, page: Page) -> Listing {
        self.cache.select(kind, tenant.as_deref(), selector, page)
    }

    fn all(&self, kind: Kind, tenant: Option<String>) -> Vec<Arc<Object>> {
        self.cache.all(kind, tenant.as_deref())
    }

    #[tracing::instrument(name = "store.create", skip_all, fields(key = %key))]
    async fn create(&self, key: Key, draft: Draft) -> Result<Arc<Object>, StoreError> {
        self.create_object(key, draft, None).await
    }

    #[tracing::instrument(name = "store.update", skip_all, fields(key = %key))]
    async fn update(&self, key: Key, draft: Draft, expected: u64) -> Result<Arc<Object>, StoreError> {
        self.update_object(key, draft, expected, None).await
    }

    #[tracing::instrument(name = "store.update_status", skip_all, fields(key = %key))]
    async fn update_status(
        &self,
        key: Key,
        status: Value,
        expected: Option<u64>,
    ) -> Result<Arc<Object>, StoreError> {
        self.update_object_status(key, status, expected, None).await
    }

    #[tracing::instrument(name = "store.delete", skip_all, fields(key = %key))]
    async fn delete(&self, key: Key) -> Result<Deleted, StoreError> {
        self.delete_object(key, None).await
    }

    #[tracing::instrument(name = "store.remove_finalizer", skip_all, fields(key = %key))]
    async fn remove_finalizer(&self, key: Key, finalizer: String) -> Result<Option<Arc<Object>>, StoreError> {
        self.clear_finalizer(key, finalizer, None).await
    }

    async fn watch(&self, kind: Kind, since: Option<u64>) -> Result<WatchStream, StoreError> {
        self.open_watch(WatchRequest::kind(kind).since(since)).await
    }

    async fn watch_with(&self, request: WatchRequest) -> Result<WatchStream, StoreError> {
        self.open_watch(request).await
    }

    #[tracing::instrument(name = "store.set_projection", skip_all, fields(tenant = %tenant))]
    async fn set_projection(&self, tenant: String, items: Vec<Projected>) -> Result<(), StoreError> {
        self.write_projection(tenant, items, None).await
    }

    async fn projection(&self, tenant: Option<String>) -> Result<Option<Vec<Projected>>, StoreError> {
        self.read_projection(tenant).await
    }

    async fn set_tool_run(&self, tenant: String, run: cms_model::ToolRun) -> Result<(), StoreError> {
        self.write_tool_run(tenant, run, None).await
    }

    async fn tool_runs(&self, tenant: String) -> Result<Vec<cms_model::ToolRun>, StoreError> {
        self.read_tool_runs(tenant).await
    }

    async fn secrets(&self, tenant: String) -> Result<Option<Vec<u8>>, StoreError> {
        self.read_secrets(tenant).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.db.execute_unprepared("SELECT 1").await.map(|_| ()).map_err(StoreError::Unavailable)
    }

    fn revision(&self) -> u64 {
        self.cache.revision()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_password() {
        let check = |url: &str, shown: &str| {
            let debug = format!("{:?}", StoreOptions::new(url));
            assert!(debug.contains(&format!("{shown:?}")), "{debug}");
            assert!(!debug.contains("s3cret"), "{debug}");
        };
        check("postgres://cms:s3cret@db:5432/cms", "postgres://cms:***@db:5432/cms");
        check("postgres://cms@db/cms", "postgres://cms@db/cms");
        check("sqlite:///srv/cms.db?mode=rwc", "sqlite:///srv/cms.db?mode=rwc");
    }
}

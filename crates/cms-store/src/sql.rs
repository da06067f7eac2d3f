//! [`SqlStore`]: the store on a SQL database through sea-orm.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cms_model::{Kind, Page, Projected};
use sea_orm::sqlx::sqlite::{SqliteJournalMode, SqliteSynchronous};
use sea_orm::{ConnectOptions, ConnectionTrait, Database, DatabaseConnection, EntityTrait, QueryOrder};
use sea_orm_migration::MigratorTrait;
use serde_json::Value;

use crate::api::{Deleted, Draft, Key, Listing, Object, Store, WatchStream};
use crate::cache::Cache;
use crate::entity::{counter, object};
use crate::error::StoreError;
use crate::migration::Migrator;
use crate::render::render;

/// How to open a [`SqlStore`].
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// `sqlite://PATH?mode=rwc`.
    pub url: String,
    /// How many events the log keeps for watchers that resume.
    pub event_retention: u64,
    /// How many events a watcher may fall behind before it is cut off.
    pub watch_buffer: usize,
}

impl StoreOptions {
    /// Options for `url` with the default retention and buffer.
    pub fn new(url: impl Into<String>) -> StoreOptions {
        StoreOptions { url: url.into(), event_retention: 10_000, watch_buffer: 4096 }
    }
}

/// The store on a SQL database: SQLite, embedded.
pub struct SqlStore {
    pub(crate) db: DatabaseConnection,
    pub(crate) cache: Cache,
    /// Serializes this replica's writes, so that the cache applies them in
    /// commit order.
    pub(crate) write_lock: tokio::sync::Mutex<()>,
    pub(crate) retention: u64,
}

impl std::fmt::Debug for SqlStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlStore").field("revision", &self.cache.revision()).finish_non_exhaustive()
    }
}

impl SqlStore {
    /// Connects, runs the migrations and loads the cache.
    pub async fn open(options: &StoreOptions) -> Result<Arc<SqlStore>, StoreError> {
        if !options.url.starts_with("sqlite:") {
            return Err(StoreError::Refused(format!(
                "unsupported database URL scheme in {:?}: this build supports sqlite:// only",
                options.url.split("://").next().unwrap_or_default()
            )));
        }
        let mut connect = ConnectOptions::new(options.url.clone());
        connect
            .max_connections(4)
            .min_connections(1)
            .connect_timeout(Duration::from_secs(10))
            .sqlx_logging(false)
            .map_sqlx_sqlite_opts(|sqlite| {
                sqlite
                    .journal_mode(SqliteJournalMode::Wal)
                    .synchronous(SqliteSynchronous::Full)
                    .busy_timeout(Duration::from_secs(10))
                    .create_if_missing(true)
            });
        let db = Database::connect(connect).await?;
        Migrator::up(&db, None).await?;
        let (objects, revision) = load(&db).await?;
        tracing::info!(objects = objects.len(), revision, "store loaded");
        Ok(Arc::new(SqlStore {
            db,
            cache: Cache::new(objects, revision, options.watch_buffer),
            write_lock: tokio::sync::Mutex::new(()),
            retention: options.event_retention.max(1),
        }))
    }
}

/// Reads every object and the current revision.
async fn load(db: &DatabaseConnection) -> Result<(Vec<Object>, u64), StoreError> {
    let rows = object::Entity::find()
        .order_by_asc(object::Column::Kind)
        .order_by_asc(object::Column::Tenant)
        .order_by_asc(object::Column::Name)
        .all(db)
        .await?;
    let mut groups: HashMap<&str, Vec<object::Model>> = HashMap::new();
    for row in rows.iter().filter(|row| row.kind == Kind::NodeGroup.as_str()) {
        groups.entry(row.tenant.as_str()).or_default().push(row.clone());
    }
    let objects = rows
        .iter()
        .map(|row| {
            let own = if row.kind == Kind::Tenant.as_str() { groups.get(row.name.as_str()) } else { None };
            render(row, own.map(Vec::as_slice).unwrap_or_default())
        })
        .collect::<Result<Vec<_>, _>>()?;
    let revision = crate::write::counter(db, counter::REVISION).await?;
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

    async fn create(&self, key: Key, draft: Draft) -> Result<Arc<Object>, StoreError> {
        self.create_object(key, draft).await
    }

    async fn update(&self, key: Key, draft: Draft, expected: u64) -> Result<Arc<Object>, StoreError> {
        self.update_object(key, draft, expected).await
    }

    async fn update_status(
        &self,
        key: Key,
        status: Value,
        expected: Option<u64>,
    ) -> Result<Arc<Object>, StoreError> {
        self.update_object_status(key, status, expected).await
    }

    async fn delete(&self, key: Key) -> Result<Deleted, StoreError> {
        self.delete_object(key).await
    }

    async fn remove_finalizer(&self, key: Key, finalizer: String) -> Result<Option<Arc<Object>>, StoreError> {
        self.clear_finalizer(key, finalizer).await
    }

    async fn watch(&self, kind: Kind, since: Option<u64>) -> Result<WatchStream, StoreError> {
        self.open_watch(kind, since).await
    }

    async fn set_projection(&self, tenant: String, items: Vec<Projected>) -> Result<(), StoreError> {
        self.write_projection(tenant, items).await
    }

    async fn projection(&self, tenant: Option<String>) -> Result<Option<Vec<Projected>>, StoreError> {
        self.read_projection(tenant).await
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

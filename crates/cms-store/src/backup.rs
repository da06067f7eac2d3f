//! Backup and restore of the embedded SQLite database as one file.
//!
//! [`backup_sqlite`] copies a live database with `VACUUM INTO`: the copy is
//! one read transaction's snapshot, taken while the server goes on writing
//! (WAL readers do not block the writer). It is written under a temporary
//! name beside the target and linked to the target's name only once complete
//! and synced, so the target is either absent or whole.
//!
//! [`restore_sqlite`] holds the [`DatabaseLock`], copies the file beside the
//! database, checks the copy (SQLite's integrity check, and migrations this
//! binary knows), keeps the previous database as
//! `<database>.before-restore-<UTC time>` (with its WAL), and renames the
//! copy over the database.
//!
//! Both copy bytes: sealed secrets stay sealed, and the key that opens them
//! is not in the database. The backup and the restored copy are created
//! with the mode 0600 (`file_modes.rs`), whatever the process's umask.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use cms_model::Kind;
use sea_orm::sqlx::sqlite::SqliteConnectOptions;
use sea_orm::{ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DbBackend, DbErr, Statement};
use sea_orm_migration::MigratorTrait;

use crate::entity::counter;
use crate::error::StoreError;
use crate::file_modes::{create_private, create_private_dir};
use crate::lock_file::DatabaseLock;
use crate::migration::Migrator;

/// A database file that was written or put in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The file.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// How many tenants it holds, those being deleted included.
    pub tenants: u64,
    /// The store-wide revision it holds.
    pub revision: u64,
}

/// What [`restore_sqlite`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    /// The database now in place.
    pub database: Snapshot,
    /// Where the database it replaced was kept, if there was one.
    pub previous: Option<PathBuf>,
}

/// Copies the SQLite database of `url` (a `sqlite://` store URL) to
/// `target`, which must not exist, while servers may be using it.
pub async fn backup_sqlite(url: &str, target: &Path) -> Result<Snapshot, StoreError> {
    let database = sqlite_file(url)?;
    if !database.is_file() {
        return Err(StoreError::Refused(format!("there is no database at {}", database.display())));
    }
    if target.exists() {
        return Err(already_exists(target));
    }
    let partial = beside(target, &format!(".partial-{}", std::process::id()));
    remove_quietly(&partial);
    let written = async {
        // `VACUUM INTO` fills an empty file as it finds it: made owner-only
        // first, the copy is never readable by others.
        create_private(&partial)?;
        let db = connect(url, &database).await?;
        let into = partial
            .to_str()
            .ok_or_else(|| StoreError::Refused(format!("{} is not a UTF-8 path", partial.display())))?;
        let vacuum = Statement::from_sql_and_values(DbBackend::Sqlite, "VACUUM INTO ?", [into.into()]);
        let done = db.execute_raw(vacuum).await;
        db.close().await?;
        done?;
        sync(&partial)?;
        let snapshot = inspect(url, &partial, target).await?;
        link_new(&partial, target)?;
        Ok(Snapshot { path: target.to_path_buf(), ..snapshot })
    }
    .await;
    remove_quietly(&partial);
    written
}

/// Replaces the SQLite database of `url` with the backup `source`, after
/// checking it. Refused while a server holds the database's lock.
pub async fn restore_sqlite(url: &str, source: &Path) -> Result<Restored, StoreError> {
    let database = sqlite_file(url)?;
    if let Some(dir) = parent(&database) {
        create_private_dir(dir)?;
    }
    let _lock = DatabaseLock::acquire(url)?;
    if !source.is_file() {
        return Err(StoreError::Refused(format!("{} is not a file", source.display())));
    }
    let incoming = beside(&database, ".restoring");
    remove_quietly(&incoming);
    let restored = async {
        // Copied into a new owner-only file: `std::fs::copy` would give the
        // copy the backup's mode.
        let mut copy = create_private(&incoming)?;
        let mut from = File::open(source).map_err(file_error("read", source))?;
        io::copy(&mut from, &mut copy).map_err(file_error("copy", source))?;
        drop(copy);
        sync(&incoming)?;
        let snapshot = inspect(url, &incoming, source).await.map_err(|err| match err {
            StoreError::Refused(_) => err,
            other => StoreError::Refused(format!(
                "{} is not a SQLite database: {}",
                source.display(),
                root_cause(&other)
            )),
        })?;
        let previous = keep_previous(&database)?;
        std::fs::rename(&incoming, &database).map_err(file_error("rename", &incoming))?;
        sync_dir(&database)?;
        Ok(Restored { database: Snapshot { path: database.clone(), ..snapshot }, previous })
    }
    .await;
    remove_quietly(&incoming);
    restored
}

/// The setting `name` of the SQLite database file `path` (a backup, say),
/// read as the file holds it: nothing is migrated or written. `url` gives
/// the other connection settings.
pub async fn sqlite_setting(url: &str, path: &Path, name: &str) -> Result<Option<String>, StoreError> {
    let db = connect(url, path).await?;
    let row = db.query_one_raw(sqlite("SELECT value FROM settings WHERE name = ?", [name.into()])).await;
    db.close().await?;
    Ok(row?.map(|row| row.try_get_by_index::<String>(0)).transpose()?)
}

/// The database file of a `sqlite:` URL.
pub(crate) fn sqlite_file(url: &str) -> Result<PathBuf, StoreError> {
    if !url.starts_with("sqlite:") {
        return Err(StoreError::Refused(
            "this works on the embedded SQLite store only; back PostgreSQL up with pg_dump".into(),
        ));
    }
    let options = SqliteConnectOptions::from_str(url)
        .map_err(|err| StoreError::Refused(format!("invalid SQLite URL: {err}")))?;
    if url.contains(":memory:") || url.contains("mode=memory") {
        return Err(StoreError::Refused("an in-memory database has no file".into()));
    }
    Ok(options.get_filename().to_path_buf())
}

/// `path` with `suffix` appended to its file name.
pub(crate) fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(suffix);
    PathBuf::from(name)
}

/// One connection to the file `path`, with the other settings of `url`;
/// the file must exist. Its journal mode is left as the file has it: WAL for
/// a store, rollback for a copy that `VACUUM INTO` made.
async fn connect(url: &str, path: &Path) -> Result<DatabaseConnection, StoreError> {
    let path = path.to_path_buf();
    let mut options = ConnectOptions::new(url.to_string());
    options.sqlx_logging(false).max_connections(1).min_connections(0).map_sqlx_sqlite_opts(move |sqlite| {
        sqlite.filename(&path).create_if_missing(false).busy_timeout(Duration::from_secs(30))
    });
    Ok(Database::connect(options).await?)
}

/// Checks that `path` is a whole SQLite database of this schema, and
/// counts what it holds. Refusals name the file as `shown`, the name the
/// operator gave it.
async fn inspect(url: &str, path: &Path, shown: &Path) -> Result<Snapshot, StoreError> {
    let db = connect(url, path).await?;
    let inspected = inspect_open(&db, shown).await;
    db.close().await?;
    let snapshot = inspected?;
    let bytes = std::fs::metadata(path).map_err(file_error("read", path))?.len();
    Ok(Snapshot { bytes, ..snapshot })
}

async fn inspect_open(db: &DatabaseConnection, shown: &Path) -> Result<Snapshot, StoreError> {
    let rows = db.query_all_raw(sqlite("PRAGMA integrity_check", [])).await?;
    let findings =
        rows.iter().map(|row| row.try_get_by_index::<String>(0)).collect::<Result<Vec<_>, DbErr>>()?;
    if findings != ["ok"] {
        let found = findings.iter().take(5).cloned().collect::<Vec<_>>().join("; ");
        return Err(StoreError::Refused(format!(
            "{} fails SQLite's integrity check: {found}",
            shown.display()
        )));
    }
    check_migrations(db, shown).await?;
    let count = |sql: &'static str, value: &'static str| async move {
        let row = db.query_one_raw(sqlite(sql, [value.into()])).await?;
        let count = row.map(|row| row.try_get_by_index::<i64>(0)).transpose()?.unwrap_or(0);
        Ok::<u64, StoreError>(count.max(0) as u64)
    };
    let tenants = count("SELECT COUNT(*) FROM objects WHERE kind = ?", Kind::Tenant.as_str()).await?;
    let revision = count("SELECT value FROM counters WHERE name = ?", counter::REVISION).await?;
    Ok(Snapshot { path: shown.to_path_buf(), bytes: 0, tenants, revision })
}

/// The migrations recorded in the file must be the first ones this binary
/// knows, in order: an older schema is brought up at the next start, a newer
/// or foreign one is refused.
async fn check_migrations(db: &DatabaseConnection, path: &Path) -> Result<(), StoreError> {
    let not_ours =
        |why: String| StoreError::Refused(format!("{} is not a cms database: {why}", path.display()));
    let rows = db
        .query_all_raw(sqlite("SELECT version FROM seaql_migrations ORDER BY version", []))
        .await
        .map_err(|err| not_ours(format!("no migrations table ({err})")))?;
    let applied =
        rows.iter().map(|row| row.try_get_by_index::<String>(0)).collect::<Result<Vec<_>, DbErr>>()?;
    let known: Vec<String> = Migrator::migrations().iter().map(|m| m.name().to_string()).collect();
    if applied.is_empty() {
        return Err(not_ours("no migration was applied".into()));
    }
    if applied.len() > known.len() || known[..applied.len()] != applied[..] {
        return Err(StoreError::Refused(format!(
            "{} has the migrations [{}], which this cms-server does not know as [{}]: \
             restore it with the cms-server version that wrote it",
            path.display(),
            applied.join(", "),
            known.join(", ")
        )));
    }
    Ok(())
}

fn sqlite<const N: usize>(sql: &str, values: [sea_orm::Value; N]) -> Statement {
    Statement::from_sql_and_values(DbBackend::Sqlite, sql, values)
}

/// Keeps `database`, if it exists, and its WAL and shared-memory files as
/// `<database>.before-restore-<time>`, leaving the database itself in place
/// (a hard link) until the rename replaces it.
fn keep_previous(database: &Path) -> Result<Option<PathBuf>, StoreError> {
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let kept = beside(database, &format!(".before-restore-{stamp}"));
    let previous = match database.exists() {
        true => {
            link_new(database, &kept)?;
            Some(kept.clone())
        }
        false => None,
    };
    for suffix in ["-wal", "-shm"] {
        let file = beside(database, suffix);
        if file.exists() {
            std::fs::rename(&file, beside(&kept, suffix)).map_err(file_error("move", &file))?;
        }
    }
    Ok(previous)
}

/// Gives `from` the new name `to`, failing if `to` exists (a hard link
/// never replaces a file), and syncs the directory.
fn link_new(from: &Path, to: &Path) -> Result<(), StoreError> {
    std::fs::hard_link(from, to).map_err(|err| match err.kind() {
        io::ErrorKind::AlreadyExists => already_exists(to),
        _ => file_error("create", to)(err),
    })?;
    sync_dir(to)
}

/// The innermost source of `err`, which says what SQLite found; the outer
/// layers repeat it.
fn root_cause(err: &dyn std::error::Error) -> String {
    let mut cause = err;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

fn already_exists(path: &Path) -> StoreError {
    StoreError::Refused(format!("{} already exists: choose a new name", path.display()))
}

fn sync(path: &Path) -> Result<(), StoreError> {
    File::open(path).and_then(|file| file.sync_all()).map_err(file_error("sync", path))
}

/// Syncs the directory holding `path`, so that a new name in it is durable.
fn sync_dir(path: &Path) -> Result<(), StoreError> {
    let dir = parent(path).unwrap_or(Path::new("."));
    sync(dir)
}

fn parent(path: &Path) -> Option<&Path> {
    path.parent().filter(|dir| !dir.as_os_str().is_empty())
}

/// Removes `path` and the WAL and shared-memory files SQLite may have made
/// beside it; none of them need exist.
fn remove_quietly(path: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let _ = std::fs::remove_file(beside(path, suffix));
    }
}

/// A failure on a file of the database (the database, a copy, a lock), as
/// a database failure that names the file.
pub(crate) fn file_error(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> StoreError {
    let path = path.display().to_string();
    move |err| StoreError::Database(DbErr::Custom(format!("could not {action} {path}: {err}")))
}

//! The embedded database as one file: a backup taken from an open store
//! opens with the same objects and sealed secrets, and a restore checks its
//! file, keeps the database it replaces, and waits for no server.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cms_store::{
    DatabaseLock, Draft, Key, SqlStore, Store, StoreError, StoreOptions, backup_sqlite, restore_sqlite,
};
use serde_json::{Value, json};
use tempfile::TempDir;

fn url(path: &Path) -> String {
    format!("sqlite://{}?mode=rwc", path.display())
}

async fn open(path: &Path) -> Arc<SqlStore> {
    SqlStore::open(&StoreOptions::new(url(path))).await.expect("the store opens")
}

/// A store in a folder of its own, with tenants whose secrets are `sealed <name>`.
async fn store_with(tenants: &[&str]) -> (TempDir, PathBuf, Arc<SqlStore>) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let database = dir.path().join("cms.db");
    let store = open(&database).await;
    for name in tenants {
        let draft = Draft {
            spec: json!({"kubernetesVersion": "1.31.0", "podNetwork": ["10.244.0.0/16"]}),
            secrets: Some(format!("sealed {name}").into_bytes()),
            ..Draft::default()
        };
        store.create(Key::tenant(*name), draft).await.expect("a tenant is created");
    }
    (dir, database, store)
}

fn body(store: &dyn Store, name: &str) -> Value {
    let object = store.get(&Key::tenant(name)).unwrap_or_else(|| panic!("{name} is missing"));
    serde_json::from_slice(&object.json).expect("stored JSON")
}

fn refusal(result: Result<impl std::fmt::Debug, StoreError>) -> String {
    match result {
        Err(StoreError::Refused(message)) => message,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// The files of `dir`, sorted.
fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("the folder lists")
        .map(|entry| entry.expect("an entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn a_backup_opens_with_the_same_objects() {
    let (_dir, database, store) = store_with(&["alpha", "beta"]).await;
    let mut changed = Draft { spec: json!({"kubernetesVersion": "1.31.2"}), ..Draft::default() };
    changed.labels.insert("team".into(), "blue".into());
    store.update(Key::tenant("alpha"), changed, 1).await.expect("alpha is updated");

    let target_dir = tempfile::tempdir().expect("a temporary directory");
    let target = target_dir.path().join("cms-backup.db");
    let snapshot = backup_sqlite(&url(&database), &target).await.expect("the backup is written");
    assert_eq!(snapshot.path, target);
    assert_eq!((snapshot.tenants, snapshot.revision), (2, store.revision()));
    assert_eq!(snapshot.bytes, std::fs::metadata(&target).expect("the copy exists").len());
    assert_eq!(files(target_dir.path()), ["cms-backup.db"], "nothing is left beside the copy");

    let copy = open(&target).await;
    assert_eq!(copy.revision(), store.revision());
    for name in ["alpha", "beta"] {
        assert_eq!(body(copy.as_ref(), name), body(store.as_ref(), name), "{name} reads the same");
        let sealed = copy.secrets(name.into()).await.expect("secrets read");
        assert_eq!(sealed, Some(format!("sealed {name}").into_bytes()), "{name}'s secrets are copied sealed");
    }
}

#[tokio::test]
async fn backups_refuse_an_existing_target_and_a_missing_database() {
    let (dir, database, _store) = store_with(&["alpha"]).await;
    let target = dir.path().join("taken.db");
    std::fs::write(&target, "keep me").expect("the target is written");
    let message = refusal(backup_sqlite(&url(&database), &target).await);
    assert!(message.contains("already exists"), "{message}");
    assert_eq!(std::fs::read_to_string(&target).expect("the target reads"), "keep me");

    let missing = dir.path().join("none.db");
    let message = refusal(backup_sqlite(&url(&missing), &dir.path().join("new.db")).await);
    assert!(message.contains("no database"), "{message}");
    let message = refusal(backup_sqlite("postgres://cms@db/cms", &dir.path().join("new.db")).await);
    assert!(message.contains("pg_dump"), "{message}");
    assert!(!dir.path().join("new.db").exists() && !missing.exists());
}

#[tokio::test]
async fn a_restore_replaces_the_database_and_keeps_the_previous_one() {
    let (source_dir, source, source_store) = store_with(&["alpha"]).await;
    let backup = source_dir.path().join("backup.db");
    backup_sqlite(&url(&source), &backup).await.expect("the backup is written");
    drop(source_store);

    let (dir, database, store) = store_with(&["beta"]).await;
    drop(store);
    let restored = restore_sqlite(&url(&database), &backup).await.expect("the restore succeeds");
    assert_eq!((restored.database.path.as_path(), restored.database.tenants), (database.as_path(), 1));
    let previous = restored.previous.expect("the replaced database is kept");
    let name = previous.file_name().expect("a name").to_string_lossy().into_owned();
    assert!(name.starts_with("cms.db.before-restore-"), "{name}");
    assert!(!files(dir.path()).iter().any(|file| file.contains("restoring")), "{:?}", files(dir.path()));

    let now = open(&database).await;
    assert!(now.get(&Key::tenant("alpha")).is_some() && now.get(&Key::tenant("beta")).is_none());
    assert_eq!(now.secrets("alpha".into()).await.expect("secrets read"), Some(b"sealed alpha".to_vec()));
    let kept = open(&previous).await;
    assert!(kept.get(&Key::tenant("beta")).is_some(), "the kept database holds what was replaced");

    let fresh = tempfile::tempdir().expect("a temporary directory");
    let database = fresh.path().join("data").join("cms.db");
    let restored = restore_sqlite(&url(&database), &backup).await.expect("a restore into a fresh folder");
    assert_eq!(restored.previous, None);
    assert!(open(&database).await.get(&Key::tenant("alpha")).is_some());
}

#[tokio::test]
async fn a_restore_refuses_what_is_not_a_database_of_this_store() {
    let (dir, database, store) = store_with(&["alpha"]).await;
    let check = |file: PathBuf, expected: &'static str| {
        let url = url(&database);
        async move {
            let message = refusal(restore_sqlite(&url, &file).await);
            assert!(message.contains(expected), "{message}");
        }
    };
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "these are not the tables you are looking for\n".repeat(100)).expect("written");
    check(text, "not a SQLite database").await;
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, "").expect("written");
    check(empty, "not a cms database").await;
    check(dir.path().join("absent.db"), "is not a file").await;

    let newer = dir.path().join("newer.db");
    backup_sqlite(&url(&database), &newer).await.expect("the backup is written");
    let db = sea_orm::Database::connect(url(&newer)).await.expect("the copy opens");
    use sea_orm::ConnectionTrait as _;
    db.execute_unprepared(
        "INSERT INTO seaql_migrations (version, applied_at) VALUES ('m9999_from_the_future', 0)",
    )
    .await
    .expect("a migration is added");
    db.close().await.expect("closed");
    check(newer, "does not know").await;

    assert!(store.get(&Key::tenant("alpha")).is_some());
    assert!(!files(dir.path()).iter().any(|file| file.contains("before-restore")), "nothing was replaced");
}

#[tokio::test]
async fn a_restore_waits_for_no_server() {
    let (_dir, database, _store) = store_with(&["alpha"]).await;
    let backup_dir = tempfile::tempdir().expect("a temporary directory");
    let backup = backup_dir.path().join("backup.db");
    backup_sqlite(&url(&database), &backup).await.expect("the backup is written");

    let lock = DatabaseLock::acquire(&url(&database)).expect("the lock is free");
    let message = refusal(restore_sqlite(&url(&database), &backup).await);
    assert!(message.contains("in use") && message.contains("stop it first"), "{message}");
    let second = refusal(DatabaseLock::acquire(&url(&database)));
    assert!(second.contains(&lock.path().display().to_string()), "{second}");
    drop(lock);
    restore_sqlite(&url(&database), &backup).await.expect("the restore goes on once the lock is free");
}

/// The mode bits of `path`.
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap_or_else(|err| panic!("{}: {err}", path.display())).permissions().mode()
        & 0o777
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("the mode is set");
}

#[tokio::test]
async fn the_database_a_backup_and_a_restored_copy_are_owner_only() {
    // The usual umask, which leaves new files readable by others: only the
    // store's own care makes its files private.
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o022));
    let (dir, database, store) = store_with(&["alpha"]).await;
    let wal = dir.path().join("cms.db-wal");
    let shm = dir.path().join("cms.db-shm");
    for file in [&database, &wal, &shm] {
        assert_eq!(mode(file), 0o600, "{} of a new store", file.display());
    }
    // Files an older version left readable are tightened at the next open.
    for file in [&database, &wal, &shm] {
        set_mode(file, 0o644);
    }
    let again = open(&database).await;
    for file in [&database, &wal, &shm] {
        assert_eq!(mode(file), 0o600, "{} after an open", file.display());
    }
    drop(again);

    let backup = dir.path().join("backup.db");
    backup_sqlite(&url(&database), &backup).await.expect("the backup is written");
    assert_eq!(mode(&backup), 0o600, "the backup");
    drop(store);

    set_mode(&backup, 0o644);
    let fresh = tempfile::tempdir().expect("a temporary directory");
    let data = fresh.path().join("data");
    let restored = data.join("cms.db");
    restore_sqlite(&url(&restored), &backup).await.expect("the restore succeeds");
    assert_eq!(mode(&restored), 0o600, "the restored copy, of a backup readable by others");
    assert_eq!(mode(&data), 0o700, "the folder the restore made");
}

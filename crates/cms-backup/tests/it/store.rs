use cms_backup::{BackupError, BackupStore, DirStore};

use crate::{collect, failing, stream_of};

fn files(dir: &std::path::Path) -> Vec<String> {
    let mut names = Vec::new();
    for entry in walk(dir) {
        names.push(entry.strip_prefix(dir).unwrap().display().to_string());
    }
    names.sort();
    names
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries
        .flat_map(|entry| {
            let path = entry.unwrap().path();
            if path.is_dir() { walk(&path) } else { vec![path] }
        })
        .collect()
}

#[tokio::test]
async fn objects_are_written_read_listed_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let store = DirStore::new(dir.path().join("backups"));
    assert_eq!(store.put("acme/1.etcd", stream_of(vec![b"ab".to_vec(), b"cd".to_vec()])).await.unwrap(), 4);
    store.put("acme/1.json", stream_of(vec![b"{}".to_vec()])).await.unwrap();
    store.put("acme2/1.json", stream_of(vec![b"{}".to_vec()])).await.unwrap();
    assert_eq!(collect(store.get("acme/1.etcd").await.unwrap()).await.unwrap(), b"abcd");
    assert_eq!(store.list("acme/").await.unwrap(), ["acme/1.etcd", "acme/1.json"]);
    assert_eq!(store.list("").await.unwrap(), ["acme/1.etcd", "acme/1.json", "acme2/1.json"]);
    assert!(store.list("nobody/").await.unwrap().is_empty());
    store.delete("acme/1.etcd").await.unwrap();
    store.delete("acme/1.etcd").await.unwrap();
    assert!(matches!(store.get("acme/1.etcd").await, Err(BackupError::NotFound(_))));
    let location = dir.path().join("backups").join("acme").join("1.etcd");
    assert_eq!(store.locate("acme/1.etcd"), location.display().to_string());
}

#[tokio::test]
async fn a_failed_write_leaves_nothing_and_keeps_the_old_object() {
    let dir = tempfile::tempdir().unwrap();
    let store = DirStore::new(dir.path());
    assert!(store.put("acme/1.etcd", failing(vec![b"half".to_vec()])).await.is_err());
    assert!(matches!(store.get("acme/1.etcd").await, Err(BackupError::NotFound(_))));
    assert!(store.list("").await.unwrap().is_empty());
    assert!(files(dir.path()).is_empty(), "left behind: {:?}", files(dir.path()));

    store.put("acme/1.etcd", stream_of(vec![b"old".to_vec()])).await.unwrap();
    assert!(store.put("acme/1.etcd", failing(vec![b"new".to_vec()])).await.is_err());
    assert_eq!(collect(store.get("acme/1.etcd").await.unwrap()).await.unwrap(), b"old");
    assert_eq!(files(dir.path()), ["acme/1.etcd"]);
}

#[tokio::test]
async fn keys_cannot_leave_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let store = DirStore::new(dir.path().join("inner"));
    for key in ["../x", "/etc/passwd", "a//b", "a/./b", "", "a/b c", "x.partial"] {
        let result = store.put(key, stream_of(vec![b"x".to_vec()])).await;
        assert!(matches!(result, Err(BackupError::InvalidKey(_))), "{key:?} was taken");
        assert!(matches!(store.get(key).await, Err(BackupError::InvalidKey(_))), "{key:?} was read");
    }
    assert!(files(dir.path()).is_empty());
}

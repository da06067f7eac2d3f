//! Where backups are kept: the [`BackupStore`] seam, objects named by keys
//! and written and read as streams of chunks, and [`DirStore`], a local
//! directory. [`crate::S3Store`] (`s3.rs`) keeps them in an S3-compatible
//! bucket; both follow the key rule of `check_key`.

use std::path::{Path, PathBuf};
use std::pin::Pin;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use tokio::io::AsyncWriteExt;
use tokio_util::io::ReaderStream;

use crate::error::BackupError;

/// An object's bytes as they are written or read, chunk by chunk.
pub type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, BackupError>> + Send>>;

/// A flat namespace of objects named by keys such as `acme/20261125t074211z.json`:
/// relative paths of segments made of ASCII letters, digits, `.`, `_` and `-`.
#[cfg_attr(any(test, feature = "testsuite"), mockall::automock)]
#[async_trait]
pub trait BackupStore: Send + Sync + 'static {
    /// Writes the object `key` from `data`, replacing any object of that key
    /// whole: readers see the old object or the new one, never part of one,
    /// and a `data` that fails leaves nothing behind. Gives the bytes written.
    async fn put(&self, key: &str, data: ByteStream) -> Result<u64, BackupError>;

    /// Reads the object `key`, streamed; [`BackupError::NotFound`] when none.
    async fn get(&self, key: &str) -> Result<ByteStream, BackupError>;

    /// The keys that start with `prefix`, sorted.
    async fn list(&self, prefix: &str) -> Result<Vec<String>, BackupError>;

    /// Removes the object `key`; removing one that does not exist is fine.
    async fn delete(&self, key: &str) -> Result<(), BackupError>;

    /// Where the object `key` lives, for people: a file's path or an
    /// `s3://` URL. Never a credential.
    fn locate(&self, key: &str) -> String;
}

/// The suffix of files being written, which [`DirStore::list`] skips.
const PARTIAL: &str = ".partial";

/// Refuses a key that is not a relative path of plain segments (ASCII
/// letters, digits, `.`, `_` and `-`, none of them `.` or `..`), or that
/// names a file being written: the rule of every store.
pub(crate) fn check_key(key: &str) -> Result<(), BackupError> {
    let plain = |segment: &str| {
        !segment.is_empty()
            && segment != "."
            && segment != ".."
            && segment.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    };
    match key.split('/').all(plain) && !key.ends_with(PARTIAL) {
        true => Ok(()),
        false => Err(BackupError::InvalidKey(key.to_string())),
    }
}

/// A [`BackupStore`] in a local directory: a key is a path under it. Each
/// object is written to a temporary file beside its place, flushed to disk,
/// then renamed into place.
#[derive(Debug, Clone)]
pub struct DirStore {
    root: PathBuf,
}

impl DirStore {
    /// A store under `root`, created when first written.
    pub fn new(root: impl Into<PathBuf>) -> DirStore {
        DirStore { root: root.into() }
    }

    /// The directory the objects live in.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The file of `key`, refusing keys that could leave the root.
    fn path(&self, key: &str) -> Result<PathBuf, BackupError> {
        check_key(key)?;
        Ok(self.root.join(key))
    }
}

#[async_trait]
impl BackupStore for DirStore {
    fn locate(&self, key: &str) -> String {
        self.root.join(key).display().to_string()
    }

    async fn put(&self, key: &str, mut data: ByteStream) -> Result<u64, BackupError> {
        let path = self.path(key)?;
        let dir = path.parent().unwrap_or(&self.root).to_path_buf();
        tokio::fs::create_dir_all(&dir).await?;
        let partial = dir.join(format!(".{}{PARTIAL}", uuid::Uuid::new_v4().simple()));
        let written = async {
            let mut file = tokio::fs::File::create(&partial).await?;
            let mut size = 0u64;
            while let Some(chunk) = data.next().await {
                let chunk = chunk?;
                file.write_all(&chunk).await?;
                size += chunk.len() as u64;
            }
            disk::sync(&file).await?;
            disk::rename(&partial, &path).await?;
            Ok::<u64, BackupError>(size)
        }
        .await;
        if written.is_err() {
            let _ = tokio::fs::remove_file(&partial).await;
        }
        let size = written?;
        // The rename is durable once the directory is flushed too.
        disk::sync_dir(&dir).await?;
        Ok(size)
    }

    async fn get(&self, key: &str) -> Result<ByteStream, BackupError> {
        let path = self.path(key)?;
        let file = match tokio::fs::File::open(&path).await {
            Ok(file) => file,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Err(BackupError::NotFound(key.to_string()));
            }
            Err(err) => return Err(err.into()),
        };
        Ok(Box::pin(
            ReaderStream::with_capacity(file, 64 * 1024).map(|chunk| chunk.map_err(BackupError::from)),
        ))
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, BackupError> {
        let root = self.root.clone();
        let prefix = prefix.to_string();
        let keys = tokio::task::spawn_blocking(move || walk(&root, &prefix))
            .await
            .map_err(|err| BackupError::Io(std::io::Error::other(err)))??;
        Ok(keys)
    }

    async fn delete(&self, key: &str) -> Result<(), BackupError> {
        match tokio::fs::remove_file(self.path(key)?).await {
            Ok(()) => Ok(()),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(err) => Err(err.into()),
        }
    }
}

/// The steps that make a [`DirStore`] write durable, each noted in order
/// for the unit tests (`tests::a_write_is_flushed_before_it_is_renamed`).
mod disk {
    use std::io;
    use std::path::Path;

    /// Flushes `file`'s data to disk.
    pub(super) async fn sync(file: &tokio::fs::File) -> io::Result<()> {
        file.sync_all().await?;
        note(Step::Sync);
        Ok(())
    }

    /// Renames `from` to `to`, replacing it.
    pub(super) async fn rename(from: &Path, to: &Path) -> io::Result<()> {
        tokio::fs::rename(from, to).await?;
        note(Step::Rename);
        Ok(())
    }

    /// Flushes the directory `dir`, so that a rename in it is durable.
    pub(super) async fn sync_dir(dir: &Path) -> io::Result<()> {
        tokio::fs::File::open(dir).await?.sync_all().await?;
        note(Step::SyncDir);
        Ok(())
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(super) enum Step {
        Sync,
        Rename,
        SyncDir,
    }

    #[cfg(test)]
    thread_local! {
        /// The steps taken on this thread, oldest first.
        pub(super) static STEPS: std::cell::RefCell<Vec<Step>> = const { std::cell::RefCell::new(Vec::new()) };
    }

    fn note(_step: Step) {
        #[cfg(test)]
        STEPS.with(|steps| steps.borrow_mut().push(_step));
    }
}

/// The keys under `root` that start with `prefix`, sorted, read from the
/// folder the prefix names down; files being written are left out.
fn walk(root: &Path, prefix: &str) -> Result<Vec<String>, BackupError> {
    let folder = prefix.rsplit_once('/').map_or("", |(folder, _)| folder);
    let mut keys = Vec::new();
    let mut pending = vec![(root.join(folder), folder.to_string())];
    while let Some((dir, key_dir)) = pending.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(err) => return Err(err.into()),
        };
        for entry in entries {
            let entry = entry?;
            let Ok(name) = entry.file_name().into_string() else { continue };
            let key = if key_dir.is_empty() { name.clone() } else { format!("{key_dir}/{name}") };
            if entry.file_type()?.is_dir() {
                pending.push((entry.path(), key));
            } else if !name.ends_with(PARTIAL) && key.starts_with(prefix) {
                keys.push(key);
            }
        }
    }
    keys.sort();
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;
    use disk::{STEPS, Step};

    #[tokio::test]
    async fn a_write_is_flushed_before_it_is_renamed() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirStore::new(dir.path());
        STEPS.with(|steps| steps.borrow_mut().clear());
        let data: ByteStream = Box::pin(futures_util::stream::iter([Ok(Bytes::from_static(b"snapshot"))]));
        store.put("acme/1.etcd", data).await.unwrap();
        let steps = STEPS.with(|steps| steps.borrow().clone());
        assert_eq!(
            steps,
            [Step::Sync, Step::Rename, Step::SyncDir],
            "the file is flushed, renamed, then its directory flushed"
        );
        assert_eq!(std::fs::read(dir.path().join("acme/1.etcd")).unwrap(), b"snapshot");
    }
}

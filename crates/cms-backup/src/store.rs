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
            file.sync_all().await?;
            tokio::fs::rename(&partial, &path).await?;
            Ok::<u64, BackupError>(size)
        }
        .await;
        if written.is_err() {
            let _ = tokio::fs::remove_file(&partial).await;
        }
        let size = written?;
        // The rename is durable once the directory is flushed too.
        tokio::fs::File::open(&dir).await?.sync_all().await?;
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

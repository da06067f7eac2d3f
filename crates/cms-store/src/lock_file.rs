//! [`DatabaseLock`]: the file lock that tells a process using the embedded
//! database from one about to replace it.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

use crate::backup::{beside, file_error, sqlite_file};
use crate::error::StoreError;

/// An exclusive lock on the embedded database: the file `<database>.lock`,
/// locked with the operating system's advisory lock, which is released when
/// this value drops or its process ends, however it ends. A server holds it
/// while it runs, and a restore while it replaces the database, so neither
/// starts while the other goes on. SQLite's own locks do not tell, since a
/// server holds none between its writes.
#[derive(Debug)]
pub struct DatabaseLock {
    _file: File,
    path: PathBuf,
}

impl DatabaseLock {
    /// Takes the lock of the SQLite database of `url`, or fails at once
    /// with [`StoreError::Refused`] when another process holds it. The
    /// database's folder must exist.
    pub fn acquire(url: &str) -> Result<DatabaseLock, StoreError> {
        let database = sqlite_file(url)?;
        let path = beside(&database, ".lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(file_error("open", &path))?;
        match file.try_lock() {
            Ok(()) => Ok(DatabaseLock { _file: file, path }),
            Err(TryLockError::WouldBlock) => Err(StoreError::Refused(format!(
                "{} is in use: a cms-server (or a restore) running on it holds {}; stop it first",
                database.display(),
                path.display()
            ))),
            Err(TryLockError::Error(err)) => Err(file_error("lock", &path)(err)),
        }
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

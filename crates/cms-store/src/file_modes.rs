//! Owner-only modes for the embedded database's files, whatever the
//! process's umask: the database and its `-wal` and `-shm` files (SQLite
//! gives the ones it creates the database's mode), a backup and a restored
//! copy are 0600, and a directory made for the database is 0700.

use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use crate::backup::{beside, file_error};
use crate::error::StoreError;

/// The mode of every database file: read and write for the owner only.
pub(crate) const PRIVATE_FILE_MODE: u32 = 0o600;
/// The mode of a directory made for the database.
const PRIVATE_DIR_MODE: u32 = 0o700;

/// Gives the database `path` and its `-wal` and `-shm` files, those that
/// exist, the mode 0600. A file this user may not change is left as it is,
/// with a warning: the server can still work on it.
pub(crate) fn restrict_database(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let file = beside(path, suffix);
        let mode = match std::fs::metadata(&file) {
            Ok(metadata) => metadata.permissions().mode() & 0o777,
            Err(_) => continue,
        };
        if mode == PRIVATE_FILE_MODE {
            continue;
        }
        if let Err(err) = std::fs::set_permissions(&file, Permissions::from_mode(PRIVATE_FILE_MODE)) {
            tracing::warn!(
                file = %file.display(),
                mode = format!("{mode:o}"),
                error = %err,
                "could not make a database file readable by its owner only"
            );
        }
    }
}

/// A new, empty file at `path` with the mode 0600; fails if it exists.
pub(crate) fn create_private(path: &Path) -> Result<File, StoreError> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(PRIVATE_FILE_MODE)
        .open(path)
        .map_err(file_error("create", path))
}

/// Creates the directory `dir` and its missing parents with the mode 0700.
pub(crate) fn create_private_dir(dir: &Path) -> Result<(), StoreError> {
    match DirBuilder::new().recursive(true).mode(PRIVATE_DIR_MODE).create(dir) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(err) => Err(file_error("create", dir)(err)),
    }
}

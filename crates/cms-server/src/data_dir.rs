//! What the server writes is its own: the process's umask is 077, set
//! first thing, so every file and directory it makes (the database and its
//! `-wal` and `-shm`, the key file, workspaces, backups) is readable by its
//! user only; and the data directory is created with the mode 0700, or, if
//! it exists with a looser mode, tightened to 0700. One that this user may
//! not change (it belongs to another) is left as it is with a warning: the
//! files in it are owner-only all the same.

use std::fs::{DirBuilder, Permissions};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;

use anyhow::Context;
use nix::sys::stat::{Mode, umask};

/// The mode of the data directory.
const DATA_DIR_MODE: u32 = 0o700;

/// Makes every file the process creates from now on owner-only.
pub(crate) fn private_umask() {
    umask(Mode::from_bits_truncate(0o077));
}

/// Creates the data directory `dir` with the mode 0700, or tightens an
/// existing one to it. A warning to show when the mode could not be
/// tightened.
pub(crate) fn prepare(dir: &Path) -> anyhow::Result<Option<String>> {
    DirBuilder::new()
        .recursive(true)
        .mode(DATA_DIR_MODE)
        .create(dir)
        .with_context(|| format!("could not create the data directory {}", dir.display()))?;
    let mode = std::fs::metadata(dir)
        .with_context(|| format!("could not read the data directory {}", dir.display()))?
        .permissions()
        .mode()
        & 0o777;
    if mode & !DATA_DIR_MODE == 0 {
        return Ok(None);
    }
    match std::fs::set_permissions(dir, Permissions::from_mode(mode & DATA_DIR_MODE)) {
        Ok(()) => Ok(None),
        Err(err) => Ok(Some(format!(
            "the data directory {} has the mode {mode:o}, which lets other users in, and could not be \
             tightened to {DATA_DIR_MODE:o} ({err}); its files are readable by their owner only",
            dir.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn the_data_directory_is_created_or_tightened_to_0700() {
        let root = tempfile::tempdir().unwrap();
        let fresh = root.path().join("a").join("data");
        assert_eq!(prepare(&fresh).unwrap(), None);
        assert_eq!(mode(&fresh), 0o700);
        let loose = root.path().join("loose");
        std::fs::create_dir(&loose).unwrap();
        std::fs::set_permissions(&loose, Permissions::from_mode(0o755)).unwrap();
        assert_eq!(prepare(&loose).unwrap(), None);
        assert_eq!(mode(&loose), 0o700);
        std::fs::set_permissions(&loose, Permissions::from_mode(0o500)).unwrap();
        assert_eq!(prepare(&loose).unwrap(), None, "a tighter mode is left alone");
        assert_eq!(mode(&loose), 0o500);
    }
}

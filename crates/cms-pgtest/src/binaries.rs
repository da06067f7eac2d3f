//! Finding the PostgreSQL server binaries.

use std::path::{Path, PathBuf};

/// The variable that names the directory of `initdb`, `postgres` and
/// `createdb`.
pub const BIN_VARIABLE: &str = "CMS_TEST_PG_BIN";

const NEEDED: [&str; 3] = ["initdb", "postgres", "createdb"];

/// The directory that holds `initdb`, `postgres` and `createdb`. Panics,
/// saying how to get them, when there is none.
pub fn find_binaries() -> PathBuf {
    if let Some(dir) = std::env::var_os(BIN_VARIABLE) {
        let dir = PathBuf::from(dir);
        if complete(&dir) {
            return dir;
        }
        panic!("{BIN_VARIABLE}={} does not hold {}", dir.display(), NEEDED.join(", "));
    }
    candidates().into_iter().find(|dir| complete(dir)).unwrap_or_else(|| {
        panic!(
            "the PostgreSQL server binaries ({}) were not found on PATH, in {BIN_VARIABLE} or in \
             /usr/lib/postgresql/*/bin: install PostgreSQL (for example `apt-get install -y \
             postgresql`) or set {BIN_VARIABLE} to their directory; `.ci/run` does both",
            NEEDED.join(", ")
        )
    })
}

/// A PostgreSQL client tool such as `psql` or `pgbench`: beside the server
/// binaries when it is there, else the name alone, for `PATH`.
pub fn client_tool(name: &str) -> PathBuf {
    let beside = find_binaries().join(name);
    if beside.is_file() { beside } else { PathBuf::from(name) }
}

fn complete(dir: &Path) -> bool {
    NEEDED.iter().all(|name| dir.join(name).is_file())
}

/// Where to look, best first: the real directory of an `initdb` on `PATH`
/// (which is often a symbolic link into the versioned directory), then the
/// versioned directories of Debian and Ubuntu, newest first.
fn candidates() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
        if let Ok(initdb) = std::fs::canonicalize(dir.join("initdb"))
            && let Some(parent) = initdb.parent()
        {
            dirs.push(parent.to_path_buf());
        }
    }
    let mut versioned: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .collect();
    versioned.sort_by_key(|(version, _)| std::cmp::Reverse(*version));
    dirs.extend(versioned.into_iter().map(|(_, dir)| dir));
    dirs
}

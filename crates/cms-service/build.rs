//! Records what `/version` reports: the git commit, read straight from the
//! repository's files (no process is spawned), and the build time, taken from
//! `SOURCE_DATE_EPOCH` when set so that builds can be reproducible.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

fn main() {
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    println!("cargo:rerun-if-env-changed=CMS_VERSION");
    println!("cargo:rerun-if-changed=build.rs");

    let version = env::var("CMS_VERSION")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| env::var("CARGO_PKG_VERSION").unwrap_or_default());
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let commit = git_commit(&manifest_dir).unwrap_or_else(|| "unknown".to_string());

    println!("cargo:rustc-env=CMS_BUILD_VERSION={version}");
    println!("cargo:rustc-env=CMS_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=CMS_BUILD_TIME={}", build_time());
}

/// Where a repository keeps its files: `HEAD` lives in `git_dir`, refs and
/// `packed-refs` in `common_dir` (the two differ in a linked worktree).
struct GitDirs {
    git_dir: PathBuf,
    common_dir: PathBuf,
}

/// Finds the commit that `HEAD` points at, telling cargo which files to watch.
fn git_commit(start: &Path) -> Option<String> {
    let dirs = find_git_dirs(start)?;
    let head_path = dirs.git_dir.join("HEAD");
    watch(&head_path);
    let head = fs::read_to_string(&head_path).ok()?;
    let head = head.trim();
    let Some(reference) = head.strip_prefix("ref:") else {
        return valid_hash(head);
    };
    let reference = reference.trim();

    let loose = dirs.common_dir.join(reference);
    let packed = dirs.common_dir.join("packed-refs");
    if packed.is_file() {
        watch(&packed);
    }
    if loose.is_file() {
        watch(&loose);
        return valid_hash(fs::read_to_string(&loose).ok()?.trim());
    }
    // The ref is packed, or the branch has no commit yet. A new loose ref
    // would appear in this directory, so watch it rather than a missing file
    // (a missing file makes cargo rerun the script on every build).
    if let Some(parent) = loose.parent().filter(|parent| parent.is_dir()) {
        watch(parent);
    }
    let packed_refs = fs::read_to_string(&packed).ok()?;
    packed_refs
        .lines()
        .filter(|line| !line.starts_with('#') && !line.starts_with('^'))
        .filter_map(|line| line.split_once(' '))
        .find(|(_, name)| name.trim() == reference)
        .and_then(|(hash, _)| valid_hash(hash))
}

/// Walks up from `start` to the first `.git`, a directory or (in a linked
/// worktree or submodule) a file that names the real directory.
fn find_git_dirs(start: &Path) -> Option<GitDirs> {
    for dir in start.ancestors() {
        let dot_git = dir.join(".git");
        if dot_git.is_dir() {
            return Some(GitDirs { common_dir: common_dir(&dot_git), git_dir: dot_git });
        }
        if dot_git.is_file() {
            watch(&dot_git);
            let text = fs::read_to_string(&dot_git).ok()?;
            let target = text.trim().strip_prefix("gitdir:")?.trim();
            let git_dir = dir.join(target);
            return Some(GitDirs { common_dir: common_dir(&git_dir), git_dir });
        }
    }
    None
}

/// The directory that holds refs: named by a `commondir` file when present.
fn common_dir(git_dir: &Path) -> PathBuf {
    match fs::read_to_string(git_dir.join("commondir")) {
        Ok(text) => git_dir.join(text.trim()),
        Err(_) => git_dir.to_path_buf(),
    }
}

fn valid_hash(text: &str) -> Option<String> {
    let text = text.trim();
    let hex = text.bytes().all(|b| b.is_ascii_hexdigit());
    (hex && (text.len() == 40 || text.len() == 64)).then(|| text.to_ascii_lowercase())
}

fn watch(path: &Path) {
    println!("cargo:rerun-if-changed={}", path.display());
}

/// The build time as an ISO 8601 UTC timestamp.
fn build_time() -> String {
    let seconds =
        env::var("SOURCE_DATE_EPOCH").ok().and_then(|value| value.trim().parse::<u64>().ok()).unwrap_or_else(
            || SystemTime::now().duration_since(UNIX_EPOCH).map(|elapsed| elapsed.as_secs()).unwrap_or(0),
        );
    let days = seconds / 86_400;
    let rest = seconds % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rest / 3600, rest % 3600 / 60, rest % 60)
}

/// Turns days since 1970-01-01 into a proleptic Gregorian date (Howard
/// Hinnant's `civil_from_days`, for non-negative day counts).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

//! The tool's own state lock, as the engine holds it.
//!
//! Local backend: while a run holds the lock, the engine keeps
//! `.terraform.tfstate.lock.info` (JSON: `ID`, `Operation`, `Who`,
//! `Created`) in the workspace; [`Tofu::engine_lock`] reads it and
//! [`Tofu::force_unlock`] runs `force-unlock -force <ID>`, or removes the
//! file when the engine finds no lock to release.
//!
//! `pg` backend: the lock is a session advisory lock of the run's
//! connection, keyed by the state's row id in `<schema>.states`. The ids of
//! every tenant's schema start at 1, so the key alone does not say whose it
//! is: each run's connection string names it instead, in
//! `application_name` ([`application_name`]): the tenant's schema and the
//! replica. `pg_stat_activity` and `pg_locks` then show who holds which
//! lock, and since when (the store reads them).

use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::driver::state_schema;
use crate::user_data::UserData;
use crate::{Tofu, TofuError};

/// The lock file the engine keeps beside a local state while it holds it.
pub const LOCK_INFO_FILE: &str = ".terraform.tfstate.lock.info";

/// The local state, whose lock the engine holds with `fcntl`.
const STATE_FILE: &str = "terraform.tfstate";

/// The longest `application_name` PostgreSQL keeps, in bytes.
const APPLICATION_NAME: usize = 63;

/// The engine's own record of a held local lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineLock {
    /// The lock's id, which `force-unlock` takes.
    pub id: String,
    /// The operation that took it, such as `OperationTypeApply`.
    pub operation: String,
    /// `user@host` of the process that took it.
    pub who: String,
    /// When it was taken, if the engine said.
    pub created: Option<DateTime<Utc>>,
    /// The live process that holds the state file's lock (`/proc/locks`),
    /// if any: none for a file a dead run left behind.
    pub pid: Option<u32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct LockInfo {
    #[serde(rename = "ID")]
    id: String,
    #[serde(default)]
    operation: String,
    #[serde(default)]
    who: String,
    #[serde(default)]
    created: Option<DateTime<Utc>>,
}

/// Parses the engine's lock file; `None` for anything that is not one, or
/// whose id is not the engine's (a UUID's characters, at most 64).
pub fn parse_lock_info(text: &str) -> Option<EngineLock> {
    let info: LockInfo = serde_json::from_str(text).ok()?;
    let valid = !info.id.is_empty()
        && info.id.len() <= 64
        && info.id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    valid.then(|| EngineLock {
        id: info.id,
        operation: bounded(&info.operation),
        who: bounded(&info.who),
        created: info.created,
        pid: None,
    })
}

/// The process holding a lock on the file of inode `inode`, as a line of
/// `/proc/locks` says (`1: POSIX  ADVISORY  WRITE <pid> <maj>:<min>:<inode>
/// 0 EOF`); waiters (`->`) are not holders.
pub fn lock_holder(proc_locks: &str, inode: u64) -> Option<u32> {
    proc_locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.get(1) == Some(&"->") {
            return None;
        }
        let file = fields.get(5)?.rsplit(':').next()?.parse::<u64>().ok()?;
        (file == inode).then(|| fields.get(4)?.parse().ok()).flatten()
    })
}

fn bounded(text: &str) -> String {
    text.chars().filter(|c| !c.is_control()).take(120).collect()
}

/// A replica's short name in an `application_name`: what follows the host
/// in `<host>/<pid>/<random>`, at most 21 characters, of `[0-9A-Za-z/_-]`.
pub fn holder_tag(holder: &str) -> String {
    let rest = holder.split_once('/').map_or(holder, |(_, rest)| rest);
    rest.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '-')).take(21).collect()
}

/// The `application_name` of a tenant's runs by `holder`:
/// `<schema> <holder tag>`, at most 63 bytes, so that PostgreSQL keeps it
/// whole.
pub fn application_name(tenant: &str, holder: &str) -> String {
    let mut name = format!("{}{}", application_prefix(tenant), holder_tag(holder));
    name.truncate(APPLICATION_NAME);
    name
}

/// What every `application_name` of a tenant's runs starts with: its
/// schema and a space.
pub fn application_prefix(tenant: &str) -> String {
    format!("{} ", state_schema(tenant))
}

/// `url` with `application_name` set to `name` (of URL-safe characters
/// only), replacing any it had.
pub(crate) fn with_application_name(url: &str, name: &str) -> String {
    let encoded = name.replace(' ', "%20");
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut params: Vec<&str> =
        query.split('&').filter(|p| !p.is_empty() && !p.starts_with("application_name=")).collect();
    let named = format!("application_name={encoded}");
    params.push(&named);
    format!("{base}?{}", params.join("&"))
}

/// Names the run's connection in the tool's environment, when it has one.
pub(crate) fn name_connection(env: &mut [(String, String)], tenant: &str, holder: Option<&str>) {
    let Some(holder) = holder else { return };
    for (name, value) in env.iter_mut() {
        if name == "PG_CONN_STR" {
            *value = with_application_name(value, &application_name(tenant, holder));
        }
    }
}

impl Tofu {
    /// This driver, naming its runs' connections after `holder` (a
    /// replica's id), so that the database shows which replica holds a
    /// tenant's state lock.
    pub fn with_holder(mut self, holder: impl Into<String>) -> Tofu {
        self.holder = Some(holder.into());
        self
    }

    /// The engine's record of a local lock held on a tenant's state, if
    /// its workspace has one.
    pub async fn engine_lock(&self, tenant: &str) -> Option<EngineLock> {
        let dir = self.workspace_dir(tenant);
        let text = tokio::fs::read_to_string(dir.join(LOCK_INFO_FILE)).await.ok()?;
        let mut lock = parse_lock_info(&text)?;
        let locks = tokio::fs::read_to_string("/proc/locks").await.unwrap_or_default();
        for file in [STATE_FILE, LOCK_INFO_FILE] {
            if let Ok(metadata) = tokio::fs::metadata(dir.join(file)).await {
                lock.pid =
                    lock.pid.or_else(|| lock_holder(&locks, std::os::unix::fs::MetadataExt::ino(&metadata)));
            }
        }
        Some(lock)
    }

    /// Releases the local lock `lock` on a tenant's state: with
    /// `force-unlock -force` while a process holds it, and then, or when
    /// none does (a run that died left the file), by removing the lock
    /// file. Waits for this driver's own run on the tenant, if any, to end
    /// first.
    pub async fn force_unlock(&self, tenant: &str, lock: &EngineLock) -> Result<(), TofuError> {
        let guard = self.lock(tenant);
        let _held = guard.lock().await;
        let args = vec!["force-unlock".to_string(), "-force".into(), "-no-color".into(), lock.id.clone()];
        let path = self.workspace_dir(tenant).join(LOCK_INFO_FILE);
        if lock.pid.is_some()
            && let Err(err) = self.checked(tenant, args, &UserData::default()).await
        {
            tracing::warn!(tenant, "force-unlock failed, removing the lock file: {err}");
        }
        match tokio::fs::remove_file(&path).await {
            Err(source) if source.kind() != std::io::ErrorKind::NotFound => {
                Err(TofuError::Workspace { path, source })
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_lock_file_is_read_and_hostile_ids_refused() {
        let text = r#"{"ID":"8f0e-11aa","Operation":"OperationTypeApply","Info":"","Who":"cms@host",
            "Version":"1.9.0","Created":"2026-01-02T03:04:05.123Z","Path":"terraform.tfstate"}"#;
        let lock = parse_lock_info(text).unwrap();
        assert_eq!(
            (lock.id.as_str(), lock.operation.as_str(), lock.who.as_str()),
            ("8f0e-11aa", "OperationTypeApply", "cms@host")
        );
        assert_eq!(lock.created.unwrap().to_rfc3339(), "2026-01-02T03:04:05.123+00:00");
        assert_eq!(lock.pid, None);
        assert_eq!(parse_lock_info(r#"{"ID":"-lock=false; rm"}"#), None);
        assert_eq!(parse_lock_info(r#"{"ID":""}"#), None);
        assert_eq!(parse_lock_info("garbage"), None);
    }

    #[test]
    fn the_holder_of_a_files_lock_is_read_from_proc_locks() {
        let locks = "1: POSIX  ADVISORY  WRITE 3133 fd:01:1312 0 EOF\n\
                     1: -> POSIX  ADVISORY  WRITE 4000 fd:01:77 0 EOF\n\
                     2: FLOCK  ADVISORY  WRITE 812 00:1a:77 0 EOF\n";
        assert_eq!(lock_holder(locks, 1312), Some(3133));
        assert_eq!(lock_holder(locks, 77), Some(812));
        assert_eq!(lock_holder(locks, 5), None);
        assert_eq!(lock_holder("garbage\n", 5), None);
    }

    #[test]
    fn the_application_name_names_schema_and_replica_within_63_bytes() {
        let holder = "a-very-long-host-name/123456/0123456789abcdef0123456789abcdef";
        let name = application_name("acme", holder);
        assert!(name.starts_with(&application_prefix("acme")));
        assert!(name.len() <= 63);
        assert_eq!(name, format!("{} 123456/0123456789abcd", state_schema("acme")));
        assert_eq!(holder_tag("h/1/x y;'z"), "1/xyz");
    }

    #[test]
    fn the_connection_string_gains_the_application_name() {
        let mut env = vec![
            ("PG_CONN_STR".to_string(), "postgres://u:p@h/db?sslmode=disable&application_name=x".to_string()),
            ("OTHER".to_string(), "postgres://keep".to_string()),
        ];
        name_connection(&mut env, "acme", Some("host/7/abc"));
        let expected =
            format!("postgres://u:p@h/db?sslmode=disable&application_name={}%207/abc", state_schema("acme"));
        assert_eq!(env[0].1, expected);
        assert_eq!(env[1].1, "postgres://keep");
        assert_eq!(with_application_name("postgres://h/db", "n"), "postgres://h/db?application_name=n");
    }
}

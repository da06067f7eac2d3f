//! Saved logins ("contexts") and where the server and the token come from.
//!
//! The context file is YAML at `$CMS_CONFIG`, else
//! `$XDG_CONFIG_HOME/cms/config.yaml`, else `~/.config/cms/config.yaml`, and is
//! written with mode 0600 since it holds tokens. Precedence, per setting:
//! the flag, then the environment (`CMS_SERVER`, `SERVICE_TOKEN`), then the
//! context, then the default server `http://localhost:8080`.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, anyhow};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::cli::Global;

/// The server used when nothing names one.
pub(crate) const DEFAULT_SERVER: &str = "http://localhost:8080";
/// The context written by `cms login` unless `--context` names another.
const DEFAULT_CONTEXT: &str = "default";

/// The context file.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ContextFile {
    #[serde(default)]
    pub(crate) current_context: Option<String>,
    #[serde(default)]
    pub(crate) contexts: Vec<SavedContext>,
}

/// One saved login.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SavedContext {
    pub(crate) name: String,
    pub(crate) server: String,
    #[serde(default)]
    pub(crate) user: Option<String>,
    #[serde(default)]
    pub(crate) token: Option<String>,
    #[serde(default)]
    pub(crate) expires_at: Option<DateTime<Utc>>,
}

/// What a command talks to, once flags, environment and context are merged.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    pub(crate) server: String,
    pub(crate) token: Option<String>,
    /// The user of the saved context, when the token came from it.
    pub(crate) user: Option<String>,
}

/// The path of the context file.
pub(crate) fn path() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("CMS_CONFIG").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let base = match std::env::var_os("XDG_CONFIG_HOME").filter(|p| !p.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            let home =
                std::env::var_os("HOME").ok_or_else(|| anyhow!("neither CMS_CONFIG nor HOME is set"))?;
            PathBuf::from(home).join(".config")
        }
    };
    Ok(base.join("cms").join("config.yaml"))
}

impl ContextFile {
    /// Reads the file; a missing file is an empty one.
    pub(crate) fn load(path: &Path) -> Result<ContextFile> {
        match fs::read_to_string(path) {
            Ok(text) if text.trim().is_empty() => Ok(ContextFile::default()),
            Ok(text) => serde_saphyr::from_str(&text)
                .with_context(|| format!("reading the context file {}", path.display())),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(ContextFile::default()),
            Err(err) => Err(err).with_context(|| format!("reading the context file {}", path.display())),
        }
    }

    /// Writes the file with mode 0600, replacing it whole.
    pub(crate) fn save(&self, path: &Path) -> Result<()> {
        let text = serde_saphyr::to_string(self).context("encoding the context file")?;
        write_private(path, text.as_bytes())
    }

    /// The context named `name`, else the current one.
    pub(crate) fn find(&self, name: Option<&str>) -> Option<&SavedContext> {
        let name = name.or(self.current_context.as_deref())?;
        self.contexts.iter().find(|context| context.name == name)
    }

    /// Adds or replaces a context and makes it the current one.
    pub(crate) fn upsert(&mut self, context: SavedContext) {
        self.current_context = Some(context.name.clone());
        match self.contexts.iter_mut().find(|c| c.name == context.name) {
            Some(slot) => *slot = context,
            None => self.contexts.push(context),
        }
    }
}

/// The name `cms login` saves under.
pub(crate) fn login_context_name(global: &Global) -> String {
    global.context.clone().unwrap_or_else(|| DEFAULT_CONTEXT.to_string())
}

/// Merges flags, environment and the saved context.
/// `for_login` allows a `--context` that does not exist yet: login creates it.
pub(crate) fn resolve(global: &Global, for_login: bool) -> Result<Resolved> {
    let file = ContextFile::load(&path()?)?;
    let saved = file.find(global.context.as_deref());
    if let (Some(name), None, false) = (&global.context, saved, for_login) {
        return Err(crate::failure::usage(format!(
            "no saved context named {name:?}; run `cms login --context {name}`"
        )));
    }
    let env = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
    let server = global
        .server
        .clone()
        .or_else(|| env("CMS_SERVER"))
        .or_else(|| saved.map(|context| context.server.clone()))
        .unwrap_or_else(|| DEFAULT_SERVER.to_string());
    let explicit = global.token.clone().or_else(|| env("SERVICE_TOKEN"));
    let (token, user) = match explicit {
        Some(token) => (Some(token), None),
        // A saved token belongs to its server: never send it to another one.
        None => match saved.filter(|context| same_server(&context.server, &server)) {
            Some(context) => (context.token.clone(), context.user.clone()),
            None => (None, None),
        },
    };
    Ok(Resolved { server, token, user })
}

fn same_server(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

/// Writes `bytes` to `path` with mode 0600, through a temporary file in the
/// same folder so that readers never see half a file.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let file_name = path.file_name().ok_or_else(|| anyhow!("{} is not a file path", path.display()))?;
    let temporary = dir.join(format!(".{}.tmp-{}", file_name.to_string_lossy(), std::process::id()));
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)
        .with_context(|| format!("writing {}", temporary.display()))?;
    file.set_permissions(fs::Permissions::from_mode(0o600))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing {}", temporary.display()))?;
    fs::rename(&temporary, path).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contexts_round_trip_and_the_file_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested").join("config.yaml");
        let mut file = ContextFile::default();
        let context = |name: &str, server: &str| SavedContext {
            name: name.into(),
            server: server.into(),
            user: Some("admin".into()),
            token: Some("t".into()),
            expires_at: None,
        };
        file.upsert(context("a", "http://a"));
        file.upsert(context("b", "http://b"));
        file.upsert(context("a", "http://a2"));
        file.save(&path).unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let loaded = ContextFile::load(&path).unwrap();
        assert_eq!(loaded.contexts.len(), 2);
        assert_eq!(loaded.find(None).unwrap().server, "http://a2");
        assert_eq!(loaded.find(Some("b")).unwrap().server, "http://b");
    }
}

//! Running the tool: the one constructor of the workspace that spawns a
//! process, a timeout that signals the whole process group (SIGTERM, then
//! SIGKILL after a grace period), and the collected output.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;

use crate::TofuError;

/// The environment variables of the service that the tool inherits; the
/// rest of its environment is set explicitly.
const INHERITED: [&str; 10] = [
    "PATH",
    "HOME",
    "TMPDIR",
    "LANG",
    "LC_ALL",
    "TF_CLI_CONFIG_FILE",
    "TF_PLUGIN_CACHE_DIR",
    "TF_LOG",
    "TF_LOG_PATH",
    // Terraform's version check over the network, off when set.
    "CHECKPOINT_DISABLE",
];

/// One run of the tool.
#[derive(Clone, PartialEq)]
pub struct Invocation {
    pub binary: PathBuf,
    pub dir: PathBuf,
    pub args: Vec<String>,
    /// Set on top of the inherited variables; may hold credentials.
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
    /// How long the process group has between SIGTERM and SIGKILL.
    pub grace: Duration,
}

impl std::fmt::Debug for Invocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Invocation")
            .field("binary", &self.binary)
            .field("dir", &self.dir)
            .field("args", &self.args)
            .field("env", &self.env.iter().map(|(name, _)| name).collect::<Vec<_>>())
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Invocation {
    /// `binary arg...`, for messages.
    pub fn describe(&self) -> String {
        let name = self.binary.file_name().map(|name| name.to_string_lossy()).unwrap_or_default();
        format!("{name} {}", self.args.first().map(String::as_str).unwrap_or_default())
    }
}

/// What a finished run printed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Output {
    /// The exit code; `None` when a signal ended the process.
    pub code: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Output {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// The only place in the workspace that makes a `Command`: the child gets a
/// process group of its own, so that a timeout reaches its children too.
/// Where util-linux's `setpriv` is installed, the tool runs under
/// `setpriv --pdeathsig KILL`, which `exec`s it in place: a run dies with
/// the server, even one killed with SIGKILL, so that no orphaned run goes
/// on beside the one another replica starts after taking the tenant over.
#[allow(clippy::disallowed_methods)]
fn command(binary: &Path) -> std::process::Command {
    use std::os::unix::process::CommandExt;
    let mut command = match setpriv() {
        Some(setpriv) => {
            let mut command = std::process::Command::new(setpriv);
            command.args(["--pdeathsig", "KILL", "--"]).arg(binary);
            command
        }
        None => std::process::Command::new(binary),
    };
    command.process_group(0);
    command
}

/// `setpriv` on `PATH`, looked up once.
fn setpriv() -> Option<&'static Path> {
    static SETPRIV: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    SETPRIV
        .get_or_init(|| {
            let found = std::env::var_os("PATH").and_then(|path| {
                std::env::split_paths(&path)
                    .map(|dir| dir.join("setpriv"))
                    .find(|candidate| candidate.is_file())
            });
            if found.is_none() {
                tracing::warn!(
                    "setpriv is not on PATH: a tool run would outlive a server killed with SIGKILL"
                );
            }
            found
        })
        .as_deref()
}

/// Runs `invocation` to completion or to its timeout.
pub(crate) async fn run(invocation: &Invocation) -> Result<Output, TofuError> {
    let mut command = command(&invocation.binary);
    command
        .args(&invocation.args)
        .current_dir(&invocation.dir)
        .env_clear()
        .envs(INHERITED.iter().filter_map(|name| std::env::var(name).ok().map(|value| (*name, value))))
        .envs(invocation.env.iter().map(|(name, value)| (name.as_str(), value.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut command = tokio::process::Command::from(command);
    command.kill_on_drop(true);
    let mut child = command
        .spawn()
        .map_err(|source| TofuError::Spawn { binary: invocation.binary.display().to_string(), source })?;
    let group = child.id().and_then(|id| i32::try_from(id).ok()).map(Pid::from_raw);
    let stdout = child.stdout.take().map(collect);
    let stderr = child.stderr.take().map(collect);

    let waited = tokio::time::timeout(invocation.timeout, child.wait()).await;
    let code = match waited {
        Ok(status) => {
            // Whatever the tool left running in its group goes with it.
            signal_group(group, Signal::SIGKILL);
            status.map_err(|source| TofuError::Spawn { binary: invocation.describe(), source })?.code()
        }
        Err(_) => {
            tracing::warn!(command = %invocation.describe(), "tool run timed out; stopping its process group");
            signal_group(group, Signal::SIGTERM);
            if tokio::time::timeout(invocation.grace, child.wait()).await.is_err() {
                signal_group(group, Signal::SIGKILL);
            }
            signal_group(group, Signal::SIGKILL);
            let _ = child.wait().await;
            return Err(TofuError::TimedOut { command: invocation.describe(), timeout: invocation.timeout });
        }
    };
    let stdout = finish(stdout).await;
    let stderr = finish(stderr).await;
    Ok(Output { code, stdout, stderr })
}

fn signal_group(group: Option<Pid>, signal: Signal) {
    if let Some(group) = group {
        // ESRCH: the group is already gone.
        let _ = killpg(group, signal);
    }
}

fn collect<R: tokio::io::AsyncRead + Unpin + Send + 'static>(
    mut reader: R,
) -> tokio::task::JoinHandle<Vec<u8>> {
    tokio::spawn(async move {
        let mut buffer = Vec::new();
        let _ = reader.read_to_end(&mut buffer).await;
        buffer
    })
}

async fn finish(handle: Option<tokio::task::JoinHandle<Vec<u8>>>) -> Vec<u8> {
    let Some(handle) = handle else { return Vec::new() };
    // A process that escaped the group may hold the pipe open; do not wait for it.
    match tokio::time::timeout(Duration::from_secs(5), handle).await {
        Ok(Ok(buffer)) => buffer,
        _ => Vec::new(),
    }
}

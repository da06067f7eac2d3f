//! Running `cms-server`'s one-shot commands (`backup`, `restore`) as an
//! operator would: on a data directory, with a server's options, bounded in
//! time.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::binary::server_binary;
use crate::server::{DataDir, ServerOptions};

/// The longest one command may run.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

/// How one command ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The exit code; `None` when a signal ended the process.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Outcome {
    /// Asserts success and returns standard output.
    #[track_caller]
    pub fn ok(&self) -> &str {
        assert_eq!(self.code, Some(0), "the command failed\n{self}");
        &self.stdout
    }

    /// Asserts failure and returns standard error.
    #[track_caller]
    pub fn failed(&self) -> &str {
        assert!(self.code.is_some_and(|code| code != 0), "the command should have failed\n{self}");
        &self.stderr
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "--- exit {:?}\n--- stdout\n{}--- stderr\n{}---", self.code, self.stdout, self.stderr)
    }
}

/// Runs `cms-server <args>` on `data_dir` with the environment `options`
/// give a server there (and no other `CMS_*` variable), from the data
/// directory's parent.
pub async fn server_command(options: &ServerOptions, data_dir: &DataDir, args: &[&str]) -> Outcome {
    let mut command = command(options, data_dir.path().as_path(), args);
    let child = command.spawn().unwrap_or_else(|err| panic!("cannot start cms-server {args:?}: {err}"));
    let pid = child.id();
    let waited = tokio::task::spawn_blocking(move || child.wait_with_output());
    match tokio::time::timeout(COMMAND_TIMEOUT, waited).await {
        Ok(output) => {
            let output = output.expect("the waiting task ends").expect("the command can be waited for");
            Outcome {
                code: output.status.code(),
                stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            }
        }
        Err(_) => {
            let pid = Pid::from_raw(i32::try_from(pid).expect("process ids fit in i32"));
            let _ = kill(pid, Signal::SIGKILL);
            panic!("cms-server {args:?} did not finish within {COMMAND_TIMEOUT:?}");
        }
    }
}

#[allow(clippy::disallowed_methods)] // The end-to-end tests run the real server binary as its own process.
fn command(options: &ServerOptions, data_dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(server_binary());
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("CMS_") {
            command.env_remove(key);
        }
    }
    command
        .args(args)
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .env("CMS_DATA_DIR", data_dir)
        .envs(options.env.iter().map(|(key, value)| (key, value)))
        .current_dir(data_dir.parent().unwrap_or(data_dir))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

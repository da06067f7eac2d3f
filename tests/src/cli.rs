//! Running the real `cms` binary against a test server, as a user would.
//!
//! Each [`Cli`] has a home folder of its own (the context file, kubeconfigs
//! and downloads land there) and a clean environment: only `PATH`, `HOME`,
//! `CMS_CONFIG` and what a test sets are passed on, so a developer's
//! `SERVICE_TOKEN` or `EDITOR` never leaks in. Every run is bounded in time.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::binary::cli_binary;
use crate::server::Server;

/// The longest one command may run.
pub const CLI_TIMEOUT: Duration = Duration::from_secs(60);

/// The `cms` binary with a home folder and environment of its own.
#[derive(Debug)]
pub struct Cli {
    binary: PathBuf,
    home: TempDir,
    env: Vec<(String, String)>,
}

/// The outcome of one command.
#[derive(Debug, Clone)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    command: String,
}

impl Run {
    /// Asserts the exit code, showing the whole outcome otherwise.
    #[track_caller]
    pub fn expect(&self, code: i32) -> &Run {
        assert_eq!(self.code, code, "`{}` exited {}, not {code}\n{self}", self.command, self.code);
        self
    }

    /// Asserts success and returns standard output.
    #[track_caller]
    pub fn ok(&self) -> &str {
        self.expect(0);
        &self.stdout
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "--- stdout\n{}--- stderr\n{}---", self.stdout, self.stderr)
    }
}

impl Cli {
    /// A client of `server`, named by `CMS_SERVER`, not yet logged in.
    pub fn new(server: &Server) -> Cli {
        Cli::bare().env("CMS_SERVER", &format!("http://{}", server.addr()))
    }

    /// A client that names no server: the default, or `--server`, applies.
    pub fn bare() -> Cli {
        let home = tempfile::Builder::new().prefix("cms-cli-e2e-").tempdir().expect("a temporary home");
        let config = home.path().join("config").join("cms.yaml");
        Cli { binary: cli_binary(), home, env: Vec::new() }.env("CMS_CONFIG", &config.to_string_lossy())
    }

    /// Sets an environment variable of every later command.
    pub fn env(mut self, key: &str, value: &str) -> Cli {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    /// The home folder, which is also the working directory of every command.
    pub fn home(&self) -> &Path {
        self.home.path()
    }

    /// The context file.
    pub fn config_path(&self) -> PathBuf {
        self.home.path().join("config").join("cms.yaml")
    }

    /// Runs `cms ARGS` to completion.
    pub fn run(&self, args: &[&str]) -> Run {
        self.run_with_input(args, "")
    }

    /// Runs `cms ARGS` with `input` on standard input.
    pub fn run_with_input(&self, args: &[&str], input: &str) -> Run {
        let mut child = self.spawn(args);
        let mut stdin = child.stdin.take().expect("a stdin pipe");
        stdin.write_all(input.as_bytes()).expect("standard input is written");
        drop(stdin);
        let stdout = reader(child.stdout.take().expect("a stdout pipe"));
        let stderr = reader(child.stderr.take().expect("a stderr pipe"));
        let status = wait_bounded(&mut child, CLI_TIMEOUT, args);
        Run {
            code: status.code().expect("cms exits by itself, not by a signal"),
            stdout: stdout.join().expect("stdout is read"),
            stderr: stderr.join().expect("stderr is read"),
            command: format!("cms {}", args.join(" ")),
        }
    }

    /// Starts `cms ARGS` with piped standard streams, for commands that run
    /// until stopped (`get -w`) or that a test follows while they run.
    #[allow(clippy::disallowed_methods)] // The end-to-end tests exist to run the real client as its own process.
    pub fn spawn(&self, args: &[&str]) -> Child {
        let mut command = Command::new(&self.binary);
        command
            .args(args)
            .current_dir(self.home.path())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (key, value) in &self.env {
            command.env(key, value);
        }
        command.spawn().expect("the cms binary starts")
    }
}

fn reader(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

/// Waits for `child`, killing it and failing the test after `limit`.
pub fn wait_bounded(child: &mut Child, limit: Duration, args: &[&str]) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("the child's status") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`cms {}` did not finish within {limit:?}", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The lines a child started with a piped stdout prints, as they come.
pub fn stdout_lines(child: &mut Child) -> Receiver<String> {
    let stdout = child.stdout.take().expect("a stdout pipe");
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                return;
            }
        }
    });
    receiver
}

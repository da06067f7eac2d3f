//! Starting, stopping and restarting the real `cms-server` process.

use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tempfile::TempDir;
use tokio::sync::mpsc;

use crate::api::Api;
use crate::binary::server_binary;

/// How long a server may take to log its listening line.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a server may take to exit after a signal.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// A data directory that outlives one server process, so that a restart finds
/// what the previous process wrote. It is removed when the last handle goes.
#[derive(Debug, Clone)]
pub struct DataDir {
    root: Arc<TempDir>,
}

impl DataDir {
    /// A fresh, empty data directory.
    pub fn fresh() -> DataDir {
        let root = tempfile::Builder::new().prefix("cms-e2e-").tempdir().expect("a temporary directory");
        std::fs::create_dir(root.path().join("data")).expect("the data directory is created");
        DataDir { root: Arc::new(root) }
    }

    /// The folder passed as `CMS_DATA_DIR`.
    pub fn path(&self) -> PathBuf {
        self.root.path().join("data")
    }

    /// The server's working directory: the parent of the data directory, so
    /// that nothing a server writes lands in the source tree.
    fn work_dir(&self) -> &Path {
        self.root.path()
    }
}

/// The first admin, created by the server on an empty data directory.
pub const ADMIN_USER: &str = "admin";
/// The first admin's password, passed as `CMS_BOOTSTRAP_ADMIN_PASSWORD`.
pub const ADMIN_PASSWORD: &str = "e2e-admin-password";

/// Extra environment for a server; `CMS_LISTEN` and `CMS_DATA_DIR` are set by
/// the harness, and every other inherited `CMS_*` variable is removed.
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    pub(crate) env: Vec<(String, String)>,
}

impl ServerOptions {
    /// Sets an environment variable of the server process.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> ServerOptions {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Starts a server with these options on a fresh data directory.
    pub async fn start(self) -> Server {
        Server::launch(DataDir::fresh(), self).await
    }

    /// Starts a server with these options on `data_dir`, such as one a
    /// restore filled.
    pub async fn start_in(self, data_dir: DataDir) -> Server {
        Server::launch(data_dir, self).await
    }
}

/// Everything the server printed, shared with the threads that read its pipes.
#[derive(Debug, Clone, Default)]
struct Log {
    lines: Arc<Mutex<Vec<String>>>,
}

impl Log {
    fn push(&self, line: String) {
        self.lines.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(line);
    }
}

impl fmt::Display for Log {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines = self.lines.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        writeln!(f, "--- cms-server output ({} lines) ---", lines.len())?;
        for line in lines.iter() {
            writeln!(f, "{line}")?;
        }
        write!(f, "--- end of cms-server output ---")
    }
}

/// A running `cms-server` process. Dropping it kills the process.
#[derive(Debug)]
pub struct Server {
    child: Option<Child>,
    addr: SocketAddr,
    data_dir: DataDir,
    options: ServerOptions,
    log: Log,
    api: Api,
}

impl Server {
    /// Starts a server on a fresh data directory with default options.
    pub async fn start() -> Server {
        ServerOptions::default().start().await
    }

    /// Options for a server that needs extra environment.
    pub fn options() -> ServerOptions {
        ServerOptions::default()
    }

    async fn launch(data_dir: DataDir, options: ServerOptions) -> Server {
        let log = Log::default();
        let (lines_tx, mut lines) = mpsc::unbounded_channel();
        let mut child = spawn(&server_binary(), &data_dir, &options.env);
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        pump(stdout, log.clone(), lines_tx.clone());
        pump(stderr, log.clone(), lines_tx);

        let deadline = tokio::time::Instant::now() + START_TIMEOUT;
        let addr = loop {
            match tokio::time::timeout_at(deadline, lines.recv()).await {
                Ok(Some(line)) => {
                    if let Some(addr) = parse_listening(&line) {
                        break addr;
                    }
                }
                Ok(None) => {
                    let status = wait_for_exit(&mut child, STOP_TIMEOUT).await;
                    panic!("cms-server exited ({status:?}) before it logged `listening on <addr>`\n{log}");
                }
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("cms-server did not log `listening on <addr>` within {START_TIMEOUT:?}\n{log}");
                }
            }
        };
        // With password login off, the harness's client stays anonymous.
        let password_login =
            !options.env.iter().any(|(key, value)| key == "CMS_PASSWORD_LOGIN" && value == "false");
        let api = Api::new(addr);
        let api = if password_login { api.login(ADMIN_USER, ADMIN_PASSWORD).await } else { api };
        Server { child: Some(child), addr, data_dir, options, log, api }
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A client for this server, logged in as the first admin.
    pub fn api(&self) -> Api {
        self.api.clone()
    }

    /// The data directory the server was given.
    pub fn data_dir(&self) -> &DataDir {
        &self.data_dir
    }

    /// Everything the server has printed so far.
    pub fn output(&self) -> String {
        self.log.to_string()
    }

    /// The process id of the server.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the server is running").id()
    }

    /// Sends SIGTERM without waiting for the process to exit.
    pub fn send_sigterm(&self) {
        signal(self.pid(), Signal::SIGTERM);
    }

    /// Stops the server with SIGTERM and asserts that it exits with status 0.
    pub async fn terminate(self) -> Stopped {
        self.send_sigterm();
        let (status, stopped) = self.wait_for_exit().await;
        assert_eq!(
            status.code(),
            Some(0),
            "cms-server exited with {status:?} after SIGTERM\n{}",
            stopped.log
        );
        stopped
    }

    /// Kills the server with SIGKILL, as a crash or `kill -9` would.
    pub async fn kill(self) -> Stopped {
        signal(self.pid(), Signal::SIGKILL);
        let (status, stopped) = self.wait_for_exit().await;
        assert_eq!(status.code(), None, "cms-server was killed by SIGKILL, so it has no exit code");
        stopped
    }

    /// Waits for the process to exit by itself, after a signal sent earlier.
    pub async fn wait_for_exit(mut self) -> (ExitStatus, Stopped) {
        let mut child = self.child.take().expect("the server is running");
        let status = wait_for_exit(&mut child, STOP_TIMEOUT).await;
        let Some(status) = status else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("cms-server did not exit within {STOP_TIMEOUT:?}\n{}", self.log);
        };
        let stopped =
            Stopped { data_dir: self.data_dir.clone(), options: self.options.clone(), log: self.log.clone() };
        (status, stopped)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A server that has exited; its data directory is kept for a restart.
#[derive(Debug)]
pub struct Stopped {
    data_dir: DataDir,
    options: ServerOptions,
    log: Log,
}

impl Stopped {
    /// Starts a new server process on the same data directory and options.
    pub async fn restart(self) -> Server {
        Server::launch(self.data_dir, self.options).await
    }

    /// Starts a new server process on the same data directory with
    /// `options` in place of the first ones.
    pub async fn restart_with(self, options: ServerOptions) -> Server {
        Server::launch(self.data_dir, options).await
    }

    /// Starts a server on the same data directory with `options` in place
    /// of the first ones, for a start that must fail: waits for the process
    /// to exit and returns its status and everything it printed. A server
    /// that starts listening instead fails the test.
    pub async fn restart_failing(self, options: ServerOptions) -> (ExitStatus, String) {
        let log = Log::default();
        let (lines_tx, mut lines) = mpsc::unbounded_channel();
        let mut child = spawn(&server_binary(), &self.data_dir, &options.env);
        pump(child.stdout.take().expect("stdout is piped"), log.clone(), lines_tx.clone());
        pump(child.stderr.take().expect("stderr is piped"), log.clone(), lines_tx);
        let deadline = tokio::time::Instant::now() + START_TIMEOUT;
        while let Ok(Some(line)) = tokio::time::timeout_at(deadline, lines.recv()).await {
            if parse_listening(&line).is_some() {
                let _ = child.kill();
                let _ = child.wait();
                panic!("cms-server started although it should have refused to\n{log}");
            }
        }
        let status = wait_for_exit(&mut child, STOP_TIMEOUT).await;
        let Some(status) = status else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("cms-server neither started nor exited in time\n{log}");
        };
        (status, log.to_string())
    }

    /// Everything the stopped server printed.
    pub fn output(&self) -> String {
        self.log.to_string()
    }

    /// The data directory the server used.
    pub fn data_dir(&self) -> &DataDir {
        &self.data_dir
    }
}

#[allow(clippy::disallowed_methods)] // The end-to-end tests exist to run the real server as its own process.
fn spawn(binary: &Path, data_dir: &DataDir, env: &[(String, String)]) -> Child {
    let mut command = Command::new(binary);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("CMS_") {
            command.env_remove(key);
        }
    }
    command
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .env("CMS_LISTEN", "127.0.0.1:0")
        .env("CMS_DATA_DIR", data_dir.path())
        .env("CMS_BOOTSTRAP_ADMIN_PASSWORD", ADMIN_PASSWORD)
        // Each server would otherwise spend seconds of CPU filling a pool of
        // eight service-account keys while many tests run side by side.
        .env("CMS_KEY_POOL", "1")
        // The reconciler writes status and removes deleted tenants; tests of
        // the API alone keep it off, provisioning tests turn it on.
        .env("CMS_PROVISIONING", "false")
        .envs(env.iter().map(|(key, value)| (key, value)))
        .current_dir(data_dir.work_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command.spawn().unwrap_or_else(|err| panic!("cannot start {}: {err}", binary.display()))
}

/// Copies a pipe of the server, line by line, into the log and the channel.
fn pump(stream: impl Read + Send + 'static, log: Log, lines: mpsc::UnboundedSender<String>) {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut buffer = Vec::new();
        loop {
            buffer.clear();
            match reader.read_until(b'\n', &mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let line = String::from_utf8_lossy(&buffer).trim_end().to_string();
                    log.push(line.clone());
                    let _ = lines.send(line);
                }
            }
        }
    });
}

fn signal(pid: u32, signal: Signal) {
    let pid = Pid::from_raw(i32::try_from(pid).expect("process ids fit in i32"));
    kill(pid, signal).unwrap_or_else(|err| panic!("cannot send {signal} to cms-server ({pid}): {err}"));
}

/// Polls the child until it exits or `limit` passes; `None` means it is still running.
async fn wait_for_exit(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("the server process can be waited for") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Finds the address in a log line that contains `listening on <addr>`,
/// ignoring colour codes, a URL scheme and surrounding punctuation; `None`
/// when the line announces no address. The servers log this line once they
/// accept connections, so whoever starts one (these tests, `xtask bench`)
/// waits for it.
pub fn parse_listening(line: &str) -> Option<SocketAddr> {
    let plain = strip_ansi(line);
    let (_, rest) = plain.split_once("listening on ")?;
    let rest = rest.trim_start_matches(['"', '\'', '`', ' ']);
    let rest = rest.strip_prefix("http://").unwrap_or(rest);
    let end = rest
        .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | ',' | '/'))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// The line without its ANSI escape sequences (colours, bold), as a terminal
/// would show it.
pub fn strip_ansi(line: &str) -> String {
    let mut plain = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
            continue;
        }
        plain.push(c);
    }
    plain
}

#[cfg(test)]
mod tests {
    use super::{parse_listening, strip_ansi};

    #[test]
    fn listening_lines_are_parsed() {
        let check = |line: &str, expected: Option<&str>| {
            assert_eq!(parse_listening(line), expected.map(|addr| addr.parse().unwrap()), "{line}");
        };
        check("2026-01-01T00:00:00Z  INFO cms_server: listening on 127.0.0.1:4242", Some("127.0.0.1:4242"));
        check("\u{1b}[32m INFO\u{1b}[0m listening on \u{1b}[1m127.0.0.1:80\u{1b}[0m", Some("127.0.0.1:80"));
        check("\u{1b}[2mlistening on\u{1b}[0m 127.0.0.1:1", Some("127.0.0.1:1"));
        check("INFO listening on http://127.0.0.1:9/ addr=x", Some("127.0.0.1:9"));
        check("INFO listening on [::1]:8080", Some("[::1]:8080"));
        check("INFO listening on \"127.0.0.1:7\", workers=2", Some("127.0.0.1:7"));
        check("INFO starting", None);
    }

    #[test]
    fn escape_sequences_are_stripped() {
        assert_eq!(strip_ansi("\u{1b}[32m INFO\u{1b}[0m \u{1b}[1;31mready\u{1b}[0m"), " INFO ready");
        assert_eq!(strip_ansi("plain"), "plain");
    }
}

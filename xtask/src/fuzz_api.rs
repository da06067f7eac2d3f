//! `cargo xtask fuzz-api`: schemathesis against the real server, driven by the
//! server's own `/openapi.json`, with every check on. It runs twice, as an
//! admin (API token) and as a viewer (API token of a `view` user), so that
//! both the writes and the refusals are fuzzed. Any failure fails the step.
//!
//! schemathesis comes from PyPI into a cached venv (`.ci/schemathesis`);
//! `.ci/schemathesis.toml` holds the few stated exceptions and
//! `.ci/schemathesis_hooks.py` keeps requests from opening endless watch streams.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

use crate::shell::{Timings, cargo, workspace_root};

/// The longest the build may take.
const BUILD_LIMIT: Duration = Duration::from_secs(40 * 60);
/// The longest one schemathesis run may take.
const RUN_LIMIT: Duration = Duration::from_secs(15 * 60);
/// Test cases per operation and run, unless `CMS_FUZZ_MAX_EXAMPLES` says otherwise.
const MAX_EXAMPLES: u32 = 25;
const ADMIN_PASSWORD: &str = "fuzz-admin-password";
const VIEWER: &str = "fuzz-viewer";
const VIEWER_PASSWORD: &str = "fuzz-viewer-password";

/// Builds the server, installs schemathesis, and fuzzes the API as admin
/// and as viewer.
pub(crate) fn run() -> Result<()> {
    let mut timings = Timings::default();
    let result = steps(&mut timings);
    timings.print_summary("fuzz-api steps");
    result
}

pub(crate) fn steps(timings: &mut Timings) -> Result<()> {
    // The workspace's binaries, as the tests' step builds them: features
    // unify across the workspace, so building one package alone would build
    // the server and its dependencies a second time.
    timings.run("build cms-server", &mut cargo(["build", "--workspace", "--bins"]), BUILD_LIMIT)?;
    let schemathesis = timings.measure("install schemathesis", install)?;
    let work = tempfile::Builder::new().prefix("cms-fuzz-").tempdir()?;
    let server = timings.measure("start cms-server", || Server::start(work.path()))?;
    let result = fuzz(timings, &server, &schemathesis);
    server.stop()?;
    result
}

fn fuzz(timings: &mut Timings, server: &Server, schemathesis: &Path) -> Result<()> {
    let (admin, viewer) = timings.measure("make tokens", || tokens(server.addr))?;
    let max_examples = std::env::var("CMS_FUZZ_MAX_EXAMPLES").unwrap_or_else(|_| MAX_EXAMPLES.to_string());
    let root = workspace_root();
    for (who, token) in [("admin", admin), ("viewer", viewer)] {
        let mut command = Command::new(schemathesis);
        command
            .current_dir(&root)
            .env("SCHEMATHESIS_HOOKS", "schemathesis_hooks")
            .env("PYTHONPATH", root.join(".ci"))
            .env("NO_PROXY", "*")
            .arg("--config-file")
            .arg(root.join(".ci/schemathesis.toml"))
            .arg("run")
            .arg(format!("http://{}/openapi.json", server.addr))
            // Generous: the fuzzing checks answers, not speed, and a create
            // on a loaded two-core machine has been seen to pass 10 s.
            .args(["--checks", "all", "--max-examples", &max_examples, "--request-timeout", "30"])
            .args(["--workers", "2", "--no-color"])
            .arg("--header")
            .arg(format!("Authorization: Bearer {token}"));
        timings.run(&format!("schemathesis as {who}"), &mut command, RUN_LIMIT)?;
    }
    Ok(())
}

fn install() -> Result<PathBuf> {
    let output = Command::new("bash")
        .arg(workspace_root().join(".ci/schemathesis"))
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run .ci/schemathesis")?;
    ensure!(output.status.success(), ".ci/schemathesis failed ({}): schemathesis is required", output.status);
    let path = PathBuf::from(String::from_utf8(output.stdout)?.trim());
    let version = Command::new(&path).arg("--version").output()?;
    println!("{}", String::from_utf8_lossy(&version.stdout).trim());
    Ok(path)
}

/// An admin API token and a viewer's, made through the API.
fn tokens(addr: SocketAddr) -> Result<(String, String)> {
    let login = |user: &str, password: &str| -> Result<String> {
        let reply = request(
            addr,
            "POST",
            "/api/v1/auth/login",
            None,
            &json!({"username": user, "password": password}),
        )?;
        reply["token"].as_str().map(str::to_string).context("login answered no token")
    };
    let api_token = |user: &str, login_token: &str| -> Result<String> {
        let body = json!({"metadata": {"name": "fuzz"}, "spec": {"expiresIn": "2h"}});
        let reply = request(addr, "POST", &format!("/api/v1/users/{user}/tokens"), Some(login_token), &body)?;
        reply["status"]["token"].as_str().map(str::to_string).context("no API token in the answer")
    };
    let admin_login = login("admin", ADMIN_PASSWORD)?;
    let admin = api_token("admin", &admin_login)?;
    let user = json!({"metadata": {"name": VIEWER}, "spec": {"role": "view", "password": VIEWER_PASSWORD}});
    request(addr, "POST", "/api/v1/users", Some(&admin_login), &user)?;
    let viewer = api_token(VIEWER, &login(VIEWER, VIEWER_PASSWORD)?)?;
    Ok((admin, viewer))
}

/// One JSON request over HTTP/1.1; fails unless the status is 2xx.
fn request(addr: SocketAddr, method: &str, path: &str, token: Option<&str>, body: &Value) -> Result<Value> {
    let body = body.to_string();
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let authorization = token.map(|token| format!("Authorization: Bearer {token}\r\n")).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n{authorization}\r\n{body}",
        body.len()
    )?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply)?;
    let status = reply.split_whitespace().nth(1).unwrap_or_default();
    let payload = reply.split_once("\r\n\r\n").map(|(_, payload)| payload).unwrap_or_default();
    if !status.starts_with('2') {
        bail!("{method} {path} answered {status}: {payload}");
    }
    serde_json::from_str(payload).with_context(|| format!("{method} {path} answered {payload:?}"))
}

/// The server under test: a copy of the debug binary (the target directory
/// may be shared), a fresh data directory, provisioning off.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Server {
    fn start(work: &Path) -> Result<Server> {
        let built = workspace_target().join("debug/cms-server");
        let binary = work.join("cms-server");
        std::fs::copy(&built, &binary).with_context(|| format!("cannot copy {}", built.display()))?;
        let log_path = work.join("server.log");
        let log = std::fs::File::create(&log_path)?;
        let mut command = Command::new(&binary);
        for (key, _) in std::env::vars().filter(|(key, _)| key.starts_with("CMS_")) {
            command.env_remove(key);
        }
        let child = command
            .current_dir(work)
            .env("CMS_LISTEN", "127.0.0.1:0")
            .env("CMS_DATA_DIR", work.join("data"))
            .env("CMS_BOOTSTRAP_ADMIN_PASSWORD", ADMIN_PASSWORD)
            .env("CMS_PROVISIONING", "false")
            // The autoscaler port on, so that its identity downloads are served.
            .env("CMS_AUTOSCALER_LISTEN", "127.0.0.1:0")
            .env("CMS_KEY_POOL", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .spawn()
            .context("cannot start cms-server")?;
        let mut server = Server { child, addr: SocketAddr::from(([127, 0, 0, 1], 0)) };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let text = std::fs::read_to_string(&log_path).unwrap_or_default();
            if let Some(addr) = text.lines().find_map(listening) {
                server.addr = addr;
                println!("cms-server listening on {addr}");
                return Ok(server);
            }
            if let Some(status) = server.child.try_wait()? {
                bail!("cms-server exited ({status}) before listening:\n{text}");
            }
            if Instant::now() > deadline {
                let _ = server.child.kill();
                bail!("cms-server did not listen within a minute:\n{text}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGTERM, then a wait; the server must exit 0.
    fn stop(mut self) -> Result<()> {
        let pid = Pid::from_raw(i32::try_from(self.child.id())?);
        let _ = kill(pid, Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait()? {
                ensure!(status.success(), "cms-server exited with {status} after SIGTERM");
                return Ok(());
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                bail!("cms-server did not stop within 20 s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn listening(line: &str) -> Option<SocketAddr> {
    let rest = &line[line.find("listening on ")? + "listening on ".len()..];
    rest.split(|c: char| c.is_whitespace() || c == '"').next()?.parse().ok()
}

/// The target directory cargo builds into.
fn workspace_target() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| workspace_root().join("target"), PathBuf::from)
}

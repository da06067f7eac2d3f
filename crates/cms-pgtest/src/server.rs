//! [`PgServer`]: one throwaway PostgreSQL server.

#![allow(clippy::disallowed_methods)] // Test support: it exists to run initdb, postgres and createdb.

use std::io::Write as _;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::binaries::find_binaries;

/// How long a start may take before the harness gives up.
const START_LIMIT: Duration = Duration::from_secs(60);

/// The user the server runs as when the tests run as root, since
/// PostgreSQL refuses to run as root.
const SERVER_USER: &str = "postgres";

/// Runs `postgres` in the background and waits for a line on standard
/// input. A line (`stop`) stops the server; the end of input (the test
/// process closed the pipe, or exited) stops it and removes its directory,
/// in the background since unlinking synced files can take seconds.
/// Arguments after the third are further `-c` settings.
const WATCHDOG: &str = r#"
bin=$1 root=$2 port=$3
shift 3
"$bin" -D "$root/data" -p "$port" -c listen_addresses=127.0.0.1 -c unix_socket_directories= \
    -c fsync=on -c max_connections=300 -c shared_buffers=32MB "$@" >>"$root/log" 2>&1 &
pid=$!
if read -r line; then
    kill -INT "$pid" 2>/dev/null
    wait "$pid"
    exit 0
fi
kill -INT "$pid" 2>/dev/null
wait "$pid"
rm -rf "$root" </dev/null >/dev/null 2>&1 &
"#;

/// A throwaway PostgreSQL server on a loopback port.
#[derive(Debug)]
pub struct PgServer {
    bin: PathBuf,
    /// The directory of the data and the log, owned by the server's user.
    root: PathBuf,
    port: u16,
    /// `Some` when the server runs as [`SERVER_USER`] for a root process.
    run_as: Option<&'static str>,
    /// The uid the server runs as.
    uid: u32,
    /// The watching shell while the server runs.
    watchdog: Mutex<Option<Child>>,
    databases: AtomicU32,
    /// Further `name=value` settings the server starts with.
    settings: Vec<String>,
}

impl PgServer {
    /// Initializes a fresh cluster and starts it on a free loopback port.
    /// Panics, with the server's log, when that fails.
    pub fn start() -> PgServer {
        PgServer::start_with(&[])
    }

    /// [`PgServer::start`] with further server settings, each `name=value`
    /// (as `postgres -c` takes them), such as
    /// `shared_preload_libraries=pg_stat_statements`. Panics on a setting
    /// without `=`.
    pub fn start_with(settings: &[&str]) -> PgServer {
        for setting in settings {
            assert!(
                setting.split_once('=').is_some_and(|(name, _)| !name.is_empty() && !name.starts_with('-')),
                "a server setting is name=value: {setting:?}"
            );
        }
        let bin = find_binaries();
        let run_as = server_user();
        let root = make_root(run_as);
        let mut server = PgServer {
            bin,
            root,
            port: 0,
            run_as: run_as.map(|_| SERVER_USER),
            uid: run_as.map_or_else(|| nix::unistd::geteuid().as_raw(), |(uid, _)| uid),
            watchdog: Mutex::new(None),
            databases: AtomicU32::new(0),
            settings: settings.iter().map(|setting| setting.to_string()).collect(),
        };
        server.create_data();
        // A port found free may be taken before the server binds it; try
        // a few.
        for _ in 0..5 {
            server.port = free_port();
            match server.launch() {
                Ok(watchdog) => {
                    *server.lock() = Some(watchdog);
                    return server;
                }
                Err(Launch::PortTaken) => continue,
                Err(Launch::Failed(why)) => panic!("{why}"),
            }
        }
        panic!("PostgreSQL could not bind a free loopback port in five tries:\n{}", server.log_tail());
    }

    /// One server for the whole test process, started on first use. It
    /// stops, and its directory goes, when the process exits.
    pub fn shared() -> &'static PgServer {
        static SHARED: OnceLock<PgServer> = OnceLock::new();
        SHARED.get_or_init(PgServer::start)
    }

    /// Creates an empty database and returns its URL.
    pub fn database(&self) -> String {
        let name = format!("db{}", self.databases.fetch_add(1, Ordering::Relaxed) + 1);
        let output = Command::new(self.bin.join("createdb"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "postgres", &name])
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|err| panic!("running createdb: {err}"));
        assert!(
            output.status.success(),
            "createdb {name} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        self.url(&name)
    }

    /// The URL of database `name` on this server.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// The loopback port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The process id of the running server's postmaster, the parent of
    /// its other processes.
    pub fn postmaster_pid(&self) -> Option<u32> {
        let pid_file = std::fs::read_to_string(self.root.join("data/postmaster.pid")).ok()?;
        pid_file.lines().next()?.trim().parse().ok()
    }

    /// The directory of the server's data and its `log`.
    pub fn directory(&self) -> &Path {
        &self.root
    }

    /// Whether the server is running (not stopped by [`PgServer::stop`]).
    pub fn is_running(&self) -> bool {
        self.lock().is_some()
    }

    /// Stops the server (a fast shutdown: clients are disconnected) and
    /// waits until it is down. The data stays, for [`PgServer::restart`].
    pub fn stop(&self) {
        let Some(mut watchdog) = self.lock().take() else { return };
        if let Some(mut input) = watchdog.stdin.take() {
            // The shell may be gone already; waiting tells.
            let _ = input.write_all(b"stop\n");
        }
        let _ = watchdog.wait();
    }

    /// Starts a stopped server again, on the same port and data.
    pub fn restart(&self) {
        let mut running = self.lock();
        if running.is_some() {
            return;
        }
        match self.launch() {
            Ok(watchdog) => *running = Some(watchdog),
            Err(Launch::PortTaken) => panic!("port {} was taken while PostgreSQL was stopped", self.port),
            Err(Launch::Failed(why)) => panic!("{why}"),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Child>> {
        self.watchdog.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// `program` as a command, run as the server's user when needed.
    fn command(&self, program: &Path) -> Command {
        let Some(user) = self.run_as else { return Command::new(program) };
        if Path::new("/usr/sbin/runuser").exists() || Path::new("/sbin/runuser").exists() {
            let mut command = Command::new("runuser");
            command.args(["-u", user, "--"]).arg(program);
            return command;
        }
        let mut command = Command::new("su");
        command.args([user, "-s", "/bin/sh", "-c", r#"exec "$0" "$@""#]).arg(program);
        command
    }

    /// Fills `data` with a fresh cluster: a copy of this machine's template
    /// cluster for these binaries, which the first server makes with
    /// `initdb`. A copy takes a tenth of the time, which counts when every
    /// test runs in a process of its own (nextest).
    fn create_data(&self) {
        let data = self.root.join("data");
        let template = self.template();
        if self.trusted(&template) && template.join("PG_VERSION").is_file() {
            let copied = self
                .command(Path::new("cp"))
                .arg("-a")
                .arg(&template)
                .arg(&data)
                .stdin(Stdio::null())
                .output()
                .is_ok_and(|output| output.status.success());
            if copied {
                return;
            }
            let _ = std::fs::remove_dir_all(&data);
        }
        self.initdb(&data);
        // Publish a template for the next servers; another process may have
        // published one meanwhile, which is as good.
        let staging = self.root.join("template");
        let published = self
            .command(Path::new("cp"))
            .arg("-a")
            .arg(&data)
            .arg(&staging)
            .stdin(Stdio::null())
            .output()
            .is_ok_and(|output| output.status.success());
        if !published || std::fs::rename(&staging, &template).is_err() {
            let _ = std::fs::remove_dir_all(&staging);
        }
    }

    /// Whether `template` belongs to the server's user and nobody else may
    /// write it: the temporary directory is shared, and a cluster planted
    /// there by someone else could run commands as that user.
    fn trusted(&self, template: &Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        std::fs::symlink_metadata(template)
            .is_ok_and(|meta| meta.is_dir() && meta.uid() == self.uid && meta.mode() & 0o077 == 0)
    }

    /// Where the template cluster of these binaries lives.
    fn template(&self) -> PathBuf {
        let binaries: String = self
            .bin
            .to_string_lossy()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let user = self.run_as.unwrap_or("self");
        std::env::temp_dir().join(format!("cms-pgtest-template-{user}{binaries}"))
    }

    fn initdb(&self, data: &Path) {
        let output = self
            .command(&self.bin.join("initdb"))
            .arg("-D")
            .arg(data)
            .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale"])
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|err| panic!("running initdb: {err}"));
        assert!(
            output.status.success(),
            "initdb failed in {}: {}{}",
            self.root.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Starts `postgres` under a watching shell and waits until it is ready.
    fn launch(&self) -> Result<Child, Launch> {
        let mut command = self.command(Path::new("/bin/sh"));
        command
            .args(["-c", WATCHDOG, "sh"])
            .arg(self.bin.join("postgres"))
            .arg(&self.root)
            .arg(self.port.to_string())
            .args(self.settings.iter().flat_map(|setting| ["-c", setting.as_str()]))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut watchdog =
            command.spawn().map_err(|err| Launch::Failed(format!("starting postgres: {err}")))?;
        let deadline = Instant::now() + START_LIMIT;
        loop {
            if self.ready() {
                return Ok(watchdog);
            }
            let log = self.log_tail();
            let failed = log.contains("could not create any TCP/IP sockets")
                || matches!(watchdog.try_wait(), Ok(Some(_)))
                || Instant::now() > deadline;
            if failed {
                drop(watchdog.stdin.take());
                let _ = watchdog.wait();
                if log.contains("Address already in use") {
                    return Err(Launch::PortTaken);
                }
                return Err(Launch::Failed(format!(
                    "PostgreSQL did not start on port {}:\n{log}",
                    self.port
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the server says it is ready and accepts connections.
    fn ready(&self) -> bool {
        let Ok(pid_file) = std::fs::read_to_string(self.root.join("data/postmaster.pid")) else {
            return false;
        };
        let status = pid_file.lines().nth(7).unwrap_or_default().trim();
        status == "ready" && TcpStream::connect((Ipv4Addr::LOCALHOST, self.port)).is_ok()
    }

    /// The end of the server's log.
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.root.join("log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        match self.lock().take() {
            // The end of input stops the server and removes its directory.
            Some(mut watchdog) => {
                drop(watchdog.stdin.take());
                let _ = watchdog.wait();
            }
            None => {
                let _ = std::fs::remove_dir_all(&self.root);
            }
        }
    }
}

enum Launch {
    PortTaken,
    Failed(String),
}

/// The server's user when this process runs as root: its uid and gid.
fn server_user() -> Option<(u32, u32)> {
    if !nix::unistd::geteuid().is_root() {
        return None;
    }
    let user = nix::unistd::User::from_name(SERVER_USER).ok().flatten().unwrap_or_else(|| {
        panic!(
            "the tests run as root, and PostgreSQL refuses to: they need a `{SERVER_USER}` user to \
             run it as (the postgresql package creates one)"
        )
    });
    Some((user.uid.as_raw(), user.gid.as_raw()))
}

/// A fresh directory for one server, owned by the server's user.
fn make_root(owner: Option<(u32, u32)>) -> PathBuf {
    static COUNT: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|since| since.subsec_nanos())
        .unwrap_or_default();
    let name = format!("cms-pg-{}-{}-{nanos}", std::process::id(), COUNT.fetch_add(1, Ordering::Relaxed));
    let root = std::env::temp_dir().join(name);
    std::fs::create_dir(&root).unwrap_or_else(|err| panic!("creating {}: {err}", root.display()));
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700))
        .unwrap_or_else(|err| panic!("securing {}: {err}", root.display()));
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(&root, Some(uid), Some(gid))
            .unwrap_or_else(|err| panic!("handing {} to {SERVER_USER}: {err}", root.display()));
    }
    root
}

/// A loopback port that nothing listens on right now.
fn free_port() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("binding a loopback port");
    listener.local_addr().expect("the bound address").port()
}

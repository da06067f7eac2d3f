//! Fake Talos nodes for tests of the real server: `cms-fake-node` processes
//! on loopback ports, and machines written straight into a stopped server's
//! store. Machines are made by the reconciler, never through the API, so the
//! harness writes them with `cms-store` as the reconciler would, sealed
//! secrets and all, while no server runs.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use cms_model::Kind;
use cms_store::{Draft, Key, SqlStore, Store, StoreOptions};
use cms_talos::Sealer;
use secrecy::ExposeSecret;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::binary::server_binary;
use crate::server::DataDir;

/// How long a fake node may take to print its listening line.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// The environment variable that names the fake node binary explicitly.
const BINARY_VARIABLE: &str = "CMS_FAKE_NODE_BIN";

/// The `cms-fake-node` binary: `$CMS_FAKE_NODE_BIN`, else next to `cms-server`.
pub fn fake_node_binary() -> PathBuf {
    if let Some(path) = std::env::var_os(BINARY_VARIABLE) {
        return PathBuf::from(path);
    }
    let path = server_binary().with_file_name(format!("cms-fake-node{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.is_file(),
        "the health tests need the cms-fake-node binary, and {} does not exist.\n\
         Build it with `cargo build -p cms-fake-node`, or point {BINARY_VARIABLE} at one.",
        path.display()
    );
    path
}

/// A running `cms-fake-node` process, killed when dropped.
#[derive(Debug)]
pub struct FakeNodeProcess {
    child: Child,
    addr: SocketAddr,
    calls: Arc<Mutex<Vec<Value>>>,
}

impl FakeNodeProcess {
    /// Starts a fake node whose CA is in `ca_dir`, with extra `args` such as
    /// `--version v1.13.0`, `--latency 30s`, `--fail down` or `--listen
    /// IP:PORT` (by default, a free port on 127.0.0.1).
    #[allow(clippy::disallowed_methods)] // The tests run fake nodes as processes beside the real server.
    pub fn start(ca_dir: &Path, args: &[&str]) -> FakeNodeProcess {
        let mut child = Command::new(fake_node_binary())
            .arg("--ca-dir")
            .arg(ca_dir)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start cms-fake-node: {err}"));
        let stdout = child.stdout.take().expect("stdout is piped");
        let calls = Arc::new(Mutex::new(Vec::new()));
        let (listening, address) = mpsc::channel();
        let recorded = calls.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(addr) = line.strip_prefix("listening on ") {
                    let _ = listening.send(addr.trim().to_string());
                } else if let Some(call) = line.strip_prefix("call ") {
                    let call = serde_json::from_str(call).expect("a call line is JSON");
                    recorded.lock().expect("the call record").push(call);
                }
            }
        });
        let Ok(addr) = address.recv_timeout(START_TIMEOUT) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("cms-fake-node did not print `listening on <addr>` within {START_TIMEOUT:?}");
        };
        let addr = addr.parse().expect("a socket address");
        FakeNodeProcess { child, addr, calls }
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The calls so far, as printed: `{seq, atMillis, method, node,
    /// clientCertificate, payload}`.
    pub fn calls(&self) -> Vec<Value> {
        self.calls.lock().expect("the call record").clone()
    }

    /// The calls once there are at least `count`: the node prints a call
    /// after answering it, so its line may come just after the answer.
    /// Fails the test when they do not come within five seconds.
    pub fn calls_at_least(&self, count: usize) -> Vec<Value> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let calls = self.calls();
            if calls.len() >= count {
                return calls;
            }
            assert!(std::time::Instant::now() < deadline, "{count} calls did not come: {calls:?}");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

impl Drop for FakeNodeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The secrets bundle of `tenant` in the store at `url` (such as a
/// PostgreSQL database several replicas share), opened with the sealing
/// key `key_base64` named `key_id`.
pub async fn bundle_at(url: &str, key_id: &str, key_base64: &str, tenant: &str) -> cms_talos::SecretsBundle {
    let store = SqlStore::open(&StoreOptions::new(url)).await.expect("the store opens");
    let sealer =
        Sealer::from_config(key_id, &secrecy::SecretString::from(key_base64)).expect("the sealing key");
    let sealed = store.secrets(tenant.to_string()).await.expect("secrets read").expect("secrets");
    sealer.open_bundle(tenant, &sealed).expect("the bundle opens")
}

/// The store of a stopped server, opened to add what the reconciler would.
#[derive(Debug)]
pub struct StoreWriter {
    store: Arc<SqlStore>,
    sealer: Sealer,
    cas: TempDir,
}

impl StoreWriter {
    /// Opens the store and the sealing key file in `data_dir`. Reading, such
    /// as [`StoreWriter::os_ca_dir`], works while the server runs (SQLite in
    /// WAL mode); writes need it stopped, since its cache would miss them.
    pub async fn open(data_dir: &DataDir) -> StoreWriter {
        let url = format!("sqlite://{}?mode=rwc", data_dir.path().join("cms.db").display());
        let store = SqlStore::open(&StoreOptions::new(url)).await.expect("the server's store opens");
        let sealer = Sealer::from_key_file(&data_dir.path().join("secrets.key")).expect("the key file");
        let cas = tempfile::Builder::new().prefix("cms-e2e-ca-").tempdir().expect("a temporary directory");
        StoreWriter { store, sealer, cas }
    }

    /// Writes the OS CA of `tenant` (opened from its sealed bundle) into a
    /// directory for `cms-fake-node --ca-dir`.
    pub async fn os_ca_dir(&self, tenant: &str) -> PathBuf {
        let sealed = self.store.secrets(tenant.to_string()).await.expect("secrets read").expect("secrets");
        let bundle = self.sealer.open_bundle(tenant, &sealed).expect("the bundle opens");
        let dir = self.cas.path().join(tenant);
        std::fs::create_dir_all(&dir).expect("the CA directory");
        std::fs::write(dir.join("ca.crt"), bundle.os_ca().cert_pem()).expect("ca.crt");
        std::fs::write(dir.join("ca.key"), bundle.os_ca().key_pem().expose_secret()).expect("ca.key");
        dir
    }

    /// The secrets bundle of `tenant`, opened.
    pub async fn bundle(&self, tenant: &str) -> cms_talos::SecretsBundle {
        let sealed = self.store.secrets(tenant.to_string()).await.expect("secrets read").expect("secrets");
        self.sealer.open_bundle(tenant, &sealed).expect("the bundle opens")
    }

    /// A machine of `tenant` with `role` (`controlplane` or `worker`) whose
    /// node API is at `address`.
    pub async fn machine(&self, tenant: &str, id: &str, role: &str, address: &str) {
        let draft = Draft {
            spec: json!({"managementAddress": address, "connected": true, "providerType": "metal"}),
            status: Some(json!({"stage": "ready", "ready": true, "role": role})),
            ..Draft::default()
        };
        self.store.create(Key::child(Kind::Machine, tenant, id), draft).await.expect("machine created");
    }

    /// A tenant that has no secrets, as when they were never made.
    pub async fn tenant_without_secrets(&self, name: &str) {
        let draft = Draft { spec: json!({"kubernetesVersion": "1.31.1"}), ..Draft::default() };
        self.store.create(Key::tenant(name), draft).await.expect("tenant created");
    }
}

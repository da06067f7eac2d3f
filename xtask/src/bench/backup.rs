//! The memory bound of a tenant's etcd backup: a snapshot of
//! `--backup-snapshot-mib` streamed by a fake control plane must raise the
//! resident memory of `cms-server` (release) by at most [`BOUND`] while it
//! is taken, downloaded and restored, since no snapshot is ever whole in
//! the server's memory.
//!
//! The tenant is stored before the server starts, with two control planes
//! that are fake nodes in this process (only the server's memory is
//! measured): `cp-1` runs etcd and streams the snapshot; `cp-0` took a
//! control-plane config but its etcd waits for its bootstrap, so its
//! `EtcdStatus` fails, the backup comes from `cp-1`, and the restore goes
//! to `cp-0` (the first control plane by name).
//!
//! Around each operation the server's peak resident memory is reset
//! (`5` into `/proc/<pid>/clear_refs`) and read back (`VmHWM`); the rise is
//! that peak less `VmRSS` just before. `VmRSS` is also sampled every 5 ms
//! during the operation, a cross-check that also stands in where the peak
//! cannot be reset.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use cms_fake_node::{FakeEtcd, FakeNode, FakeNodeOptions, snapshot_bytes};
use cms_model::{Kind, MachineSpec, MachineStatus, Tenant};
use cms_nodeapi::{ApplyMode, ApplyRequest, BootstrapRequest, NodeApi, NodeCredentials, NodeTarget};
use cms_store::{Draft, Key, SqlStore, Store, StoreOptions};
use cms_talos::{Sealer, SecretsBundle, ServiceAccountKey};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::servers::Process;
use super::workloads::tenant_body;
use super::{ADMIN_PASSWORD, login_token};

/// The most a backup operation may raise the server's resident memory.
pub(crate) const BOUND: u64 = 8 * MIB;
const MIB: u64 = 1024 * 1024;
/// The tenant whose etcd is backed up.
const TENANT: &str = "bench-backup";
/// How long one operation may take before the bench gives up.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(300);
/// How often `VmRSS` is sampled during an operation.
const SAMPLE_EVERY: Duration = Duration::from_millis(5);

/// One operation's memory: before, at its peak and after.
#[derive(Debug, Clone)]
pub(crate) struct Operation {
    name: &'static str,
    took: Duration,
    /// `VmRSS` just before.
    before: u64,
    /// `VmHWM` after, reset just before; `None` when the reset is refused.
    peak: Option<u64>,
    /// The largest `VmRSS` sampled during the operation.
    sampled: u64,
    /// `VmRSS` just after.
    after: u64,
}

impl Operation {
    /// The peak less the memory before: the figure the bound applies to.
    pub(crate) fn rise(&self) -> u64 {
        self.peak.unwrap_or(self.sampled).saturating_sub(self.before)
    }

    fn sampled_rise(&self) -> u64 {
        self.sampled.saturating_sub(self.before)
    }
}

/// The figures of the backup bench.
#[derive(Debug, Clone)]
pub(crate) struct Figures {
    snapshot: u64,
    /// The server's `VmRSS` once the tenant's store is loaded, before any backup.
    idle: u64,
    operations: Vec<Operation>,
}

impl Figures {
    /// Fails, naming each operation, when one raised the memory above [`BOUND`].
    pub(crate) fn check(&self) -> Result<()> {
        let over: Vec<String> = self
            .operations
            .iter()
            .filter(|operation| operation.rise() > BOUND)
            .map(|operation| format!("{} raised it by {}", operation.name, mib(operation.rise())))
            .collect();
        if !over.is_empty() {
            bail!(
                "the backup memory bound failed: with a {} snapshot the server's resident memory may rise by at \
                 most {}, but {}",
                mib(self.snapshot),
                mib(BOUND),
                over.join(", ")
            );
        }
        Ok(())
    }

    /// The report's section.
    pub(crate) fn markdown(&self) -> String {
        let peak_reset = self.operations.iter().all(|operation| operation.peak.is_some());
        let mut text = format!(
            "\n## Etcd backups: memory\n\n\
             A tenant's etcd snapshot of {} streamed from a fake control plane (in the bench's process) \
             through `cms-server` (release): taken into the backup directory, downloaded (read and \
             discarded by the bench, its SHA-256 checked) and restored to another fake control plane \
             whose etcd waits for its bootstrap. Before each operation the server's peak resident \
             memory is reset (`5` into `/proc/<pid>/clear_refs`); the rise is `VmHWM` after less \
             `VmRSS` before{}. `VmRSS` sampled every 5 ms is the cross-check. Target: at most {} for \
             each operation. The server's `VmRSS` before the first backup: {}.\n\n\
             | Operation | Snapshot | Time | RSS before | Peak | Rise | Rise (sampled) | RSS after | Bound |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|---|\n",
            mib(self.snapshot),
            if peak_reset { "" } else { " (the reset was refused here, so the sampled peak stands in)" },
            mib(BOUND),
            mib(self.idle),
        );
        for operation in &self.operations {
            text.push_str(&format!(
                "| {} | {} | {:.2} s | {} | {} | {} | {} | {} | {} |\n",
                operation.name,
                mib(self.snapshot),
                operation.took.as_secs_f64(),
                mib(operation.before),
                mib(operation.peak.unwrap_or(operation.sampled)),
                mib(operation.rise()),
                mib(operation.sampled_rise()),
                mib(operation.after),
                if operation.rise() <= BOUND { "pass" } else { "FAIL" },
            ));
        }
        text
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / MIB as f64)
}

/// The two fake control planes and what the bench knows of them.
struct Nodes {
    /// `cp-0`: configured, its etcd not started; the restore's target.
    restore_target: FakeNode,
    /// `cp-1`: runs etcd and streams the snapshot.
    source: FakeNode,
}

/// Runs the bench: stores the tenant in `work`, starts the fake nodes and
/// the server, and measures a backup taken, downloaded and restored.
pub(crate) async fn measure(binary: &Path, work: &Path, snapshot_mib: usize) -> Result<Figures> {
    let snapshot = snapshot_mib * MIB as usize;
    let data = work.join("backups-server");
    std::fs::create_dir(&data).with_context(|| format!("creating {}", data.display()))?;
    let bundle = tokio::task::spawn_blocking(|| {
        let key = ServiceAccountKey::generate().context("a service-account key")?;
        SecretsBundle::generate_with_key("1.9.0", key).context("a secrets bundle")
    })
    .await??;
    let nodes = start_nodes(&bundle, snapshot).await?;
    store_tenant(&data, &bundle, &nodes).await?;

    let env = [
        ("CMS_REQUEST_RATE_PER_IDENTITY", "1000000"),
        ("CMS_REQUEST_BURST_PER_IDENTITY", "1000000"),
        ("CMS_BOOTSTRAP_ADMIN_PASSWORD", ADMIN_PASSWORD),
        ("CMS_KEY_POOL", "0"),
        ("CMS_PROVISIONING", "false"),
    ];
    let server = Process::start("cms-server (backups)", binary, &data, &env)?;
    let outcome = operations(&server, &nodes, snapshot).await;
    let status = server.terminate()?;
    let figures = outcome?;
    ensure!(status.success(), "the backup bench's server exited with {status}");
    Ok(figures)
}

async fn operations(server: &Process, nodes: &Nodes, snapshot: usize) -> Result<Figures> {
    let token = login_token(server.addr).await?;
    let client = reqwest::Client::builder().timeout(OPERATION_TIMEOUT).build()?;
    let base = format!("http://{}/api/v1/tenants/{TENANT}/backups", server.addr);
    let bearer = format!("Bearer {token}");
    let expected = format!("{:x}", Sha256::digest(snapshot_bytes(snapshot)));
    // The server settles after its start (the admin's password hash).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let memory = Memory { pid: server.pid() };
    let idle = memory.rss()?;
    println!("server RSS before the first backup: {}", mib(idle));

    let (take, backup) = memory
        .during("take a backup", async {
            let reply = client.post(&base).header("Authorization", &bearer).json(&json!({})).send().await?;
            let status = reply.status();
            let body: serde_json::Value = reply.json().await.context("a backup reply that is not JSON")?;
            ensure!(status.as_u16() == 201, "taking a backup answered {status}: {body}");
            Ok(body)
        })
        .await?;
    ensure!(backup["size"] == snapshot as u64, "the backup has the wrong size: {backup}");
    ensure!(backup["sha256"] == expected.as_str(), "the backup has the wrong SHA-256: {backup}");
    ensure!(backup["machine"] == "cp-1", "the backup came from another machine: {backup}");
    let id = backup["id"].as_str().context("a backup without an id")?.to_string();

    let (download, (size, sha256)) = memory
        .during("download it", async {
            let url = format!("{base}/{id}/download");
            let mut reply = client.get(&url).header("Authorization", &bearer).send().await?;
            ensure!(reply.status().as_u16() == 200, "the download answered {}", reply.status());
            let (mut hasher, mut size) = (Sha256::new(), 0u64);
            while let Some(chunk) = reply.chunk().await.context("the download broke off")? {
                hasher.update(&chunk);
                size += chunk.len() as u64;
            }
            Ok((size, format!("{:x}", hasher.finalize())))
        })
        .await?;
    ensure!(size == snapshot as u64 && sha256 == expected, "the download is not the snapshot");

    let (restore, restored) = memory
        .during("restore it", async {
            let url = format!("{base}/{id}/restore");
            let reply = client.post(&url).header("Authorization", &bearer).json(&json!({})).send().await?;
            let status = reply.status();
            let body: serde_json::Value = reply.json().await.context("a restore reply that is not JSON")?;
            ensure!(status.as_u16() == 200, "the restore answered {status}: {body}");
            Ok(body)
        })
        .await?;
    ensure!(restored["machine"] == "cp-0", "the restore went to another machine: {restored}");
    ensure!(
        nodes.restore_target.recovered_sha256().as_deref() == Some(expected.as_str()),
        "the restored control plane did not get the snapshot's bytes"
    );
    ensure!(
        nodes.source.calls().iter().all(|call| call.method != cms_fake_node::Method::EtcdRecover),
        "the restore reached the control plane that runs etcd"
    );
    Ok(Figures { snapshot: snapshot as u64, idle, operations: vec![take, download, restore] })
}

/// Starts both fake control planes and makes them what the bench needs:
/// `cp-1` a one-member etcd, `cp-0` a configured control plane whose etcd
/// waits for its bootstrap (each in a cluster of its own).
async fn start_nodes(bundle: &SecretsBundle, snapshot: usize) -> Result<Nodes> {
    let start = |hostname: &str| {
        let options = FakeNodeOptions::new(bundle.os_ca().clone())
            .maintenance()
            .hostname(hostname)
            .etcd(FakeEtcd::default())
            .snapshot_size(snapshot);
        FakeNode::start(options)
    };
    let restore_target = start("talos-cp-0").await.context("starting the fake node cp-0")?;
    let source = start("talos-cp-1").await.context("starting the fake node cp-1")?;
    let client = cms_nodeapi::TalosNodeClient::new(Duration::from_secs(10));
    let credentials = NodeCredentials::maintenance();
    for node in [&restore_target, &source] {
        let target = NodeTarget::parse(&node.addr().to_string())?;
        // The fake node takes any config whose machine type is a control plane.
        let request = ApplyRequest {
            config: b"machine:\n  type: controlplane\n".to_vec(),
            mode: ApplyMode::Auto,
            dry_run: false,
        };
        client.apply_configuration(&target, &credentials, request).await?;
    }
    // Configured, the nodes take only the tenant's client certificates.
    let admin = NodeCredentials::for_tenant(bundle, cms_model::UserRole::Admin, Duration::from_secs(600))?;
    let target = NodeTarget::parse(&source.addr().to_string())?;
    client.bootstrap(&target, &admin, BootstrapRequest::default()).await?;
    Ok(Nodes { restore_target, source })
}

/// Writes the tenant, sealed with the key file the server will use, and
/// its two control-plane machines into the store of `data_dir`.
async fn store_tenant(data_dir: &Path, bundle: &SecretsBundle, nodes: &Nodes) -> Result<()> {
    let url = format!("sqlite://{}?mode=rwc", data_dir.join("cms.db").display());
    let store = SqlStore::open(&StoreOptions::new(url)).await.context("opening the backup bench's store")?;
    let sealer = Sealer::from_key_file(&data_dir.join("secrets.key")).context("the secrets key file")?;
    let mut tenant: Tenant = cms_model::parse_json(&tenant_body(TENANT, json!({"bench": "backup"}), None))?;
    tenant.prepare()?;
    let draft = Draft {
        labels: tenant.metadata.labels,
        annotations: tenant.metadata.annotations,
        spec: serde_json::to_value(&tenant.spec)?,
        status: None,
        secrets: Some(sealer.seal_bundle(TENANT, bundle)?),
    };
    store.create(Key::tenant(TENANT), draft).await?;
    for (machine, node) in [("cp-0", &nodes.restore_target), ("cp-1", &nodes.source)] {
        let spec = MachineSpec {
            management_address: Some(node.addr().to_string()),
            connected: true,
            node_group: Some("cp".into()),
            ..MachineSpec::default()
        };
        let status = MachineStatus { stage: "ready".into(), ready: true, ..MachineStatus::default() };
        let draft = Draft {
            spec: serde_json::to_value(&spec)?,
            status: Some(serde_json::to_value(&status)?),
            ..Draft::default()
        };
        store.create(Key::child(Kind::Machine, TENANT, machine), draft).await?;
    }
    Ok(())
}

/// The memory of the server process, from `/proc`.
struct Memory {
    pid: u32,
}

impl Memory {
    /// A field of `/proc/<pid>/status` in bytes, such as `VmRSS`.
    fn field(&self, name: &str) -> Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))?;
        let prefix = format!("{name}:");
        let line =
            status.lines().find(|line| line.starts_with(&prefix)).with_context(|| format!("no {name}"))?;
        let kib: u64 = line.split_whitespace().nth(1).with_context(|| format!("no {name} value"))?.parse()?;
        Ok(kib * 1024)
    }

    fn rss(&self) -> Result<u64> {
        self.field("VmRSS")
    }

    /// Resets the peak (`VmHWM`) to the current resident memory; false
    /// when the kernel refuses.
    fn reset_peak(&self) -> bool {
        std::fs::write(format!("/proc/{}/clear_refs", self.pid), "5").is_ok()
    }

    /// Runs `operation` and measures the server's memory around it.
    async fn during<T>(
        &self,
        name: &'static str,
        operation: impl std::future::Future<Output = Result<T>>,
    ) -> Result<(Operation, T)> {
        let peak_reset = self.reset_peak();
        let before = self.rss()?;
        let sampled = Arc::new(AtomicU64::new(before));
        let done = Arc::new(AtomicBool::new(false));
        let sampler = {
            let (sampled, done, pid) = (sampled.clone(), done.clone(), self.pid);
            std::thread::spawn(move || {
                let memory = Memory { pid };
                while !done.load(Ordering::SeqCst) {
                    if let Ok(rss) = memory.rss() {
                        sampled.fetch_max(rss, Ordering::SeqCst);
                    }
                    std::thread::sleep(SAMPLE_EVERY);
                }
            })
        };
        let started = Instant::now();
        let outcome = tokio::time::timeout(OPERATION_TIMEOUT, operation).await;
        let took = started.elapsed();
        done.store(true, Ordering::SeqCst);
        let _ = sampler.join();
        let value = outcome.with_context(|| format!("{name}: no answer within {OPERATION_TIMEOUT:?}"))??;
        let peak = match peak_reset {
            true => Some(self.field("VmHWM")?),
            false => None,
        };
        let after = self.rss()?;
        let operation =
            Operation { name, took, before, peak, sampled: sampled.load(Ordering::SeqCst).max(after), after };
        println!(
            "  {name}: {:.2} s, RSS {} before, peak {}, rise {} (sampled {}), {} after",
            took.as_secs_f64(),
            mib(before),
            mib(operation.peak.unwrap_or(operation.sampled)),
            mib(operation.rise()),
            mib(operation.sampled_rise()),
            mib(after)
        );
        Ok((operation, value))
    }
}

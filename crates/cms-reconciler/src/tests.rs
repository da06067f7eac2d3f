//! Unit tests of one reconcile: the store is SQLite in a temporary
//! directory, the tool is a fake runner that echoes the workspace back as
//! its state (as `terraform_data` does), and the node API is a mock.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use cms_model::{Kind, Machine, Page, Phase, Tenant};
use cms_store::{Draft, Key, SqlStore, Store, StoreOptions};
use cms_tofu::{Credentials, Invocation, Output, Runner, Tofu, TofuError, TofuOptions};
use serde_json::{Value, json};

use crate::{Action, ApplyOutcome, Context, MockMachineConfigApplier, PendingApplier, reconcile};

/// A fake engine: `apply` records the workspace's `terraform_data`
/// resources as its state, `destroy` fails while `fail_destroy` is set.
#[derive(Default)]
struct FakeEngine {
    state: Mutex<Value>,
    fail_destroy: AtomicBool,
    fail_apply: AtomicBool,
}

#[async_trait]
impl Runner for FakeEngine {
    async fn run(&self, invocation: Invocation) -> Result<Output, TofuError> {
        let ok =
            |stdout: String| Ok(Output { code: Some(0), stdout: stdout.into_bytes(), stderr: Vec::new() });
        let failed = |message: &str| {
            Ok(Output { code: Some(1), stdout: Vec::new(), stderr: message.as_bytes().to_vec() })
        };
        match invocation.args[0].as_str() {
            "apply" if self.fail_apply.load(Ordering::SeqCst) => failed("Error: the cloud said no"),
            "apply" => {
                let main: Value =
                    serde_json::from_slice(&std::fs::read(invocation.dir.join(cms_tofu::MAIN_FILE)).unwrap())
                        .unwrap();
                let resources: Vec<Value> = main["resource"]["terraform_data"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(name, body)| json!({"address": format!("terraform_data.{name}"), "mode": "managed", "type": "terraform_data", "name": name, "values": {"output": body["input"]}}))
                    .collect();
                *self.state.lock().unwrap() = json!({"values": {"root_module": {"resources": resources}}});
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
    ctx: Context,
}

async fn fixture(applier: Arc<dyn crate::MachineConfigApplier>) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/cms.db?mode=rwc", dir.path().display());
    let store: Arc<dyn Store> = SqlStore::open(&StoreOptions::new(url)).await.unwrap();
    let engine = Arc::new(FakeEngine::default());
    let options = TofuOptions {
        binary: "tofu".into(),
        root: dir.path().join("workspaces"),
        timeout: Duration::from_secs(5),
        grace: Duration::from_millis(100),
        plugin_dir: None,
        cli_config: None,
        state_key: None,
    };
    let tofu = Arc::new(Tofu::new(options, Credentials::default(), engine.clone()));
    let ctx = Context { store: store.clone(), tofu, applier, configs: None, resync: Duration::from_secs(60) };
    Fixture { _dir: dir, store, engine, ctx }
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

#[tokio::test]
async fn metal_tenant_converges_and_then_runs_nothing() {
    let mut applier = MockMachineConfigApplier::new();
    applier.expect_apply().times(3).returning(|_| ApplyOutcome::Applied);
    let f = fixture(Arc::new(applier)).await;
    create(f.store.as_ref(), "acme", 2).await;
    assert_eq!(f.store.projection(Some("acme".into())).await.unwrap(), None);

    let action = reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(action, Action::Requeue(Duration::from_secs(60)));
    let status = tenant(f.store.as_ref(), "acme").status;
    assert_eq!(status.phase, Phase::Active);
    assert!(status.ready && status.last_applied_at.is_some());
    assert_eq!(status.observed_generation, 1);
    let machines = machines(f.store.as_ref(), "acme");
    let ids: Vec<_> = machines.iter().map(|m| m.metadata.name.as_str()).collect();
    assert_eq!(ids, ["cp-0", "workers-0", "workers-1"]);
    assert_eq!(machines[1].spec.management_address.as_deref(), Some("10.0.1.1:50000"));
    assert_eq!(machines[1].spec.provider_type.as_deref(), Some("metal"));
    assert_eq!(machines[1].status.stage, "initializing");
    assert_eq!(f.store.projection(Some("acme".into())).await.unwrap().unwrap().len(), 3);

    let runs = f.ctx.tofu.runs();
    reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(f.ctx.tofu.runs(), runs, "unchanged inputs run nothing");
}

#[tokio::test]
async fn scaling_down_removes_the_newest() {
    let f = fixture(Arc::new(PendingApplier)).await;
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
    let configured = status.conditions.iter().find(|c| c.kind == crate::MACHINES_CONFIGURED).unwrap();
    assert_eq!(configured.status, "False", "no node API client: configs are pending, not applied");
}

#[tokio::test]
async fn a_deleted_machine_is_replaced() {
    let f = fixture(Arc::new(PendingApplier)).await;
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
    let f = fixture(Arc::new(PendingApplier)).await;
    create(f.store.as_ref(), "acme", 1).await;
    f.engine.fail_apply.store(true, Ordering::SeqCst);
    let err = reconcile("acme", &f.ctx).await.unwrap_err();
    assert!(err.to_string().contains("the cloud said no"), "{err}");
    let status = tenant(f.store.as_ref(), "acme").status;
    assert_eq!(status.phase, Phase::Failed);
    assert!(status.message.unwrap().contains("the cloud said no"));
    f.engine.fail_apply.store(false, Ordering::SeqCst);
    reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(tenant(f.store.as_ref(), "acme").status.phase, Phase::Active);
}

#[tokio::test]
async fn deletion_keeps_finalizers_until_destroy_succeeds() {
    let f = fixture(Arc::new(PendingApplier)).await;
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
        "spec": {"kubernetesVersion": "1.31.1", "nodeGroups": [
            {"name": "cp", "role": "controlplane", "count": 2, "providerClass": "openstack:m1.large",
             "providerConfig": {"imageId": "img", "networkId": "net"}, "configPatches": []},
        ]}
    }))
    .unwrap();
    assert!(matches!(crate::desired(&tenant, None).await, Err(crate::ReconcileError::Invalid(_))));
    let mut configs = crate::MockMachineConfigs::new();
    configs
        .expect_render()
        .withf(|tenant, group, role| {
            tenant == "acme" && group == "cp" && *role == cms_model::Role::ControlPlane
        })
        .times(1)
        .returning(|_, _, _| Ok("machine: {}\n".to_string()));
    let plan = crate::desired(&tenant, Some(&configs)).await.unwrap();
    assert_eq!(plan.machines.len(), 2);
    assert!(plan.machines.iter().all(|m| m.user_data.as_deref() == Some("machine: {}\n")));
    tenant.spec.node_groups = None;
    assert!(crate::desired(&tenant, None).await.unwrap().machines.is_empty());
}

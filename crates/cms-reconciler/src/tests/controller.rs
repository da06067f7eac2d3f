//! The controller loop (`controller.rs`) over the fixture's store: at most
//! `concurrency` reconciles at once, one task per tenant (a trigger during
//! a run queues one more run), and failures retried with the error policy's
//! backoff, which the periodic resync waits out.
//!
//! Every pass of a metal tenant renders its control planes' config once
//! (`settle.rs`), so the renderer here counts each tenant's passes and
//! those in flight, and holds the passes of the tenants it is told to until
//! the test lets them go. The engine counts each tenant's applies and fails
//! those of the tenants it is told to; the store counts the resync's passes
//! over the tenants. These counts are the markers the tests wait for before
//! saying that something did not happen.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use cms_model::{Kind, LabelSelector, Page, Projected, Role};
use cms_store::{Deleted, Draft, Key, Listing, Object, Store, StoreError, WatchRequest, WatchStream};
use cms_tenancy::{Bootstrapped, KubernetesVersions, MachineConfigs, MockNodeClient, TenancyError};
use cms_tofu::{Invocation, Output, Runner, TofuError};
use serde_json::Value;
use tokio::sync::{Semaphore, watch};
use tokio_util::sync::CancellationToken;

use super::{Fixture, applied_state, create, fixture_with, ok, spec};
use crate::{Backoff, Context, ControllerOptions, run};

/// How long a test waits for a marker before it fails (a hang guard, not a
/// bound on the code's timing).
const GUARD: Duration = Duration::from_secs(60);

/// What the renderer, the engine and the store have seen.
#[derive(Debug, Default, Clone)]
struct Seen {
    /// Each tenant's passes begun.
    passes: BTreeMap<String, usize>,
    /// Each tenant's passes in flight.
    running: BTreeMap<String, usize>,
    /// The most passes in flight at once, in all.
    most: usize,
    /// The most passes of one tenant in flight at once.
    most_of_one: usize,
    /// Each tenant's applies begun, failed ones included.
    applies: BTreeMap<String, usize>,
    /// The periodic resync's passes over the tenants.
    resyncs: usize,
}

impl Seen {
    fn running(&self) -> usize {
        self.running.values().sum()
    }

    fn of(counts: &BTreeMap<String, usize>, tenant: &str) -> usize {
        counts.get(tenant).copied().unwrap_or(0)
    }
}

/// The shared counts, the tenants whose passes are held and the gate that
/// lets them go, and the tenants whose applies fail.
struct Probe {
    seen: watch::Sender<Seen>,
    held: Mutex<BTreeSet<String>>,
    gate: Semaphore,
    failing: Mutex<BTreeSet<String>>,
    states: Mutex<BTreeMap<PathBuf, Value>>,
}

impl Default for Probe {
    fn default() -> Probe {
        Probe {
            seen: watch::Sender::default(),
            held: Mutex::default(),
            gate: Semaphore::new(0),
            failing: Mutex::default(),
            states: Mutex::default(),
        }
    }
}

impl Probe {
    fn seen(&self) -> Seen {
        self.seen.borrow().clone()
    }

    /// Waits until `done` holds of the counts, and gives them.
    async fn until(&self, what: &str, done: impl FnMut(&Seen) -> bool) -> Seen {
        let mut seen = self.seen.subscribe();
        match tokio::time::timeout(GUARD, seen.wait_for(done)).await {
            Ok(found) => found.unwrap().clone(),
            Err(_) => panic!("no sign of {what}: {:?}", self.seen()),
        }
    }

    fn hold(&self, tenants: &[&str]) {
        self.held.lock().unwrap().extend(tenants.iter().map(|tenant| tenant.to_string()));
    }

    /// Lets every held pass go, and holds none from now on.
    fn release(&self) {
        self.held.lock().unwrap().clear();
        self.gate.add_permits(Semaphore::MAX_PERMITS / 2);
    }
}

#[async_trait]
impl MachineConfigs for Probe {
    async fn render(
        &self,
        tenant: String,
        group: String,
        role: Role,
        _: Option<KubernetesVersions>,
    ) -> Result<String, TenancyError> {
        if group == "cp" {
            self.seen.send_modify(|seen| {
                *seen.passes.entry(tenant.clone()).or_default() += 1;
                *seen.running.entry(tenant.clone()).or_default() += 1;
                seen.most = seen.most.max(seen.running());
                seen.most_of_one = seen.most_of_one.max(seen.running[&tenant]);
            });
            if self.held.lock().unwrap().contains(&tenant) {
                self.gate.acquire().await.unwrap().forget();
            }
            self.seen.send_modify(|seen| *seen.running.get_mut(&tenant).unwrap() -= 1);
        }
        Ok(format!("machine:\n  type: {}\n", role.as_str()))
    }
}

/// The fixture's fake engine, with its state kept per workspace (tenants
/// run at once here) and each tenant's applies counted.
#[async_trait]
impl Runner for Probe {
    async fn run(&self, invocation: Invocation) -> Result<Output, TofuError> {
        let tenant = invocation.dir.file_name().unwrap().to_string_lossy().into_owned();
        match invocation.args[0].as_str() {
            "apply" => {
                self.seen.send_modify(|seen| *seen.applies.entry(tenant.clone()).or_default() += 1);
                if self.failing.lock().unwrap().contains(&tenant) {
                    let stderr = b"Error: the cloud said no".to_vec();
                    return Ok(Output { code: Some(1), stdout: Vec::new(), stderr });
                }
                self.states.lock().unwrap().insert(invocation.dir.clone(), applied_state(&invocation.dir));
                ok(String::new())
            }
            "show" => {
                ok(self.states.lock().unwrap().get(&invocation.dir).cloned().unwrap_or_default().to_string())
            }
            _ => ok(String::new()),
        }
    }
}

/// The store, with the resync's passes over every tenant counted.
struct Counted {
    inner: Arc<dyn Store>,
    probe: Arc<Probe>,
}

#[async_trait]
impl Store for Counted {
    fn get(&self, key: &Key) -> Option<Arc<Object>> {
        self.inner.get(key)
    }
    fn list(&self, kind: Kind, tenant: Option<String>, page: Page) -> Listing {
        self.inner.list(kind, tenant, page)
    }
    fn select(&self, kind: Kind, tenant: Option<String>, selector: &LabelSelector, page: Page) -> Listing {
        self.inner.select(kind, tenant, selector, page)
    }
    fn all(&self, kind: Kind, tenant: Option<String>) -> Vec<Arc<Object>> {
        if kind == Kind::Tenant && tenant.is_none() {
            self.probe.seen.send_modify(|seen| seen.resyncs += 1);
        }
        self.inner.all(kind, tenant)
    }
    async fn create(&self, key: Key, draft: Draft) -> Result<Arc<Object>, StoreError> {
        self.inner.create(key, draft).await
    }
    async fn update(&self, key: Key, draft: Draft, expected: u64) -> Result<Arc<Object>, StoreError> {
        self.inner.update(key, draft, expected).await
    }
    async fn update_status(
        &self,
        key: Key,
        status: Value,
        expected: Option<u64>,
    ) -> Result<Arc<Object>, StoreError> {
        self.inner.update_status(key, status, expected).await
    }
    async fn delete(&self, key: Key) -> Result<Deleted, StoreError> {
        self.inner.delete(key).await
    }
    async fn remove_finalizer(&self, key: Key, finalizer: String) -> Result<Option<Arc<Object>>, StoreError> {
        self.inner.remove_finalizer(key, finalizer).await
    }
    async fn watch(&self, kind: Kind, since: Option<u64>) -> Result<WatchStream, StoreError> {
        self.inner.watch(kind, since).await
    }
    async fn watch_with(&self, request: WatchRequest) -> Result<WatchStream, StoreError> {
        self.inner.watch_with(request).await
    }
    async fn set_projection(&self, tenant: String, items: Vec<Projected>) -> Result<(), StoreError> {
        self.inner.set_projection(tenant, items).await
    }
    async fn projection(&self, tenant: Option<String>) -> Result<Option<Vec<Projected>>, StoreError> {
        self.inner.projection(tenant).await
    }
    async fn set_tool_run(&self, tenant: String, run: cms_model::ToolRun) -> Result<(), StoreError> {
        self.inner.set_tool_run(tenant, run).await
    }
    async fn tool_runs(&self, tenant: String) -> Result<Vec<cms_model::ToolRun>, StoreError> {
        self.inner.tool_runs(tenant).await
    }
    async fn secrets(&self, tenant: String) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.secrets(tenant).await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        self.inner.ping().await
    }
    fn revision(&self) -> u64 {
        self.inner.revision()
    }
}

/// The fixture under a running controller.
struct Controlled {
    f: Fixture,
    ctx: Arc<Context>,
    probe: Arc<Probe>,
    shutdown: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// Hosts that take their configs and answer.
fn answering() -> MockNodeClient {
    let mut nodes = MockNodeClient::new();
    nodes.expect_apply_config().returning(|_, _, _| Ok(()));
    nodes.expect_version().returning(|_| Ok("1.14.0".into()));
    nodes.expect_bootstrap().returning(|_| Ok(Bootstrapped::Now));
    nodes
}

async fn controlled(resync: Duration) -> Controlled {
    let probe = Arc::new(Probe::default());
    let f = fixture_with(Arc::new(answering()), probe.clone()).await;
    let tofu = super::fake_tofu(f._dir.path().join("controlled"), Duration::from_secs(60), probe.clone());
    let store = Arc::new(Counted { inner: f.store.clone(), probe: probe.clone() });
    let ctx = Arc::new(Context { store, tofu, resync, ..f.ctx.clone() });
    Controlled { f, ctx, probe, shutdown: CancellationToken::new(), task: None }
}

impl Controlled {
    fn store(&self) -> &dyn Store {
        self.f.store.as_ref()
    }

    fn start(&mut self, concurrency: usize, backoff: Backoff) {
        let options = ControllerOptions { concurrency, backoff, ..ControllerOptions::default() };
        self.task = Some(tokio::spawn(run(self.ctx.clone(), options, self.shutdown.clone())));
    }

    /// Lets held passes go and stops the loop, runs in flight finishing first.
    async fn stop(mut self) {
        self.probe.release();
        self.shutdown.cancel();
        let task = self.task.take().unwrap();
        tokio::time::timeout(GUARD, task).await.expect("the loop stops").unwrap();
    }
}

/// Gives tenant `name` `workers` workers, keeping the service's annotations.
async fn respec(store: &dyn Store, name: &str, workers: u32) {
    let current = store.get(&Key::tenant(name)).unwrap();
    let annotations = current.parse::<cms_model::Tenant>().unwrap().metadata.annotations;
    let draft = Draft { spec: spec(workers), annotations, ..Draft::default() };
    store.update(Key::tenant(name), draft, current.resource_version).await.unwrap();
}

#[tokio::test]
async fn at_most_concurrency_reconciles_run_at_once() {
    let mut c = controlled(Duration::from_millis(50)).await;
    let tenants = ["t0", "t1", "t2", "t3"];
    for name in tenants {
        create(c.store(), name, 1).await;
    }
    c.probe.hold(&tenants);
    c.start(2, Backoff::default());
    let full = c.probe.until("two passes in flight", |seen| seen.running() >= 2).await;
    // Twenty resyncs later (a second), the other two tenants still wait
    // for a slot.
    let seen = c.probe.until("twenty resyncs", |seen| seen.resyncs >= full.resyncs + 20).await;
    assert_eq!(seen.running(), 2, "passes in flight with a concurrency of 2: {seen:?}");
    assert_eq!(seen.passes.len(), 2, "only two tenants had a pass begin: {seen:?}");

    c.probe.release();
    let seen = c.probe.until("a pass of every tenant", |seen| seen.passes.len() == tenants.len()).await;
    assert_eq!(seen.most, 2, "{seen:?}");
    c.stop().await;
}

#[tokio::test]
async fn a_trigger_during_a_run_queues_one_more_run_rather_than_a_second_at_once() {
    let mut c = controlled(Duration::from_secs(3600)).await;
    create(c.store(), "acme", 1).await;
    create(c.store(), "other", 1).await;
    c.probe.hold(&["acme"]);
    c.start(4, Backoff::default());
    c.probe
        .until("acme's pass held and other's done", |seen| {
            Seen::of(&seen.running, "acme") == 1
                && Seen::of(&seen.passes, "other") == 1
                && Seen::of(&seen.running, "other") == 0
        })
        .await;

    // A change of acme while its pass is held, then one of other: the loop
    // takes acme's trigger first, so other's next pass marks it as handled.
    respec(c.store(), "acme", 2).await;
    respec(c.store(), "other", 2).await;
    let seen = c
        .probe
        .until("other's change applied", |seen| {
            Seen::of(&seen.applies, "other") >= 2 && Seen::of(&seen.passes, "other") >= 2
        })
        .await;
    assert_eq!(Seen::of(&seen.passes, "acme"), 1, "a second pass of acme began beside the first: {seen:?}");
    assert_eq!(Seen::of(&seen.applies, "acme"), 1, "{seen:?}");

    // Once the held pass ends, the queued one applies the change.
    c.probe.release();
    let seen = c
        .probe
        .until("acme's change applied", |seen| {
            Seen::of(&seen.applies, "acme") >= 2 && Seen::of(&seen.passes, "acme") >= 2
        })
        .await;
    assert_eq!(seen.most_of_one, 1, "{seen:?}");
    c.stop().await;
}

#[tokio::test]
async fn a_failure_is_retried_with_the_error_policys_backoff() {
    let mut c = controlled(Duration::from_secs(3600)).await;
    create(c.store(), "acme", 1).await;
    c.probe.failing.lock().unwrap().insert("acme".into());
    // No change and no resync in the meantime: only the error policy runs it again.
    c.start(4, Backoff { base: Duration::from_millis(10), max: Duration::from_millis(40) });
    // Fourteen take about 0.5 s with the policy's 40 ms cap; without the
    // cap (80 s), or with the default policy, they do not come within the guard.
    c.probe.until("fourteen failed applies", |seen| Seen::of(&seen.applies, "acme") >= 14).await;

    c.probe.failing.lock().unwrap().clear();
    let seen = c.probe.until("a pass past the apply", |seen| Seen::of(&seen.passes, "acme") >= 1).await;
    assert!(Seen::of(&seen.applies, "acme") >= 15, "{seen:?}");
    c.stop().await;
}

#[tokio::test]
async fn the_resync_leaves_a_failing_tenant_alone_until_its_backoff_is_over() {
    let mut c = controlled(Duration::from_millis(50)).await;
    // The resync wakes tenants by name: the failing one first.
    create(c.store(), "a-failing", 1).await;
    create(c.store(), "b-healthy", 1).await;
    c.probe.failing.lock().unwrap().insert("a-failing".into());
    // One slot: a resync's run of the failing tenant would end before the
    // healthy tenant's run of the same resync began.
    let hour = Duration::from_secs(3600);
    c.start(1, Backoff { base: hour, max: hour });
    let first = c
        .probe
        .until("a failed apply and a healthy pass", |seen| {
            Seen::of(&seen.applies, "a-failing") == 1 && Seen::of(&seen.passes, "b-healthy") >= 1
        })
        .await;
    let seen = c
        .probe
        .until("three resyncs of the healthy tenant", |seen| {
            Seen::of(&seen.passes, "b-healthy") >= Seen::of(&first.passes, "b-healthy") + 3
        })
        .await;
    assert!(seen.resyncs >= 3, "{seen:?}");
    assert_eq!(Seen::of(&seen.applies, "a-failing"), 1, "a resync ran a tenant in its backoff: {seen:?}");

    // A change is no resync: it runs at once.
    respec(c.store(), "a-failing", 2).await;
    c.probe.until("the change's apply", |seen| Seen::of(&seen.applies, "a-failing") == 2).await;
    c.stop().await;
}

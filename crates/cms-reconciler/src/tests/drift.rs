//! Drift detection: the schedule on a clock of its own (jitter, the
//! concurrency cap, the budget), one tenant's check against a fake engine
//! (report, correct, a pending change, a run in progress), and a fleet of
//! 1,000 idle tenants planned by the real engine, on one replica and on
//! two sharing the store.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant as StdInstant};

use async_trait::async_trait;
use cms_model::{DriftMode, Tenant};
use cms_store::{Draft, Key, Leases, SqlStore, Store};
use cms_tofu::{
    Credentials, Drift, DriftedResource, Invocation, Output, ProcessRunner, Runner, Tofu, TofuError,
    TofuOptions,
};
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{applied_state, condition, fixture, ok, spec, tenant, unreachable};
use crate::drift::{self, Checked, DriftOptions, Schedule, Trigger};
use crate::{APPLIED_ANNOTATION, CONDITION_LIMIT, Context, DRIFTED, LeaseOptions, reconcile};

const INTERVAL: Duration = Duration::from_secs(60);

fn names(count: usize) -> Vec<String> {
    (0..count).map(|i| format!("t{i:04}")).collect()
}

#[test]
fn first_plans_spread_over_one_interval_and_later_ones_keep_to_it_give_or_take_the_jitter() {
    let options = DriftOptions { interval: INTERVAL, concurrency: 1000, budget: 1000 };
    let mut schedule = Schedule::new(options);
    let start = Instant::now();
    let tenants = names(200);
    assert!(schedule.take(&tenants, start).len() <= 200);
    let firsts: Vec<Instant> = tenants.iter().filter_map(|name| schedule.next(name)).collect();
    assert_eq!(firsts.len(), 200);
    assert!(firsts.iter().all(|at| *at >= start && *at < start + INTERVAL));
    assert!(firsts.iter().any(|at| *at > start + INTERVAL / 2), "spread over the interval");
    let now = start + INTERVAL;
    let taken = schedule.take(&tenants, now);
    assert_eq!(taken.len(), 200, "every tenant is due within one interval");
    let mut spread = std::collections::BTreeSet::new();
    for name in &taken {
        schedule.done(name, true, now);
        let next = schedule.next(name).unwrap();
        assert!(
            next >= now + INTERVAL.mul_f64(0.9) && next <= now + INTERVAL.mul_f64(1.1),
            "{:?}",
            next - now
        );
        spread.insert(next);
    }
    assert!(spread.len() > 1, "the jitter varies the interval");
    // A deleted tenant is forgotten.
    schedule.take(&tenants[..10], now);
    assert!(schedule.next(&tenants[10]).is_none());
}

#[test]
fn at_most_the_concurrency_at_once_and_the_budget_per_interval() {
    let options = DriftOptions { interval: INTERVAL, concurrency: 2, budget: 5 };
    let mut schedule = Schedule::new(options);
    let tenants = names(1000);
    let start = Instant::now();
    schedule.take(&tenants, start);
    let mut now = start + INTERVAL;
    let mut started: Vec<Instant> = Vec::new();
    // Ten intervals, a check finishing every second.
    while now < start + INTERVAL * 11 {
        let taken = schedule.take(&tenants, now);
        assert!(schedule.running() <= 2, "at most 2 at once");
        started.extend(taken.iter().map(|_| now));
        now += Duration::from_secs(1);
        for name in taken {
            schedule.done(&name, true, now);
        }
    }
    for (index, at) in started.iter().enumerate() {
        let within = started[index..].iter().take_while(|later| **later < *at + INTERVAL).count();
        assert!(within <= 5, "{within} plans started within one interval");
    }
    assert_eq!(started.len(), 50, "the budget is used: 5 per interval over 10 intervals");
}

#[test]
fn a_check_that_planned_nothing_gives_its_budget_back() {
    let options = DriftOptions { interval: INTERVAL, concurrency: 1, budget: 1 };
    let mut schedule = Schedule::new(options);
    let tenants = names(3);
    let start = Instant::now();
    schedule.take(&tenants, start);
    let now = start + INTERVAL;
    let first = schedule.take(&tenants, now);
    assert_eq!(first.len(), 1);
    schedule.done(&first[0], false, now);
    let second = schedule.take(&tenants, now);
    assert_eq!(second.len(), 1, "a skipped check costs no budget");
    assert_ne!(second, first);
    schedule.done(&second[0], true, now);
    assert!(schedule.take(&tenants, now).is_empty(), "the budget of this interval is spent");
}

/// An engine whose `plan` exits with `plan_code` and whose plan file shows
/// `plan_json`; `apply` records the workspace's hosts as its state, and
/// waits while `hold_apply` is set.
#[derive(Default)]
struct DriftEngine {
    state: Mutex<Value>,
    plan_code: AtomicI32,
    plan_json: Mutex<String>,
    plans: AtomicUsize,
    applies: AtomicUsize,
    hold_apply: AtomicBool,
    applying: AtomicBool,
}

#[async_trait]
impl Runner for DriftEngine {
    async fn run(&self, invocation: Invocation) -> Result<Output, TofuError> {
        match invocation.args[0].as_str() {
            "apply" => {
                self.applying.store(true, Ordering::SeqCst);
                while self.hold_apply.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                *self.state.lock().unwrap() = applied_state(&invocation.dir);
                self.applies.fetch_add(1, Ordering::SeqCst);
                self.applying.store(false, Ordering::SeqCst);
                ok(String::new())
            }
            "plan" => {
                self.plans.fetch_add(1, Ordering::SeqCst);
                let code = self.plan_code.load(Ordering::SeqCst);
                Ok(Output { code: Some(code), stdout: Vec::new(), stderr: Vec::new() })
            }
            "show" if invocation.args.last().map(String::as_str) == Some(cms_tofu::PLAN_FILE) => {
                ok(self.plan_json.lock().unwrap().clone())
            }
            "show" => ok(self.state.lock().unwrap().to_string()),
            _ => ok(String::new()),
        }
    }
}

const EDITED: &str = r#"{"resource_changes":[{"address":"terraform_data.cp-0","mode":"managed","type":"terraform_data","name":"cp-0",
  "change":{"actions":["update"],"before":{"input":{"shape":"edited-by-hand"}},"after":{"input":{"shape":"bare"}},"after_unknown":{"output":true}}}]}"#;

/// A reconciler context over a [`DriftEngine`], and the names it woke.
struct Drifting {
    _base: super::Fixture,
    ctx: Context,
    engine: Arc<DriftEngine>,
    woken: Arc<Mutex<Vec<String>>>,
    trigger: Trigger,
}

async fn drifting(drift: Option<Value>) -> Drifting {
    let base = fixture(unreachable()).await;
    let engine = Arc::new(DriftEngine::default());
    let tofu =
        super::fake_tofu(base._dir.path().join("drift-workspaces"), Duration::from_secs(5), engine.clone());
    let ctx = Context { tofu, ..base.ctx.clone() };
    let mut tenant_spec = spec(1);
    if let Some(drift) = drift {
        tenant_spec["drift"] = drift;
    }
    base.store.create(Key::tenant("acme"), Draft { spec: tenant_spec, ..Draft::default() }).await.unwrap();
    reconcile("acme", &ctx).await.unwrap();
    assert!(tenant(base.store.as_ref(), "acme").metadata.annotations.contains_key(APPLIED_ANNOTATION));
    let woken = Arc::new(Mutex::new(Vec::new()));
    let record = woken.clone();
    let trigger: Trigger = Arc::new(move |name| record.lock().unwrap().push(name));
    Drifting { _base: base, ctx, engine, woken, trigger }
}

#[tokio::test]
async fn a_clean_plan_says_no_drift_and_a_changed_resource_is_reported_by_name() {
    let t = drifting(None).await;
    assert_eq!(drift::check("acme", &t.ctx).await.unwrap(), Checked::Clean);
    let status = tenant(t.ctx.store.as_ref(), "acme").status;
    assert_eq!(condition(&status, DRIFTED).status, "False");
    assert_eq!(condition(&status, DRIFTED).reason, "NoDrift");

    t.engine.plan_code.store(2, Ordering::SeqCst);
    *t.engine.plan_json.lock().unwrap() = EDITED.to_string();
    let checked = drift::check("acme", &t.ctx).await.unwrap();
    assert_eq!(checked, Checked::Drifted { resources: 1, correcting: false });
    let acme = tenant(t.ctx.store.as_ref(), "acme");
    let drifted = condition(&acme.status, DRIFTED);
    assert_eq!((drifted.status.as_str(), drifted.reason.as_str()), ("True", "Drifted"));
    assert!(drifted.message.contains("terraform_data.cp-0 (update: input.shape)"), "{}", drifted.message);
    assert!(drifted.message.contains("reported only"), "{}", drifted.message);
    assert!(!drifted.message.contains("edited-by-hand"), "no value: {}", drifted.message);
    // Report only: nothing is applied, nothing woken.
    let (_, planned) = drift::one(Arc::new(t.ctx.clone()), "acme".into(), t.trigger.clone()).await;
    assert!(planned);
    assert!(acme.metadata.annotations.contains_key(APPLIED_ANNOTATION));
    assert!(t.woken.lock().unwrap().is_empty());
    assert_eq!(t.engine.applies.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn correct_mode_applies_the_tenant_again_and_the_apply_clears_the_condition() {
    let t = drifting(Some(json!({"mode": "correct"}))).await;
    assert_eq!(tenant(t.ctx.store.as_ref(), "acme").spec.drift.unwrap().mode, DriftMode::Correct);
    t.engine.plan_code.store(2, Ordering::SeqCst);
    *t.engine.plan_json.lock().unwrap() = EDITED.to_string();
    // The scheduler's check wakes the tenant's reconcile.
    let (_, planned) = drift::one(Arc::new(t.ctx.clone()), "acme".into(), t.trigger.clone()).await;
    assert!(planned);
    assert_eq!(*t.woken.lock().unwrap(), ["acme"]);
    assert_eq!(t.engine.plans.load(Ordering::SeqCst), 1);
    let acme = tenant(t.ctx.store.as_ref(), "acme");
    assert!(!acme.metadata.annotations.contains_key(APPLIED_ANNOTATION));
    assert!(condition(&acme.status, DRIFTED).message.contains("an apply puts them back"));

    // The reconcile it woke applies, and the condition says so.
    reconcile("acme", &t.ctx).await.unwrap();
    assert_eq!(t.engine.applies.load(Ordering::SeqCst), 2);
    let acme = tenant(t.ctx.store.as_ref(), "acme");
    assert!(acme.metadata.annotations.contains_key(APPLIED_ANNOTATION));
    let drifted = condition(&acme.status, DRIFTED);
    assert_eq!((drifted.status.as_str(), drifted.reason.as_str()), ("False", "Applied"));
    t.engine.plan_code.store(0, Ordering::SeqCst);
    assert_eq!(drift::check("acme", &t.ctx).await.unwrap(), Checked::Clean);
}

#[tokio::test]
async fn a_pending_change_an_unapplied_tenant_and_a_run_in_progress_are_not_planned() {
    let t = drifting(None).await;
    crate::rollout::set_annotation(&t.ctx, "acme", APPLIED_ANNOTATION, Some("an older spec".into()))
        .await
        .unwrap();
    assert_eq!(drift::check("acme", &t.ctx).await.unwrap(), Checked::Skipped("pending change"));
    crate::rollout::set_annotation(&t.ctx, "acme", APPLIED_ANNOTATION, None).await.unwrap();
    assert_eq!(drift::check("acme", &t.ctx).await.unwrap(), Checked::Skipped("not applied"));
    assert_eq!(t.engine.plans.load(Ordering::SeqCst), 0);

    // An apply of the same inputs runs: no plan beside it.
    let acme = tenant(t.ctx.store.as_ref(), "acme");
    let plan = crate::plan::desired(&acme, t.ctx.configs.as_deref(), &t.ctx.network, true).await.unwrap();
    let hash = t.ctx.tofu.inputs_hash(&plan).unwrap();
    crate::rollout::set_annotation(&t.ctx, "acme", APPLIED_ANNOTATION, Some(hash)).await.unwrap();
    t.engine.hold_apply.store(true, Ordering::SeqCst);
    let tofu = t.ctx.tofu.clone();
    let apply = tokio::spawn(async move { tofu.apply(&plan, &[]).await.map(|_| ()) });
    while !t.engine.applying.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(drift::check("acme", &t.ctx).await.unwrap(), Checked::Skipped("busy"));
    assert_eq!(t.engine.plans.load(Ordering::SeqCst), 0);
    t.engine.hold_apply.store(false, Ordering::SeqCst);
    apply.await.unwrap().unwrap();
    assert_eq!(drift::check("acme", &t.ctx).await.unwrap(), Checked::Clean);
    assert_eq!(t.engine.plans.load(Ordering::SeqCst), 1);
}

#[test]
fn the_message_names_the_first_resources_and_counts_the_rest_within_its_bound() {
    let resources = (0..50)
        .map(|i| DriftedResource {
            address: format!("oci_core_instance.workers-{i}"),
            action: "update".into(),
            attributes: (0..10).map(|a| format!("attribute_{a}")).collect(),
        })
        .collect();
    let message = drift::message(&Drift { resources }, DriftMode::Report).unwrap();
    assert!(message.starts_with("50 resources differ from the last apply (reported only): "), "{message}");
    assert!(
        message.contains("oci_core_instance.workers-0 (update: attribute_0, attribute_1, attribute_2, +7)")
    );
    assert!(message.ends_with("and 47 more"), "{message}");
    let mut status = cms_model::TenantStatus::default();
    crate::status::set_condition(&mut status, DRIFTED, true, "Drifted", &message);
    assert!(status.conditions[0].message.chars().count() <= CONDITION_LIMIT);
    assert_eq!(drift::message(&Drift::default(), DriftMode::Report), None);
}

/// The real engine behind a runner that counts plans and the most at once.
#[derive(Default)]
struct Counting {
    plans: AtomicUsize,
    running: AtomicUsize,
    most: AtomicUsize,
}

#[async_trait]
impl Runner for Counting {
    async fn run(&self, invocation: Invocation) -> Result<Output, TofuError> {
        if invocation.args[0] != "plan" {
            return ProcessRunner.run(invocation).await;
        }
        self.plans.fetch_add(1, Ordering::SeqCst);
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        let result = ProcessRunner.run(invocation).await;
        self.running.fetch_sub(1, Ordering::SeqCst);
        result
    }
}

fn engine_path() -> std::path::PathBuf {
    let path = std::env::var_os("CMS_TEST_TOFU").map(std::path::PathBuf::from).unwrap_or_else(|| {
        std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
            .join(".cache/cms-tofu-venv/bin/tofu")
    });
    assert!(
        path.is_file(),
        "the test engine {} is missing: run `bash .ci/tofu-engine` (CI does)",
        path.display()
    );
    path
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// 1,000 metal tenants applied once (one real apply, its workspace copied
/// to the others), in a store, with a tool on the real engine.
async fn fleet(count: usize) -> (tempfile::TempDir, Arc<SqlStore>, Arc<Tofu>, Arc<Counting>) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/cms.db?mode=rwc", dir.path().display());
    let store = SqlStore::open(&cms_store::StoreOptions::new(url)).await.unwrap();
    let cli_config = dir.path().join("empty.tfrc");
    std::fs::write(&cli_config, "").unwrap();
    let counting = Arc::new(Counting::default());
    let options = TofuOptions {
        binary: engine_path(),
        root: dir.path().join("workspaces"),
        timeout: Duration::from_secs(60),
        grace: Duration::from_millis(300),
        plugin_dir: None,
        cli_config: Some(cli_config),
        state_key: None,
        backend: cms_tofu::StateBackend::Local,
    };
    let tofu = Arc::new(Tofu::new(options, Credentials::default(), counting.clone()));
    let mut writes = Vec::new();
    for (index, name) in names(count).into_iter().enumerate() {
        let resource: Tenant =
            serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec(1)})).unwrap();
        let plan = crate::plan::desired(&resource, None, &Default::default(), true).await.unwrap();
        if index == 0 {
            tofu.apply(&plan, &[]).await.unwrap();
        } else {
            copy_dir(&tofu.workspace_dir("t0000"), &tofu.workspace_dir(&name));
        }
        let hash = tofu.inputs_hash(&plan).unwrap();
        let annotations = BTreeMap::from([(APPLIED_ANNOTATION.to_string(), hash)]);
        let draft = Draft { spec: spec(1), annotations, ..Draft::default() };
        let store = store.clone();
        writes.push(tokio::spawn(async move { store.create(Key::tenant(&name), draft).await.map(|_| ()) }));
    }
    for write in writes {
        write.await.unwrap().unwrap();
    }
    assert_eq!(counting.plans.load(Ordering::SeqCst), 0);
    (dir, store, tofu, counting)
}

fn context(store: Arc<SqlStore>, tofu: Arc<Tofu>, leases: Option<LeaseOptions>) -> Arc<Context> {
    Arc::new(Context {
        store: store.clone(),
        tofu,
        nodes: unreachable(),
        kube: Arc::new(super::fakes::Kube::over(store)),
        configs: None,
        network: Default::default(),
        resync: Duration::from_secs(60),
        leases,
        state_lock: None,
        rotations: None,
    })
}

/// Runs the schedulers for `intervals` intervals; gives how many
/// intervals had begun by the time they stopped.
async fn run_for(contexts: Vec<Arc<Context>>, options: DriftOptions, intervals: u32) -> u32 {
    let shutdown = CancellationToken::new();
    let started = StdInstant::now();
    let trigger: Trigger = Arc::new(|_| {});
    let tasks: Vec<_> = contexts
        .into_iter()
        .map(|ctx| tokio::spawn(drift::run(ctx, options, trigger.clone(), shutdown.clone())))
        .collect();
    tokio::time::sleep(options.interval * intervals).await;
    shutdown.cancel();
    for task in tasks {
        task.await.unwrap();
    }
    (started.elapsed().as_secs_f64() / options.interval.as_secs_f64()).ceil() as u32
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_idle_tenants_cost_at_most_the_budget_per_interval_two_at_a_time() {
    let (_dir, store, tofu, counting) = fleet(1000).await;
    let options = DriftOptions { interval: Duration::from_secs(2), concurrency: 2, budget: 4 };
    let intervals = run_for(vec![context(store.clone(), tofu, None)], options, 3).await;
    let plans = counting.plans.load(Ordering::SeqCst);
    assert!(plans >= 1, "the fleet is planned");
    assert!(plans <= 4 * intervals as usize, "{plans} plans in {intervals} intervals with a budget of 4");
    assert!(counting.most.load(Ordering::SeqCst) <= 2, "at most 2 plans at once");
    // Each planned tenant is clean (but for up to two plans cut short by
    // the shutdown); the others were not looked at.
    let clean = store
        .all(cms_model::Kind::Tenant, None)
        .iter()
        .filter_map(|object| object.parse::<Tenant>().ok())
        .filter(|tenant| tenant.status.conditions.iter().any(|c| c.kind == DRIFTED))
        .inspect(|tenant| assert_eq!(condition(&tenant.status, DRIFTED).status, "False"))
        .count();
    assert!(clean <= plans && plans - clean <= 2, "{clean} tenants clean after {plans} plans");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_sharing_the_store_keep_to_one_budget_and_one_concurrency() {
    let (_dir, store, tofu, counting) = fleet(200).await;
    let leases: Arc<dyn Leases> = store.clone();
    let replica = |holder: &str| {
        let options =
            LeaseOptions { leases: leases.clone(), holder: holder.into(), ttl: Duration::from_secs(5) };
        context(store.clone(), tofu.clone(), Some(options))
    };
    let options = DriftOptions { interval: Duration::from_secs(2), concurrency: 1, budget: 3 };
    let intervals = run_for(vec![replica("a"), replica("b")], options, 3).await;
    let plans = counting.plans.load(Ordering::SeqCst);
    assert!(plans >= 1, "the fleet is planned");
    assert!(plans <= 3 * intervals as usize, "{plans} plans in {intervals} intervals with a budget of 3");
    assert_eq!(counting.most.load(Ordering::SeqCst), 1, "one plan at a time across both");
}

#[tokio::test]
async fn a_check_while_this_replica_reconciles_the_tenant_leaves_the_reconciles_lease_alone() {
    let t = drifting(None).await;
    let url = format!("sqlite://{}/cms.db?mode=rwc", t._base._dir.path().display());
    let leases: Arc<dyn Leases> = SqlStore::open(&cms_store::StoreOptions::new(url)).await.unwrap();
    let ttl = Duration::from_secs(30);
    // This replica's reconcile of the tenant holds its lease.
    let reconciling =
        leases.acquire_lease("tenant/acme".into(), "r".into(), ttl).await.unwrap().expect("taken");
    let options = LeaseOptions { leases: leases.clone(), holder: "r".into(), ttl };
    let ctx = Arc::new(Context { leases: Some(options), ..t.ctx.clone() });
    let plans = t.engine.plans.load(Ordering::SeqCst);
    let (_, planned) = drift::one(ctx, "acme".into(), t.trigger.clone()).await;
    assert!(!planned, "the check waits for the reconcile");
    assert_eq!(t.engine.plans.load(Ordering::SeqCst), plans);
    let renewed = leases.renew_lease(reconciling, ttl).await.expect("the reconcile still holds its lease");
    leases.release_lease(renewed).await.unwrap();
}

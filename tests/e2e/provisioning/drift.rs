//! Drift detection through the real server and engine: a metal tenant's
//! `terraform_data` edited in the tool's state behind the service's back
//! sets `Drifted` naming the resource and the attribute (no value), in
//! `report` mode only that; switched to `correct`, an apply puts it back
//! and `Drifted` is `False`. Beside it, idle tenants: plans never run
//! beside an apply of their tenant, never more than the configured number
//! at once, and never more than the budget per interval (counted from the
//! engine's own record of its runs). A bad `spec.drift` is a 422. A fleet
//! of 1,000 idle tenants is planned no more than the budget per interval.
//! On `oci` (the fake provider): user data changed in the cloud is no
//! drift; a security group renamed there is, and `correct` names it back.

use std::time::{Duration, Instant};

use cms_e2e::cloud::FakeCloud;
use cms_e2e::nodes::StoreWriter;
use serde_json::{Value, json};

use super::{CONVERGE, Engine, RunSpan, eventually, metal_tenant, provisioned};
use crate::metrics::{scrape, value};

/// The drift interval of the test server.
const INTERVAL: Duration = Duration::from_secs(2);
/// Plans at once.
const CONCURRENCY: usize = 1;
/// Plans per interval: fewer than the tenants, so that the budget binds.
const BUDGET: usize = 3;

fn condition(tenant: &Value, kind: &str) -> Value {
    let conditions = tenant["status"]["conditions"].as_array().cloned().unwrap_or_default();
    conditions.into_iter().find(|c| c["type"] == kind).unwrap_or(Value::Null)
}

/// Every string `from` in `value` becomes `to`.
fn replace_strings(value: &mut Value, from: &str, to: &str) {
    match value {
        Value::String(text) if text == from => *text = to.to_string(),
        Value::Array(items) => items.iter_mut().for_each(|item| replace_strings(item, from, to)),
        Value::Object(fields) => fields.values_mut().for_each(|field| replace_strings(field, from, to)),
        _ => {}
    }
}

/// The most spans of `verb` that overlap at one moment.
fn most_at_once(spans: &[RunSpan], verb: &str) -> usize {
    let mut edges: Vec<(u128, i32)> = Vec::new();
    for span in spans.iter().filter(|span| span.verb == verb) {
        edges.push((span.start, 1));
        edges.push((span.end.unwrap_or(u128::MAX), -1));
    }
    edges.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, step) in edges {
        now += step;
        most = most.max(now);
    }
    most as usize
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_changed_behind_the_services_back_is_reported_then_corrected() {
    let engine = Engine::new();
    let server = engine
        .options()
        .env("CMS_DRIFT_INTERVAL", "2s")
        .env("CMS_DRIFT_CONCURRENCY", CONCURRENCY.to_string())
        .env("CMS_DRIFT_PLANS_PER_INTERVAL", BUDGET.to_string())
        .start()
        .await;
    let started = Instant::now();
    let api = server.api();

    let mut bad = metal_tenant("bad", 1, 0);
    bad["spec"]["drift"] = json!({"mode": "fix"});
    let message = api.post("/api/v1/tenants", &bad).await.expect_error(422, "Invalid");
    assert!(message.contains("spec.drift.mode"), "{message}");

    let names = ["drifty", "idle-a", "idle-b", "idle-c"];
    for name in names {
        api.post("/api/v1/tenants", &metal_tenant(name, 1, 1)).await.expect(201);
    }
    for name in names {
        provisioned(&api, name).await;
    }
    // The first plan finds nothing.
    eventually("a clean plan of drifty", CONVERGE, || async {
        let tenant = api.get("/api/v1/tenants/drifty").await.expect(200);
        (condition(&tenant, "Drifted")["status"] == "False").then_some(())
    })
    .await;

    // Behind the service's back: the control plane's recorded shape.
    let state_file = server.data_dir().path().join("workspaces/drifty/terraform.tfstate");
    let mut state: Value = serde_json::from_slice(&std::fs::read(&state_file).unwrap()).unwrap();
    let resources = state["resources"].as_array_mut().unwrap();
    let cp = resources.iter_mut().find(|r| r["name"] == "cp-0").expect("cp-0 in the state");
    replace_strings(cp, "bare", "edited-behind-its-back");
    state["serial"] = json!(state["serial"].as_u64().unwrap() + 1);
    std::fs::write(&state_file, serde_json::to_vec_pretty(&state).unwrap()).unwrap();

    let drifted = eventually("Drifted naming cp-0", CONVERGE, || async {
        let tenant = api.get("/api/v1/tenants/drifty").await.expect(200);
        let drifted = condition(&tenant, "Drifted");
        (drifted["status"] == "True").then_some(drifted)
    })
    .await;
    let message = drifted["message"].as_str().unwrap();
    assert_eq!(drifted["reason"], "Drifted");
    assert!(message.contains("terraform_data.cp-0 (update: input.shape)"), "{message}");
    assert!(message.contains("reported only"), "{message}");
    assert!(!message.contains("edited-behind-its-back"), "no value is named: {message}");
    let metrics = scrape(&api).await;
    assert!(value(&metrics, "cms_drift_checks_total", &[("outcome", "drifted")]) >= 1.0);
    assert_eq!(value(&metrics, "cms_drifted_tenants", &[]), 1.0);
    // Report only: the state keeps the edit.
    let applies = engine.runs().iter().filter(|verb| *verb == "apply").count();
    assert!(std::fs::read_to_string(&state_file).unwrap().contains("edited-behind-its-back"));

    // Correct: an apply puts it back.
    let mut tenant = api.get("/api/v1/tenants/drifty").await.expect(200);
    tenant["spec"]["drift"] = json!({"mode": "correct"});
    let updated = api.put("/api/v1/tenants/drifty", &tenant).await.expect(200);
    assert_eq!(updated["spec"]["drift"]["mode"], "correct");
    let cleared = eventually("Drifted False after the correction", CONVERGE, || async {
        let tenant = api.get("/api/v1/tenants/drifty").await.expect(200);
        let drifted = condition(&tenant, "Drifted");
        (drifted["status"] == "False").then_some(drifted)
    })
    .await;
    assert!(["Applied", "NoDrift"].contains(&cleared["reason"].as_str().unwrap()), "{cleared}");
    assert!(engine.runs().iter().filter(|verb| *verb == "apply").count() > applies, "an apply ran");
    assert!(!std::fs::read_to_string(&state_file).unwrap().contains("edited-behind-its-back"));
    let metrics = scrape(&api).await;
    assert!(value(&metrics, "cms_drift_corrections_total", &[]) >= 1.0);

    // A further clean plan after the correction.
    let before = engine.spans().iter().filter(|span| span.verb == "plan").count();
    eventually("another plan after the correction", CONVERGE, || async {
        let plans = engine.spans().iter().filter(|span| span.verb == "plan").count();
        (plans > before).then_some(())
    })
    .await;

    // What the engine recorded: never more plans at once than allowed, never
    // a plan beside a run of the same tenant's apply, and no more plans than
    // the budget of the intervals that began.
    let spans = engine.spans();
    let intervals = (started.elapsed().as_secs_f64() / INTERVAL.as_secs_f64()).ceil() as usize;
    let plans: Vec<&RunSpan> = spans.iter().filter(|span| span.verb == "plan").collect();
    assert!(plans.len() <= BUDGET * intervals, "{} plans in {intervals} intervals", plans.len());
    assert!(most_at_once(&spans, "plan") <= CONCURRENCY, "at most {CONCURRENCY} plan at once");
    for plan in &plans {
        // A plan running as the record is read has no end yet.
        let end = plan.end.unwrap_or(u128::MAX);
        let beside = spans
            .iter()
            .filter(|span| span.verb == "apply" && span.workspace == plan.workspace)
            .find(|apply| apply.start < end && apply.end.unwrap_or(u128::MAX) > plan.start);
        assert!(beside.is_none(), "a plan of {} ran beside an apply: {plan:?} {beside:?}", plan.workspace);
    }
    let planned: std::collections::BTreeSet<&str> =
        plans.iter().map(|span| span.workspace.as_str()).collect();
    assert!(planned.len() > 1, "the idle tenants are planned too: {planned:?}");
}

/// Tenants written straight into the stopped server's store, as if each had
/// been applied like `seed`: creating 1,000 through the API would generate
/// an RSA-4096 key each.
const FLEET: usize = 1000;
/// The fleet's budget per interval and plans at once.
const FLEET_BUDGET: usize = 5;
const FLEET_CONCURRENCY: usize = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_idle_tenants_cost_at_most_the_budget_per_interval() {
    let engine = Engine::new();
    let server = engine.options().env("CMS_DRIFT_INTERVAL", "0").start().await;
    let api = server.api();
    // A tenant of no machines, applied by the real engine.
    let spec = json!({"kubernetesVersion": "1.31.1", "nodeGroups": []});
    api.post("/api/v1/tenants", &json!({"metadata": {"name": "seed"}, "spec": spec})).await.expect(201);
    let seed = provisioned(&api, "seed").await;
    let applied = seed["metadata"]["annotations"]["service.io/applied-inputs"].as_str().unwrap().to_string();
    assert!(!engine.runs().contains(&"plan".to_string()), "no drift plan while drift detection is off");
    let stopped = server.terminate().await;

    let data = stopped.data_dir().path();
    let url = format!("sqlite://{}?mode=rwc", data.join("cms.db").display());
    let store = cms_store::SqlStore::open(&cms_store::StoreOptions::new(url)).await.expect("the store opens");
    let names: Vec<String> = (1..FLEET).map(|i| format!("idle-{i:04}")).collect();
    for batch in names.chunks(50) {
        let mut writes = Vec::new();
        for name in batch {
            copy_dir(&data.join("workspaces/seed"), &data.join("workspaces").join(name));
            let annotations = [("service.io/applied-inputs".to_string(), applied.clone())].into();
            let draft = cms_store::Draft { spec: spec.clone(), annotations, ..Default::default() };
            let (store, key) = (store.clone(), cms_store::Key::tenant(name));
            writes.push(tokio::spawn(async move {
                cms_store::Store::create(&*store, key, draft).await.map(|_| ())
            }));
        }
        for write in writes {
            write.await.unwrap().expect("a tenant written");
        }
    }
    drop(store);

    let runs_before = engine.spans().len();
    let server = stopped
        .restart_with(
            engine
                .options()
                .env("CMS_RESYNC_INTERVAL", "10m")
                .env("CMS_DRIFT_INTERVAL", "2s")
                .env("CMS_DRIFT_CONCURRENCY", FLEET_CONCURRENCY.to_string())
                .env("CMS_DRIFT_PLANS_PER_INTERVAL", FLEET_BUDGET.to_string()),
        )
        .await;
    let started = Instant::now();
    let api = server.api();
    assert_eq!(api.get("/api/v1/tenants?limit=1").await.expect(200)["total"], FLEET);
    // Three intervals of plans.
    eventually("plans over three intervals", CONVERGE, || async {
        let plans = engine.spans()[runs_before..].iter().filter(|span| span.verb == "plan").count();
        (plans > 0 && started.elapsed() >= INTERVAL * 3).then_some(())
    })
    .await;
    let spans = engine.spans()[runs_before..].to_vec();
    let intervals = (started.elapsed().as_secs_f64() / INTERVAL.as_secs_f64()).ceil() as usize;
    let plans: Vec<&RunSpan> = spans.iter().filter(|span| span.verb == "plan").collect();
    assert!(
        plans.len() <= FLEET_BUDGET * intervals,
        "{} plans in {intervals} intervals with a budget of {FLEET_BUDGET}",
        plans.len()
    );
    assert!(most_at_once(&spans, "plan") <= FLEET_CONCURRENCY, "at most {FLEET_CONCURRENCY} plans at once");
    assert!(spans.iter().all(|span| span.verb != "apply"), "idle tenants apply nothing");
    assert!(plans.iter().any(|span| span.workspace.starts_with("idle-")), "the written tenants are planned");
    let metrics = scrape(&api).await;
    let checked = value(&metrics, "cms_drift_checks_total", &[("outcome", "clean")]);
    assert!(checked >= 1.0 && checked <= (FLEET_BUDGET * intervals) as f64, "{checked} clean plans");
    assert_eq!(value(&metrics, "cms_drifted_tenants", &[]), 0.0);
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

/// Rewrites the attributes of the first `kind` resource of the fake
/// cloud's record whose attribute `name` is `value` (any, for `None`).
fn edit_record(
    cloud: &FakeCloud,
    kind: &str,
    (name, value): (&str, Option<&str>),
    edit: impl FnOnce(&mut Value),
) {
    let dir = cloud.record_dir().join("resources").join(kind);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let mut resource: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        if value.is_none_or(|value| resource["attributes"][name] == value) {
            edit(&mut resource["attributes"]);
            std::fs::write(&path, serde_json::to_vec_pretty(&resource).unwrap()).unwrap();
            return;
        }
    }
    panic!("no {kind} with {name} {value:?} in the record");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cloud_resource_changed_in_the_cloud_is_drift_and_its_user_data_is_not() {
    let engine = Engine::new();
    let cloud = FakeCloud::start().await;
    let server = cloud
        .options(engine.options())
        .env("OCI_CLI_USER", "ocid1.user.oc1..u")
        .env("OCI_CLI_TENANCY", "ocid1.tenancy.oc1..t")
        .env("OCI_CLI_FINGERPRINT", "00:11")
        .env("OCI_CLI_KEY_CONTENT", "not a key")
        .env("CMS_DRIFT_INTERVAL", "2s")
        .start()
        .await;
    let api = server.api();
    let config = json!({"region": "eu-frankfurt-1", "compartmentOcid": "ocid1.compartment.oc1..c",
        "subnetId": "ocid1.subnet.oc1..s", "ocpus": 2, "memoryGb": 8, "imageId": "ocid1.image.oc1..talos-amd64"});
    let body = json!({"metadata": {"name": "cloudy"}, "spec": {"kubernetesVersion": "1.31.1",
        "drift": {"mode": "correct"}, "nodeGroups": [{"name": "cp", "role": "controlplane", "count": 1,
        "providerClass": "oci:VM.Standard.E4.Flex", "providerConfig": config}]}});
    api.post("/api/v1/tenants", &body).await.expect(201);
    cloud.tenant("cloudy", StoreWriter::open(server.data_dir()).await.bundle("cloudy").await);
    eventually("the instance applied", CONVERGE, || async {
        let tenant = api.get("/api/v1/tenants/cloudy").await.expect(200);
        let applied = tenant["metadata"]["annotations"].get("service.io/applied-inputs").is_some();
        (applied && !cloud.resources("oci_core_instance").is_empty()).then_some(())
    })
    .await;
    eventually("a clean plan", CONVERGE, || async {
        let tenant = api.get("/api/v1/tenants/cloudy").await.expect(200);
        (condition(&tenant, "Drifted")["status"] == "False").then_some(())
    })
    .await;

    // In the cloud: the instance's user data (no drift: the node API owns
    // configs) and the security group's name (drift).
    let plans = engine.spans().iter().filter(|span| span.verb == "plan").count();
    edit_record(&cloud, "oci_core_instance", ("display_name", None), |attributes| {
        attributes["metadata"]["user_data"] = json!("ZWRpdGVkIGluIHRoZSBjbG91ZA==");
    });
    eventually("two more plans", CONVERGE, || async {
        let now = engine.spans().iter().filter(|span| span.verb == "plan" && span.end.is_some()).count();
        (now >= plans + 2).then_some(())
    })
    .await;
    let tenant = api.get("/api/v1/tenants/cloudy").await.expect(200);
    assert_eq!(condition(&tenant, "Drifted")["status"], "False", "user data is no drift: {tenant}");
    let metrics = scrape(&api).await;
    assert_eq!(
        value(&metrics, "cms_drift_checks_total", &[("outcome", "failed")]),
        0.0,
        "every plan went through"
    );
    assert!(value(&metrics, "cms_drift_checks_total", &[("outcome", "clean")]) >= 3.0);

    let applies = engine.runs().iter().filter(|verb| *verb == "apply").count();
    edit_record(
        &cloud,
        "oci_core_network_security_group",
        ("display_name", Some("cloudy-nodes")),
        |attributes| {
            attributes["display_name"] = json!("renamed-in-the-console");
        },
    );
    let drifted = eventually("Drifted naming the security group", CONVERGE, || async {
        let tenant = api.get("/api/v1/tenants/cloudy").await.expect(200);
        let drifted = condition(&tenant, "Drifted");
        let named =
            drifted["message"].as_str().unwrap_or_default().contains("oci_core_network_security_group");
        named.then_some(drifted)
    })
    .await;
    let message = drifted["message"].as_str().unwrap();
    assert!(message.contains("(update: display_name)"), "{message}");
    assert!(!message.contains("renamed-in-the-console"), "{message}");
    // Correct mode: the apply names it again.
    eventually("the security group named again", CONVERGE, || async {
        let names: Vec<Value> = cloud
            .resources("oci_core_network_security_group")
            .iter()
            .map(|resource| resource.attributes["display_name"].clone())
            .collect();
        (names == [json!("cloudy-nodes")]).then_some(())
    })
    .await;
    assert!(engine.runs().iter().filter(|verb| *verb == "apply").count() > applies);
    eventually("Drifted False", CONVERGE, || async {
        let tenant = api.get("/api/v1/tenants/cloudy").await.expect(200);
        (condition(&tenant, "Drifted")["status"] == "False").then_some(())
    })
    .await;
    assert!(cloud.problems().is_empty(), "{:?}", cloud.problems());
}

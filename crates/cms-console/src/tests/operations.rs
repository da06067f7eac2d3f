//! The tenant page's day-to-day operations: upgrade progress and resuming a
//! paused rollout, the health line and "probe now", projected state, and
//! the phase history's first entry.

use cms_model::{Kind, Projected, Tenant};
use cms_store::{Draft, Key, Store};
use http::StatusCode;
use serde_json::json;

use super::{ADMIN, Fixture, VIEWER, location};

/// Writes machine `id` of tenant `demo` in group `cp` running `talos`, with
/// `annotations`.
async fn machine(f: &Fixture, id: &str, talos: &str, annotations: serde_json::Value) {
    let draft = Draft {
        annotations: serde_json::from_value(annotations).expect("annotations"),
        spec: json!({"managementAddress": "10.0.0.1:50000", "nodeGroup": "cp"}),
        status: Some(json!({"stage": "ready", "ready": true, "talosVersion": talos})),
        ..Draft::default()
    };
    f.store.create(Key::child(Kind::Machine, "demo", id), draft).await.expect("machine created");
}

/// Writes tenant `demo` at Talos 1.14.1, with `annotations` and `status`.
async fn tenant(f: &Fixture, annotations: serde_json::Value, status: serde_json::Value) {
    let draft = Draft {
        annotations: serde_json::from_value(annotations).expect("annotations"),
        spec: json!({"kubernetesVersion": "1.31.0", "talosVersion": "1.14.1", "nodeGroups": [{
            "name": "cp", "role": "controlplane", "count": 1, "providerClass": "metal:bare",
            "providerConfig": {"hosts": [{"address": "10.0.0.1"}]}
        }]}),
        status: Some(status),
        ..Draft::default()
    };
    f.store.create(Key::tenant("demo"), draft).await.expect("tenant created");
}

/// Writes tenant `demo` paused at generation 1, with `message` in its status.
async fn paused(f: &Fixture, message: &str) {
    let status = json!({"phase": "updating", "message": message, "conditions": [{
        "type": "Upgrading", "status": "False", "reason": "Paused", "message": message,
        "lastTransitionTime": "2026-11-25T06:00:00Z"}]});
    tenant(f, json!({"service.io/rollout-paused": "1"}), status).await;
}

#[tokio::test]
async fn upgrade_progress_counts_machines_at_their_version_and_in_flight() {
    let f = Fixture::new().await;
    tenant(&f, json!({}), json!({"phase": "updating"})).await;
    machine(&f, "m-1", "1.14.1", json!({})).await;
    machine(&f, "m-2", "v1.14.1", json!({})).await;
    machine(&f, "m-3", "1.14.0", json!({"service.io/upgrading-to": "1.14.1 2026-11-25T06:00:00Z"})).await;
    machine(&f, "m-4", "1.14.0", json!({})).await;
    let admin = f.sign_in(ADMIN).await;

    let page = f.get("/tenants/demo", Some(&admin)).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("2 of 4 machines at their desired Talos version"), "{}", page.body);
    assert!(page.body.contains("<li data-machine=\"m-3\">m-3 to 1.14.1, since <time"), "{}", page.body);
    assert!(!page.body.contains("id=\"resume\""), "nothing is paused");
}

#[tokio::test]
async fn a_paused_rollout_shows_its_reason_and_resumes_for_writers_only() {
    let f = Fixture::new().await;
    paused(&f, "m-1 did not come back with 1.14.1").await;
    let admin = f.sign_in(ADMIN).await;
    let viewer = f.sign_in(VIEWER).await;

    let page = f.get("/tenants/demo", Some(&admin)).await;
    assert!(page.body.contains("The rollout is paused: m-1 did not come back with 1.14.1"), "{}", page.body);
    assert!(page.body.contains("Upgrading: False (Paused)"), "{}", page.body);
    assert!(page.body.contains("action=\"/tenants/demo/resume\""));
    let seen = f.get("/tenants/demo", Some(&viewer)).await;
    assert!(seen.body.contains("The rollout is paused"));
    assert!(!seen.body.contains("/resume"), "a viewer sees no resume button");

    let forged = f.submit("/tenants/demo/resume", &viewer, &[]).await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN, "{}", forged.body);
    let tokenless = f.post("/tenants/demo/resume", Some(&admin), &[]).await;
    assert_eq!(tokenless.status, StatusCode::FORBIDDEN, "{}", tokenless.body);
    let tenant: Tenant = f.store.get(&Key::tenant("demo")).expect("tenant").parse().expect("parses");
    assert!(tenant.metadata.annotations.contains_key("service.io/rollout-paused"), "still paused");

    let resumed = f.submit("/tenants/demo/resume", &admin, &[]).await;
    assert_eq!(location(&resumed), "/tenants/demo");
    let tenant: Tenant = f.store.get(&Key::tenant("demo")).expect("tenant").parse().expect("parses");
    assert!(!tenant.metadata.annotations.contains_key("service.io/rollout-paused"), "resumed");
    assert_eq!(tenant.spec.talos_version.as_deref(), Some("1.14.1"), "the spec is unchanged");
}

#[tokio::test]
async fn probe_now_asks_the_prober_and_the_page_shows_the_result() {
    let f = Fixture::new().await;
    f.tenant("demo", json!({}), "active").await;
    let viewer = f.sign_in(VIEWER).await;

    let page = f.get("/tenants/demo", Some(&viewer)).await;
    assert!(page.body.contains("Health: <span class=\"unknown\">not probed yet</span>"), "{}", page.body);
    let tokenless = f.post("/tenants/demo/probe", Some(&viewer), &[]).await;
    assert_eq!(tokenless.status, StatusCode::FORBIDDEN);

    let probed = f.submit("/tenants/demo/probe", &viewer, &[]).await;
    assert_eq!(location(&probed), "/tenants/demo#health");
    let page = f.get("/tenants/demo", Some(&viewer)).await;
    // Written straight to the store, the tenant has no secrets to probe with.
    assert!(page.body.contains("<span class=\"unreachable\">unreachable ("), "{}", page.body);
    let missing = f.submit("/tenants/nope/probe", &viewer, &[]).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "{}", missing.body);
}

#[tokio::test]
async fn projected_state_and_the_phase_history_are_on_the_page() {
    let f = Fixture::new().await;
    f.tenant("demo", json!({}), "provisioning").await;
    let viewer = f.sign_in(VIEWER).await;
    let page = f.get("/tenants/demo", Some(&viewer)).await;
    assert!(page.body.contains("Not available yet: no provisioning run has completed."), "{}", page.body);
    assert!(page.body.contains("<li data-phase=\"provisioning\"><time"), "{}", page.body);

    let item = Projected {
        tenant: "demo".into(),
        kind: "Machine".into(),
        tf_type: "terraform_data".into(),
        name: "m-1".into(),
        spec: json!({"address": "10.0.0.1", "providerId": "metal://10.0.0.1", "shape": "bare"}),
    };
    f.store.set_projection("demo".into(), vec![item]).await.expect("projection written");
    let page = f.get("/tenants/demo", Some(&viewer)).await;
    assert!(page.body.contains("<tr data-projected=\"m-1\">"), "{}", page.body);
    assert!(page.body.contains("metal://10.0.0.1"));
}

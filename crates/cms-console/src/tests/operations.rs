//! The tenant page's day-to-day operations: the progress of every rolling
//! procedure and resuming a paused rollout, the health line and "probe
//! now", projected state, and the phase history's first entry.

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

/// Writes machine `id` of tenant `demo` in group `cp` with `annotations`
/// and `status`.
async fn machine_with(f: &Fixture, id: &str, annotations: serde_json::Value, status: serde_json::Value) {
    let draft = Draft {
        annotations: serde_json::from_value(annotations).expect("annotations"),
        spec: json!({"managementAddress": "10.0.0.1:50000", "nodeGroup": "cp"}),
        status: Some(status),
        ..Draft::default()
    };
    f.store.create(Key::child(Kind::Machine, "demo", id), draft).await.expect("machine created");
}

/// Writes tenant `demo` at Talos 1.14.1, with `annotations` and `status`.
async fn tenant(f: &Fixture, annotations: serde_json::Value, status: serde_json::Value) {
    tenant_at(f, "1.31.0", annotations, status).await;
}

/// Writes tenant `demo` at Kubernetes `kubernetes` and Talos 1.14.1, with
/// `annotations` and `status`.
async fn tenant_at(f: &Fixture, kubernetes: &str, annotations: serde_json::Value, status: serde_json::Value) {
    let draft = Draft {
        annotations: serde_json::from_value(annotations).expect("annotations"),
        spec: json!({"kubernetesVersion": kubernetes, "talosVersion": "1.14.1", "nodeGroups": [{
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
    let in_flight = "<li data-machine=\"m-3\" data-step=\"talos\">m-3: Talos to 1.14.1, since <time";
    assert!(page.body.contains(in_flight), "{}", page.body);
    assert!(
        page.body.contains("0 of 4 machines at Kubernetes 1.31.0</p>"),
        "no upgrade rolls: {}",
        page.body
    );
    assert!(!page.body.contains("upgrading from"));
    assert!(!page.body.contains("id=\"reboots-pending\""), "no reboot waits");
    assert!(!page.body.contains("id=\"resume\""), "nothing is paused");
}

#[tokio::test]
async fn every_procedure_shows_its_machines_in_flight_and_its_condition() {
    let f = Fixture::new().await;
    let status = json!({"phase": "updating", "conditions": [
        {"type": "KubernetesUpgrading", "status": "True", "reason": "Progress",
         "message": "Kubernetes 1.31.0 to 1.32.0: 1 of 4 machines run kubelet 1.32.0",
         "lastTransitionTime": "2026-11-25T06:00:00Z"},
        {"type": "Rebooting", "status": "False", "reason": "Done", "message": "every machine runs its config",
         "lastTransitionTime": "2026-11-25T05:00:00Z"}]});
    tenant_at(&f, "1.32.0", json!({"service.io/kubernetes-version": "1.31.0"}), status).await;
    let at = |kubernetes: &str| json!({"stage": "ready", "ready": true, "talosVersion": "1.14.1", "kubernetesVersion": kubernetes});
    let components =
        json!({"service.io/upgrading-kubernetes-components": "1.32.0 1.31.0 0a1b2c 2026-11-25T06:00:00Z"});
    machine_with(&f, "m-1", components, at("v1.32.0")).await;
    let kubelet = json!({"service.io/upgrading-kubelet": "1.32.0 1.32.0 0a1b2c 2026-11-25T06:01:00+00:00"});
    machine_with(&f, "m-2", kubelet, at("1.31.0")).await;
    let reboot =
        json!({"service.io/rebooting-for": "0123456789abcdef01234567 1764050400 2026-11-25T06:02:00Z"});
    machine_with(&f, "m-3", reboot, at("1.31.0")).await;
    machine_with(&f, "m-4", json!({"service.io/reboot-pending": "89abcdef0123456789abcdef"}), at("1.31.0"))
        .await;
    let viewer = f.sign_in(VIEWER).await;

    let page = f.get("/tenants/demo", Some(&viewer)).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let body = &page.body;
    assert!(body.contains("4 of 4 machines at their desired Talos version"), "{body}");
    assert!(body.contains("1 of 4 machines at Kubernetes 1.32.0, upgrading from 1.31.0"), "{body}");
    for expected in [
        "data-step=\"kubernetes-components\">m-1: Kubernetes components to 1.32.0, since <time datetime=\"2026-11-25T06:00:00+00:00\"",
        "data-step=\"kubelet\">m-2: kubelet to 1.32.0, since <time datetime=\"2026-11-25T06:01:00+00:00\"",
        "data-step=\"reboot\">m-3: reboot for config <code>0123456789abcdef01234567</code>, since <time",
        "Waiting for a reboot to take a config change: m-4",
        "KubernetesUpgrading: True (Progress): Kubernetes 1.31.0 to 1.32.0: 1 of 4 machines run kubelet 1.32.0",
        "Rebooting: False (Done): every machine runs its config",
    ] {
        assert!(body.contains(expected), "{expected}: {body}");
    }
    assert!(!body.contains("id=\"upgrade-condition\""), "no Upgrading condition is recorded");
    assert!(!body.contains("m-4: "), "a machine waiting for its reboot is not in flight");
}

#[tokio::test]
async fn a_paused_kubernetes_upgrade_names_its_procedure_and_resumes() {
    let f = Fixture::new().await;
    let message = "machine m-1 (upgrading-kubelet to 1.32.0): applying the config: refused";
    let status = json!({"phase": "updating", "message": message, "conditions": [{
        "type": "KubernetesUpgrading", "status": "False", "reason": "Paused", "message": message,
        "lastTransitionTime": "2026-11-25T06:00:00Z"}]});
    let annotations = json!({"service.io/rollout-paused": "1 KubernetesUpgrading",
                             "service.io/kubernetes-version": "1.31.0"});
    tenant_at(&f, "1.32.0", annotations, status).await;
    let admin = f.sign_in(ADMIN).await;

    let page = f.get("/tenants/demo", Some(&admin)).await;
    assert!(page.body.contains(&format!("The rollout is paused: {message}")), "{}", page.body);
    let procedure = "The Kubernetes upgrade paused (condition <code>KubernetesUpgrading</code>).";
    assert!(page.body.contains(procedure), "{}", page.body);
    assert!(page.body.contains("KubernetesUpgrading: False (Paused)"), "{}", page.body);

    let resumed = f.submit("/tenants/demo/resume", &admin, &[]).await;
    assert_eq!(location(&resumed), "/tenants/demo");
    let tenant: Tenant = f.store.get(&Key::tenant("demo")).expect("tenant").parse().expect("parses");
    assert!(!tenant.metadata.annotations.contains_key("service.io/rollout-paused"), "resumed");
    assert_eq!(tenant.metadata.annotations["service.io/kubernetes-version"], "1.31.0", "the rest is kept");
    assert_eq!(tenant.spec.kubernetes_version, "1.32.0", "the spec is unchanged");
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
    assert!(!page.body.contains("id=\"paused-procedure\""), "an older value names no procedure");
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

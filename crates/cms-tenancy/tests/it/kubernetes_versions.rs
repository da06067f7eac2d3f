//! A tenant's `kubernetesVersion` moves one minor at a time, and not past
//! what its machines run by more than one.

use cms_model::{Kind, Tenant};
use cms_store::{Draft, Key};
use cms_tenancy::Tenancy;
use serde_json::json;

use super::{field_error, parse, tenancy};

fn tenant(kubernetes: &str, resource_version: Option<u64>) -> Tenant {
    let mut tenant: Tenant = parse(&format!(
        r#"{{"metadata":{{"name":"acme"}},"spec":{{"kubernetesVersion":"{kubernetes}","talosVersion":"1.9.6",
            "controlPlaneEndpoint":"https://k8s.acme.example:6443"}}}}"#
    ));
    tenant.metadata.resource_version = resource_version;
    tenant
}

/// Replaces the tenant's version, at the version it was last written.
async fn update(tenancy: &Tenancy, kubernetes: &str) -> Result<u64, cms_tenancy::TenancyError> {
    let current = tenancy.find(&Key::tenant("acme")).expect("the tenant").resource_version;
    tenancy.update_tenant(tenant(kubernetes, Some(current))).await.map(|object| object.resource_version)
}

async fn machine(tenancy: &Tenancy, id: &str, kubernetes: &str) {
    let status = json!({"stage": "ready", "ready": true, "role": "worker", "kubernetesVersion": kubernetes});
    let draft = Draft { spec: json!({"connected": true}), status: Some(status), ..Draft::default() };
    tenancy.store().create(Key::child(Kind::Machine, "acme", id), draft).await.expect("a machine");
}

/// The machine `id` now reports `kubernetes`, as the reconciler writes it.
async fn reports(tenancy: &Tenancy, id: &str, kubernetes: &str) {
    let status = json!({"stage": "ready", "ready": true, "role": "worker", "kubernetesVersion": kubernetes});
    let key = Key::child(Kind::Machine, "acme", id);
    tenancy.store().update_status(key, status, None).await.expect("the machine's status");
}

#[tokio::test]
async fn patches_and_the_next_minor_are_allowed() {
    let (tenancy, _dir) = tenancy().await;
    tenancy.create_tenant(tenant("1.30.2", None)).await.expect("created");
    update(&tenancy, "1.30.5").await.expect("a newer patch");
    update(&tenancy, "1.30.1").await.expect("an older patch of the same minor");
    update(&tenancy, "v1.31.0").await.expect("the next minor");
    let stored: Tenant = tenancy.tenant("acme").unwrap();
    assert_eq!(stored.spec.kubernetes_version, "1.31.0");
}

#[tokio::test]
async fn skips_and_downgrades_are_field_errors_naming_the_allowed_step() {
    let (tenancy, _dir) = tenancy().await;
    tenancy.create_tenant(tenant("1.30.2", None)).await.expect("created");
    let (field, message) = field_error(update(&tenancy, "1.32.0").await);
    assert_eq!(field, "spec.kubernetesVersion");
    assert!(message.contains("allowed now: 1.30.x (any patch) or 1.31.x"), "{message}");
    let (field, message) = field_error(update(&tenancy, "1.29.9").await);
    assert_eq!(field, "spec.kubernetesVersion");
    assert!(message.contains("cannot go back"), "{message}");
    let stored: Tenant = tenancy.tenant("acme").unwrap();
    assert_eq!(stored.spec.kubernetes_version, "1.30.2", "nothing refused is written");
}

#[tokio::test]
async fn a_second_step_waits_until_every_machine_finished_the_first() {
    let (tenancy, _dir) = tenancy().await;
    tenancy.create_tenant(tenant("1.30.2", None)).await.expect("created");
    machine(&tenancy, "cp-1", "v1.30.2").await;
    machine(&tenancy, "w-1", "v1.30.2").await;
    update(&tenancy, "1.31.0").await.expect("the first step starts");

    // One machine moved, the other still runs 1.30.
    reports(&tenancy, "cp-1", "v1.31.0").await;
    let (field, message) = field_error(update(&tenancy, "1.32.0").await);
    assert_eq!(field, "spec.kubernetesVersion");
    assert!(message.contains(r#"machine "w-1" still runs Kubernetes v1.30.2"#), "{message}");
    update(&tenancy, "1.31.1").await.expect("a patch of the current step is fine meanwhile");

    reports(&tenancy, "w-1", "v1.31.1").await;
    update(&tenancy, "1.32.0").await.expect("the second step starts once the first finished");
}

#[tokio::test]
async fn the_next_step_waits_for_the_configs_of_the_last_one_before_any_node_reports() {
    let (tenancy, _dir) = tenancy().await;
    tenancy.create_tenant(tenant("1.30.2", None)).await.expect("created");
    // The reconciler recorded the version every machine's config names.
    let object = tenancy.find(&Key::tenant("acme")).expect("the tenant");
    let mut draft_spec: serde_json::Value = serde_json::from_slice(&object.json).unwrap();
    let spec = draft_spec["spec"].take();
    let mut annotations = std::collections::BTreeMap::new();
    annotations.insert(cms_tenancy::KUBERNETES_VERSION_ANNOTATION.to_string(), "1.30.2".to_string());
    let draft = Draft { spec, annotations, ..Draft::default() };
    tenancy.store().update(Key::tenant("acme"), draft, object.resource_version).await.expect("annotated");
    update(&tenancy, "1.31.0").await.expect("the next minor");
    // No machine reports a version yet, but the configs still name 1.30.
    let (field, message) = field_error(update(&tenancy, "1.32.0").await);
    assert_eq!(field, "spec.kubernetesVersion");
    assert!(message.contains("still runs Kubernetes 1.30.2"), "{message}");
}

//! Machine configs: rendered per role with the tenant's and the group's
//! config patches, patches checked on write, and missing refs shown in the
//! tenant's status and refused at render time.

use cms_model::{Kind, UserRole};
use cms_store::{Draft, Key, Store};
use serde_json::{Value, json};

use crate::harness;

const TENANT: &str = r#"{"metadata":{"name":"t1"},"spec":{"kubernetesVersion":"1.31.0","talosVersion":"1.9.6",
    "configPatches":[{"name":"sysctl"}],"nodeGroups":[
    {"name":"cp","role":"controlplane","count":1,"providerClass":"metal:m",
     "providerConfig":{"hosts":[{"address":"10.0.0.7"}]},"configPatches":[{"name":"labels"}]},
    {"name":"w","role":"worker","count":1,"providerClass":"metal:m",
     "providerConfig":{"hosts":[{"address":"10.0.0.8"}]}}]}}"#;

const SYSCTL: &str = r#"{"metadata":{"name":"sysctl"},"spec":{"format":"strategic",
    "patches":[{"machine":{"sysctls":{"net.core.somaxconn":"65535"}}}]}}"#;

const LABELS: &str = r#"{"metadata":{"name":"labels"},"spec":{"format":"jsonpatch","target":"controlplane",
    "patches":[{"op":"add","path":"/machine/nodeLabels","value":{"tier":"control"}}]}}"#;

fn condition(tenant: &Value) -> Value {
    let conditions = tenant["status"]["conditions"].as_array().cloned().unwrap_or_default();
    conditions.into_iter().find(|c| c["type"] == "ConfigPatchesResolved").unwrap_or(Value::Null)
}

async fn machine(store: &dyn Store, id: &str, spec: Value) {
    let draft = Draft { spec, ..Draft::default() };
    store.create(Key::child(Kind::Machine, "t1", id), draft).await.expect("machine");
}

#[actix_web::test]
async fn machine_configs_apply_patches_in_order_and_by_role() {
    let h = harness().await;
    let created = h.post("/api/v1/tenants", TENANT).await;
    assert_eq!(created.status.as_u16(), 201, "{}", created.text());
    let missing = condition(&created.json());
    assert_eq!(
        (missing["status"].as_str(), missing["reason"].as_str()),
        (Some("False"), Some("ConfigPatchNotFound"))
    );
    let message = missing["message"].as_str().unwrap_or_default();
    assert!(message.contains(r#""sysctl" (referenced by the tenant)"#), "{message}");
    assert!(message.contains(r#""labels" (referenced by node group "cp")"#), "{message}");
    assert_eq!(created.json()["metadata"]["resourceVersion"], 1, "the condition is written with the tenant");

    machine(h.store.as_ref(), "cp-0", json!({"nodeGroup": "cp", "managementAddress": "10.0.0.7:50000"}))
        .await;
    machine(h.store.as_ref(), "w-0", json!({"nodeGroup": "w", "managementAddress": "10.0.0.8:50000"})).await;
    let refused = h.get("/api/v1/tenants/t1/machines/cp-0/config").await.error(409, "Conflict");
    assert!(refused.contains(r#""sysctl", "labels""#), "{refused}");

    assert_eq!(h.post("/api/v1/tenants/t1/configpatches", SYSCTL).await.status.as_u16(), 201);
    let half = h.get("/api/v1/tenants/t1").await.json();
    assert!(condition(&half)["message"].as_str().unwrap_or_default().contains("labels"), "{half}");
    assert_eq!(h.post("/api/v1/tenants/t1/configpatches", LABELS).await.status.as_u16(), 201);
    let resolved = h.get("/api/v1/tenants/t1").await.json();
    assert_eq!(condition(&resolved)["status"], "True", "{resolved}");

    let editor = h.user("editor", UserRole::Edit).await;
    let control = h.get_as("/api/v1/tenants/t1/machines/cp-0/config", &editor).await.yaml("t1-cp-0.yaml");
    assert_eq!(control["machine"]["type"], "controlplane");
    assert_eq!(control["cluster"]["clusterName"], "t1");
    assert_eq!(control["cluster"]["controlPlane"]["endpoint"], "https://10.0.0.7:6443");
    assert_eq!(control["machine"]["sysctls"]["net.core.somaxconn"], "65535", "the tenant's patch");
    assert_eq!(control["machine"]["nodeLabels"]["tier"], "control", "the group's patch");
    assert!(control["cluster"]["ca"]["key"].is_string(), "control planes hold the CA keys");

    let worker = h.get("/api/v1/tenants/t1/machines/w-0/config").await.yaml("t1-w-0.yaml");
    assert_eq!(worker["machine"]["type"], "worker");
    assert_eq!(worker["machine"]["sysctls"]["net.core.somaxconn"], "65535");
    assert!(worker["machine"]["nodeLabels"].get("tier").is_none(), "not the control-plane group's patch");
    assert!(worker["cluster"]["ca"].get("key").is_none_or(|key| key == ""), "workers get no CA key");

    let viewer = h.user("viewer", UserRole::View).await;
    h.get_as("/api/v1/tenants/t1/machines/cp-0/config", &viewer).await.error(403, "Forbidden");

    assert_eq!(h.delete("/api/v1/tenants/t1/configpatches/labels").await.status.as_u16(), 204);
    let again = h.get("/api/v1/tenants/t1").await.json();
    assert_eq!(condition(&again)["status"], "False", "deleting a patch shows the ref as missing: {again}");
}

#[actix_web::test]
async fn machines_without_a_group_or_endpoint_are_refused_clearly() {
    let h = harness().await;
    let plain = r#"{"metadata":{"name":"t1"},"spec":{"kubernetesVersion":"1.31.0"}}"#;
    assert_eq!(h.post("/api/v1/tenants", plain).await.status.as_u16(), 201);
    machine(h.store.as_ref(), "lost", json!({"nodeGroup": "gone"})).await;
    let message = h.get("/api/v1/tenants/t1/machines/lost/config").await.error(409, "Conflict");
    assert!(message.contains(r#"node group "gone""#), "{message}");
    machine(h.store.as_ref(), "bare", json!({})).await;
    h.get("/api/v1/tenants/t1/machines/bare/config").await.error(409, "Conflict");
    let worker = r#"{"metadata":{"name":"w"},"spec":{"role":"worker","count":1,"providerClass":"metal:m",
        "providerConfig":{"hosts":[{"address":"10.0.0.8"}]}}}"#;
    assert_eq!(h.post("/api/v1/tenants/t1/node-groups", worker).await.status.as_u16(), 201);
    machine(h.store.as_ref(), "w-0", json!({"nodeGroup": "w", "managementAddress": "10.0.0.8:50000"})).await;
    let message = h.get("/api/v1/tenants/t1/machines/w-0/config").await.error(503, "Unavailable");
    assert!(message.contains("no control-plane endpoint yet"), "{message}");
    h.get("/api/v1/tenants/t1/machines/none/config").await.error(404, "NotFound");
}

#[actix_web::test]
async fn broken_patches_are_refused_on_write() {
    let h = harness().await;
    let plain = r#"{"metadata":{"name":"t1"},"spec":{"kubernetesVersion":"1.31.0"}}"#;
    assert_eq!(h.post("/api/v1/tenants", plain).await.status.as_u16(), 201);
    let bad_version =
        r#"{"metadata":{"name":"p"},"spec":{"format":"strategic","patches":[{"version":"v1alpha2"}]}}"#;
    let message = h.post("/api/v1/tenants/t1/configpatches", bad_version).await.error(422, "Invalid");
    assert!(message.starts_with("spec.patches[0].version"), "{message}");
    let bad_delete = r#"{"metadata":{"name":"p"},"spec":{"format":"strategic","patches":[{"machine":{"$patch":"replace"}}]}}"#;
    let message = h.post("/api/v1/tenants/t1/configpatches", bad_delete).await.error(422, "Invalid");
    assert!(message.starts_with("spec.patches[0]"), "{message}");
    assert_eq!(h.post("/api/v1/tenants/t1/configpatches", SYSCTL).await.status.as_u16(), 201);
    let broken = SYSCTL
        .replace(r#""metadata":{"name":"sysctl"}"#, r#""metadata":{"name":"sysctl","resourceVersion":1}"#)
        .replace(r#"{"machine":{"sysctls""#, r#"{"version":3,"machine":{"sysctls""#);
    let message = h.put("/api/v1/tenants/t1/configpatches/sysctl", &broken).await.error(422, "Invalid");
    assert!(message.starts_with("spec.patches[0].version"), "{message}");
}

//! The cloud user-data limits on write: a config patch that would take an
//! `oci` group's config over 32,000 bytes of base64 is refused with 422,
//! naming the group and the patch, by every write that would do it; the
//! same patch on a `metal` tenant, whose configs go over the node API, is
//! accepted.

use serde_json::{Value, json};

use crate::harness;

/// An `oci` node group `name` of `role` with refs to `patches`.
fn oci_group(name: &str, role: &str, patches: &[&str]) -> Value {
    let refs: Vec<Value> = patches.iter().map(|name| json!({"name": name})).collect();
    json!({"name": name, "role": role, "count": 1, "providerClass": "oci:VM.Standard.A1.Flex",
           "providerConfig": {"region": "eu-frankfurt-1", "compartmentOcid": "ocid1.compartment.oc1..c",
                              "subnetId": "ocid1.subnet.oc1..s", "imageId": "ocid1.image.oc1..i",
                              "ocpus": 2, "memoryGb": 8},
           "configPatches": refs})
}

/// A `metal` node group `name` of `role` on host 10.0.0.`host`, with refs to `patches`.
fn metal_group(name: &str, role: &str, host: u8, patches: &[&str]) -> Value {
    let refs: Vec<Value> = patches.iter().map(|name| json!({"name": name})).collect();
    json!({"name": name, "role": role, "count": 1, "providerClass": "metal:bare",
           "providerConfig": {"hosts": [{"address": format!("10.0.0.{host}")}]}, "configPatches": refs})
}

/// A config patch `name` that writes a file of `bytes` bytes on every machine.
fn file_patch(name: &str, bytes: usize, version: Option<u64>) -> String {
    let file = json!({"content": "x".repeat(bytes), "path": format!("/var/{name}"), "op": "create",
                      "permissions": 420});
    let mut metadata = json!({"name": name});
    if let Some(version) = version {
        metadata["resourceVersion"] = json!(version);
    }
    json!({"metadata": metadata, "spec": {"format": "strategic", "patches": [{"machine": {"files": [file]}}]}})
        .to_string()
}

fn tenant(name: &str, groups: Vec<Value>) -> String {
    json!({"metadata": {"name": name}, "spec": {"kubernetesVersion": "1.31.0", "nodeGroups": groups}})
        .to_string()
}

#[actix_web::test]
async fn a_patch_that_takes_a_cloud_config_over_its_limit_is_refused_naming_it() {
    let h = harness().await;
    // No control-plane endpoint: the configs are measured with the longest stand-in.
    let groups = vec![oci_group("cp", "controlplane", &[]), oci_group("workers", "worker", &["big"])];
    let reply = h.post("/api/v1/tenants", &tenant("cloud", groups)).await;
    assert_eq!(reply.status.as_u16(), 201, "{}", reply.text());

    let message = h
        .post("/api/v1/tenants/cloud/configpatches", &file_patch("big", 40_000, None))
        .await
        .error(422, "Invalid");
    for says in ["spec.patches", "node group \"workers\"", "config patch \"big\"", "32000"] {
        assert!(message.contains(says), "{says}: {message}");
    }
    h.get("/api/v1/tenants/cloud/configpatches/big").await.error(404, "NotFound");

    // Created small, then grown by a replace.
    let reply = h.post("/api/v1/tenants/cloud/configpatches", &file_patch("big", 100, None)).await;
    assert_eq!(reply.status.as_u16(), 201, "{}", reply.text());
    let message = h
        .put("/api/v1/tenants/cloud/configpatches/big", &file_patch("big", 40_000, Some(1)))
        .await
        .error(422, "Invalid");
    assert!(message.contains("config patch \"big\""), "{message}");

    // A large patch nobody refers to is accepted; a node group or a tenant
    // that refers to it is not.
    let reply = h.post("/api/v1/tenants/cloud/configpatches", &file_patch("large", 40_000, None)).await;
    assert_eq!(reply.status.as_u16(), 201, "{}", reply.text());
    let group = json!({"metadata": {"name": "more"}, "spec": oci_group("more", "worker", &["big", "large"])});
    let message = h.post("/api/v1/tenants/cloud/node-groups", &group.to_string()).await.error(422, "Invalid");
    assert!(message.starts_with("spec.configPatches[1]"), "{message}");
    assert!(
        message.contains("node group \"more\"") && message.contains("config patch \"large\""),
        "{message}"
    );
    let mut stored = h.get("/api/v1/tenants/cloud").await.json();
    stored["spec"]["configPatches"] = json!([{"name": "large"}]);
    let message = h.put("/api/v1/tenants/cloud", &stored.to_string()).await.error(422, "Invalid");
    assert!(message.starts_with("spec.configPatches[0]"), "{message}");
    assert!(message.contains("config patch \"large\""), "{message}");

    // The same patch on a metal tenant: no user data, no limit.
    let groups =
        vec![metal_group("cp", "controlplane", 1, &[]), metal_group("workers", "worker", 2, &["big"])];
    let reply = h.post("/api/v1/tenants", &tenant("bare", groups)).await;
    assert_eq!(reply.status.as_u16(), 201, "{}", reply.text());
    let reply = h.post("/api/v1/tenants/bare/configpatches", &file_patch("big", 40_000, None)).await;
    assert_eq!(reply.status.as_u16(), 201, "{}", reply.text());
}

//! Template injection into the tool's configuration: node groups whose
//! shape, metal host or provider settings hold `${file(...)}` or `%{...}`
//! naming a file under the server's directory are refused with 422 naming
//! the field, inline in a tenant, on replace and as node-group resources;
//! a tenant provisioned beside them by the real engine leaves the file's
//! content in no other file, no log, no machine and no projected resource.

use serde_json::{Value, json};

use super::{Engine, hosts, metal_tenant, provisioned};

/// A tenant of one node group of class `class` with `config`.
fn tenant(name: &str, class: &str, config: Value) -> Value {
    json!({
        "metadata": {"name": name},
        "spec": {"kubernetesVersion": "1.31.1", "nodeGroups": [
            {"name": "cp", "role": "controlplane", "count": 1, "providerClass": class, "providerConfig": config},
        ]}
    })
}

/// Every file under `dir`, followed into subdirectories.
fn files(dir: &std::path::Path, into: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(kind) if kind.is_dir() => files(&path, into),
            Ok(kind) if kind.is_file() => into.push(path),
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn template_strings_in_node_groups_are_refused_and_read_no_file() {
    let engine = Engine::new();
    let server = engine.options().start().await;
    let api = server.api();
    // A workspace is `<data>/workspaces/<tenant>`: `../../secrets.key` is this file.
    let marker = format!("cms-injection-marker-{}", std::process::id());
    let secret = server.data_dir().path().join("secrets.key");
    std::fs::write(&secret, &marker).unwrap();
    let read = r#"${file("../../secrets.key")}"#;
    let absolute = format!(r#"%{{ if true }}${{file("{}")}}%{{ endif }}"#, secret.display());

    let host = |provider_id: &str| json!({"hosts": [{"address": "10.0.0.1", "providerId": provider_id}]});
    let oci = |region: &str| {
        json!({"region": region, "compartmentOcid": "ocid1.compartment.oc1..c",
               "subnetId": "ocid1.subnet.oc1..s", "imageId": "ocid1.image.oc1..i", "ocpus": 2, "memoryGb": 8})
    };
    let openstack =
        |group: &str| json!({"imageId": "img-talos", "networkId": "net-1", "securityGroups": [group]});
    let refused = [
        (tenant("evil-a", &format!("metal:{read}"), host("rack1-a")), "spec.nodeGroups[0].providerClass"),
        (tenant("evil-b", "metal:bare", host(read)), "spec.nodeGroups[0].providerConfig.hosts[0].providerId"),
        (
            tenant("evil-c", "metal:bare", host(&absolute)),
            "spec.nodeGroups[0].providerConfig.hosts[0].providerId",
        ),
        (
            tenant("evil-d", "metal:bare", json!({"hosts": [{"address": read}]})),
            "spec.nodeGroups[0].providerConfig.hosts[0].address",
        ),
        (
            tenant("evil-e", "oci:VM.Standard.A1.Flex", oci(&absolute)),
            "spec.nodeGroups[0].providerConfig.region",
        ),
        (
            tenant("evil-f", "openstack:m1.large", openstack(read)),
            "spec.nodeGroups[0].providerConfig.securityGroups[0]",
        ),
    ];
    for (body, field) in &refused {
        let message = api.post("/api/v1/tenants", body).await.expect_error(422, "Invalid");
        assert!(message.contains(field), "{field}: {message}");
        let name = body["metadata"]["name"].as_str().unwrap();
        api.get(&format!("/api/v1/tenants/{name}")).await.expect_error(404, "NotFound");
    }

    // A good tenant, provisioned by the real engine; then the same strings
    // on its node-group resource and in a replace of its spec.
    api.post("/api/v1/tenants", &metal_tenant("acme", 1, 1)).await.expect(201);
    provisioned(&api, "acme").await;
    let group = json!({"metadata": {"name": "extra"}, "spec": {"role": "worker", "count": 1,
        "providerClass": format!("metal:{absolute}"), "providerConfig": {"hosts": hosts(3, 1)}}});
    let message = api.post("/api/v1/tenants/acme/node-groups", &group).await.expect_error(422, "Invalid");
    assert!(message.contains("spec.providerClass"), "{message}");
    let mut replaced = api.get("/api/v1/tenants/acme").await.expect(200);
    replaced["spec"]["nodeGroups"][0]["providerConfig"]["hosts"][0]["providerId"] = json!(read);
    let message = api.put("/api/v1/tenants/acme", &replaced).await.expect_error(422, "Invalid");
    assert!(message.contains("spec.nodeGroups[0].providerConfig.hosts[0].providerId"), "{message}");

    // The refused strings reached nothing, and the file's content is nowhere.
    let projected = api.get("/api/v1/tenants/acme/projected/machine").await.expect(200);
    let machines = api.get("/api/v1/tenants/acme/machines").await.expect(200);
    assert_eq!(projected["items"].as_array().unwrap().len(), 2, "{projected}");
    for body in [projected.to_string(), machines.to_string()] {
        assert!(!body.contains(&marker) && !body.contains("secrets.key"), "{body}");
    }
    let root = server.data_dir().path().parent().unwrap().to_path_buf();
    let mut paths = Vec::new();
    files(&root, &mut paths);
    let workspace = server.data_dir().path().join("workspaces/acme/main.tf.json");
    assert!(paths.contains(&workspace), "{paths:?}");
    for path in paths.iter().filter(|path| **path != secret) {
        // A workspace file being replaced may be gone by now.
        let Ok(bytes) = std::fs::read(path) else { continue };
        let found = bytes.windows(marker.len()).any(|window| window == marker.as_bytes());
        assert!(!found, "{} holds the file's content", path.display());
    }
    assert!(!server.output().contains(&marker), "the server's log holds the file's content");
}

//! Inline `spec.nodeGroups` of a tenant and the node-group resources are two
//! views of one truth.

use cms_e2e::Server;
use cms_e2e::fixtures::{
    TENANTS, control_plane_group, generation, item_names, node_group, node_groups_path, resource_version,
    tenant_path, tenant_with_groups, worker_group,
};
use serde_json::{Value, json};

/// The tenant's inline groups, as `(name, count)` pairs in order.
fn inline(tenant: &Value) -> Vec<(String, u64)> {
    tenant["spec"]["nodeGroups"]
        .as_array()
        .unwrap_or_else(|| panic!("a tenant shows its node groups: {tenant}"))
        .iter()
        .map(|group| {
            (group["name"].as_str().expect("a name").to_string(), group["count"].as_u64().expect("a count"))
        })
        .collect()
}

fn pairs(expected: &[(&str, u64)]) -> Vec<(String, u64)> {
    expected.iter().map(|(name, count)| (name.to_string(), *count)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_and_resource_node_groups_agree() {
    let server = Server::start().await;
    let api = server.api();
    let groups = node_groups_path("theta");

    // Inline groups become resources, and the tenant lists them sorted.
    let body = tenant_with_groups("theta", vec![worker_group("workers", 2, 1), control_plane_group()]);
    let created = api.post(TENANTS, &body).await.expect(201);
    assert_eq!(inline(&created), pairs(&[("cp", 1), ("workers", 2)]));
    let list = api.get(&groups).await.expect(200);
    assert_eq!(item_names(&list), ["cp", "workers"]);
    let workers = api.get(&format!("{groups}/workers")).await.expect(200);
    for field in ["role", "count", "providerClass", "providerConfig"] {
        assert_eq!(workers["spec"][field], worker_group("workers", 2, 1)[field], "spec.{field}");
    }
    assert_eq!(resource_version(&workers), 1);

    // A group created as a resource shows in the tenant, whose spec changed.
    api.post(&groups, &node_group(worker_group("extra", 1, 2))).await.expect(201);
    let tenant = api.get(&tenant_path("theta")).await.expect(200);
    assert_eq!(inline(&tenant), pairs(&[("cp", 1), ("extra", 1), ("workers", 2)]));
    assert!(resource_version(&tenant) > resource_version(&created), "the tenant was written");
    assert!(generation(&tenant) > generation(&created), "the tenant's spec changed");

    // A resource update shows in the tenant.
    let mut scaled = workers.clone();
    scaled["spec"] = worker_group("workers", 3, 1);
    api.put(&format!("{groups}/workers"), &scaled).await.expect(200);
    let tenant = api.get(&tenant_path("theta")).await.expect(200);
    assert_eq!(inline(&tenant), pairs(&[("cp", 1), ("extra", 1), ("workers", 3)]));

    // A resource deleted is gone from the tenant.
    api.delete(&format!("{groups}/extra")).await.expect_empty(204);
    let tenant = api.get(&tenant_path("theta")).await.expect(200);
    assert_eq!(inline(&tenant), pairs(&[("cp", 1), ("workers", 3)]));

    // A tenant PUT without nodeGroups keeps the groups.
    let mut without = tenant.clone();
    without["spec"].as_object_mut().expect("a spec object").remove("nodeGroups");
    without["spec"]["kubernetesVersion"] = json!("1.31.2");
    let kept = api.put(&tenant_path("theta"), &without).await.expect(200);
    assert_eq!(inline(&kept), pairs(&[("cp", 1), ("workers", 3)]));
    assert_eq!(item_names(&api.get(&groups).await.expect(200)), ["cp", "workers"]);

    // A tenant PUT with nodeGroups replaces the set: one changed, one new, one gone.
    let mut replace = kept.clone();
    let mut cp = control_plane_group();
    cp["providerConfig"] =
        json!({"hosts": [{"address": "10.0.0.1"}, {"address": "10.0.0.2"}, {"address": "10.0.0.3"}]});
    cp["count"] = json!(3);
    replace["spec"]["nodeGroups"] = json!([cp, worker_group("batch", 1, 3)]);
    let replaced = api.put(&tenant_path("theta"), &replace).await.expect(200);
    assert_eq!(inline(&replaced), pairs(&[("batch", 1), ("cp", 3)]));
    assert_eq!(item_names(&api.get(&groups).await.expect(200)), ["batch", "cp"]);
    assert_eq!(api.get(&format!("{groups}/cp")).await.expect(200)["spec"]["count"], 3);
    api.get(&format!("{groups}/workers")).await.expect_error(404, "NotFound");

    // An empty list removes every group.
    let mut empty = replaced.clone();
    empty["spec"]["nodeGroups"] = json!([]);
    let emptied = api.put(&tenant_path("theta"), &empty).await.expect(200);
    assert_eq!(inline(&emptied), pairs(&[]));
    assert_eq!(api.get(&groups).await.expect(200), json!({"items": [], "total": 0}));
}

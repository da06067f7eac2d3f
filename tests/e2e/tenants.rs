//! Create, get, list, update and delete of tenants.

use cms_e2e::Server;
use cms_e2e::fixtures::{
    TENANTS, control_plane_group, generation, resource_version, tenant_path, tenant_with_groups,
};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_lifecycle_over_http() {
    let server = Server::start().await;
    let api = server.api();

    let mut body = tenant_with_groups("alpha", vec![control_plane_group()]);
    body["metadata"]["labels"] = json!({"team": "platform"});
    body["spec"]["kubernetesVersion"] = json!("v1.31.1");
    let created = api.post(TENANTS, &body).await.expect(201);
    assert_eq!(created["metadata"]["name"], "alpha");
    assert_eq!(created["metadata"]["labels"], json!({"team": "platform"}));
    assert_eq!(resource_version(&created), 1);
    assert_eq!(generation(&created), 1);
    assert!(created["metadata"]["createdAt"].is_string(), "createdAt is set: {created}");
    assert!(created["metadata"]["updatedAt"].is_string(), "updatedAt is set: {created}");
    assert_eq!(created["spec"]["kubernetesVersion"], "1.31.1", "a leading v is dropped");
    assert_eq!(created["spec"]["talosVersion"], "1.9.0");
    assert_eq!(created["spec"]["podNetwork"], json!(["10.244.0.0/16"]), "the default pod network");
    assert_eq!(created["spec"]["serviceNetwork"], json!(["10.96.0.0/12"]), "the default service network");
    assert_eq!(created["spec"]["nodeGroups"][0]["name"], "cp");
    assert!(created["status"].is_object(), "a tenant has a status object: {created}");

    let fetched = api.get(&tenant_path("alpha")).await.expect(200);
    assert_eq!(fetched, created, "GET shows what POST returned");

    let list = api.get(TENANTS).await.expect(200);
    assert_eq!(list["total"], 1);
    assert_eq!(list["items"], json!([created]));

    let mut update = fetched.clone();
    update["spec"]["kubernetesVersion"] = json!("1.31.2");
    update["spec"]["podNetwork"] = json!(["10.200.0.0/16"]);
    let updated = api.put(&tenant_path("alpha"), &update).await.expect(200);
    assert_eq!(resource_version(&updated), 2);
    assert_eq!(generation(&updated), 2);
    assert_eq!(updated["spec"]["kubernetesVersion"], "1.31.2");
    assert_eq!(updated["spec"]["podNetwork"], json!(["10.200.0.0/16"]));
    assert_eq!(updated["metadata"]["createdAt"], created["metadata"]["createdAt"], "createdAt never changes");
    assert_eq!(api.get(&tenant_path("alpha")).await.expect(200), updated, "GET shows the update");

    let deleting = api.delete(&tenant_path("alpha")).await.expect(202);
    assert!(deleting["metadata"]["deletionTimestamp"].is_string(), "deletion has begun: {deleting}");
    assert_eq!(
        api.get(&tenant_path("alpha")).await.expect(200),
        deleting,
        "the record stays while finalizers remain"
    );

    api.get(&tenant_path("missing")).await.expect_error(404, "NotFound");
    api.delete(&tenant_path("missing")).await.expect_error(404, "NotFound");
    let mut ghost = update.clone();
    ghost["metadata"]["name"] = json!("ghost");
    api.put(&tenant_path("ghost"), &ghost).await.expect_error(404, "NotFound");
}

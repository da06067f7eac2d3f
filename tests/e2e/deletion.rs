//! Tenant deletion: 202, the deletion timestamp and both finalizers, and a
//! record that stays until the reconciler clears them.

use cms_e2e::Server;
use cms_e2e::fixtures::{
    TENANTS, config_patch, config_patches_path, control_plane_group, item_names, node_group,
    node_groups_path, tenant_path, tenant_with_groups, worker_group,
};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_delete_is_accepted_and_finalizers_show() {
    let server = Server::start().await;
    let api = server.api();
    let created =
        api.post(TENANTS, &tenant_with_groups("omega", vec![control_plane_group()])).await.expect(201);
    assert!(created["metadata"].get("deletionTimestamp").is_none(), "a live tenant is not being deleted");

    let deleting = api.delete(&tenant_path("omega")).await.expect(202);
    let timestamp = deleting["metadata"]["deletionTimestamp"].as_str().expect("deletionTimestamp is set");
    assert!(timestamp.ends_with('Z') || timestamp.ends_with("+00:00"), "an ISO 8601 UTC time: {timestamp}");
    assert_eq!(deleting["metadata"]["finalizers"], json!(["service.io/machines", "service.io/secrets"]));
    assert!(
        deleting["metadata"]["resourceVersion"].as_u64() > created["metadata"]["resourceVersion"].as_u64(),
        "beginning deletion is a write: {deleting}"
    );
    assert_eq!(deleting["spec"], created["spec"], "the spec stays as it was");

    // The record stays, in GET and in the list.
    assert_eq!(api.get(&tenant_path("omega")).await.expect(200), deleting);
    assert_eq!(item_names(&api.get(TENANTS).await.expect(200)), ["omega"]);
    assert_eq!(item_names(&api.get(&node_groups_path("omega")).await.expect(200)), ["cp"]);

    // Deleting again is accepted and changes nothing.
    assert_eq!(api.delete(&tenant_path("omega")).await.expect(202), deleting);

    // A tenant being deleted refuses spec changes and new children.
    let mut change = deleting.clone();
    change["spec"]["kubernetesVersion"] = json!("1.31.2");
    api.put(&tenant_path("omega"), &change).await.expect_error(409, "Conflict");
    let group = node_group(worker_group("late", 1, 9));
    api.post(&node_groups_path("omega"), &group).await.expect_error(409, "Conflict");
    api.post(&config_patches_path("omega"), &config_patch("late")).await.expect_error(409, "Conflict");
    assert_eq!(api.get(&tenant_path("omega")).await.expect(200), deleting);
}

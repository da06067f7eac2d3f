//! Create, get, list, update and delete of node-group resources.

use cms_e2e::Server;
use cms_e2e::fixtures::{
    TENANTS, generation, item_names, node_group, node_groups_path, resource_version, tenant, worker_group,
};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_group_lifecycle_over_http() {
    let server = Server::start().await;
    let api = server.api();
    api.post(TENANTS, &tenant("beta")).await.expect(201);
    let groups = node_groups_path("beta");

    let empty = api.get(&groups).await.expect(200);
    assert_eq!(empty, json!({"items": [], "total": 0}));

    let mut body = node_group(worker_group("workers", 2, 1));
    body["metadata"]["labels"] = json!({"pool": "general"});
    let created = api.post(&groups, &body).await.expect(201);
    assert_eq!(created["metadata"]["name"], "workers");
    assert_eq!(created["metadata"]["labels"], json!({"pool": "general"}));
    assert_eq!(resource_version(&created), 1);
    assert_eq!(generation(&created), 1);
    assert_eq!(created["spec"]["role"], "worker");
    assert_eq!(created["spec"]["count"], 2);
    assert_eq!(created["spec"]["providerClass"], "metal:bare");
    assert_eq!(created["spec"]["providerConfig"], worker_group("workers", 2, 1)["providerConfig"]);

    let path = format!("{groups}/workers");
    let fetched = api.get(&path).await.expect(200);
    assert_eq!(fetched, created, "GET shows what POST returned");

    // A node group may leave spec.name out; it is the metadata name.
    let mut unnamed = node_group(worker_group("spare", 1, 2));
    unnamed["spec"].as_object_mut().expect("a spec object").remove("name");
    api.post(&groups, &unnamed).await.expect(201);

    let list = api.get(&groups).await.expect(200);
    assert_eq!(item_names(&list), ["spare", "workers"], "sorted by name");
    assert_eq!(list["total"], 2);

    let mut update = fetched.clone();
    update["spec"] = worker_group("workers", 3, 1);
    let updated = api.put(&path, &update).await.expect(200);
    assert_eq!(updated["spec"]["count"], 3);
    assert_eq!(resource_version(&updated), 2);
    assert_eq!(generation(&updated), 2);
    assert_eq!(api.get(&path).await.expect(200), updated);

    // The count must be covered by the listed metal hosts.
    let mut short = updated.clone();
    short["spec"]["count"] = json!(4);
    let message = api.put(&path, &short).await.expect_error(422, "Invalid");
    assert!(message.contains("spec.providerConfig.hosts"), "the message names the field: {message}");

    api.delete(&path).await.expect_empty(204);
    api.get(&path).await.expect_error(404, "NotFound");
    api.delete(&path).await.expect_error(404, "NotFound");
    assert_eq!(item_names(&api.get(&groups).await.expect(200)), ["spare"]);

    api.get(&node_groups_path("nobody")).await.expect_error(404, "NotFound");
    api.post(&node_groups_path("nobody"), &body).await.expect_error(404, "NotFound");
    api.post(&groups, &node_group(worker_group("spare", 1, 3))).await.expect_error(409, "Conflict");
}

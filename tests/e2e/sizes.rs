//! The caps on sizes through the API: a node group's `count` over
//! `CMS_MAX_GROUP_COUNT`, and a tenant's machines over
//! `CMS_MAX_MACHINES_PER_TENANT`, are 422 naming the field, and nothing is
//! written; a tenant may shrink.

use cms_e2e::Server;
use cms_e2e::fixtures::{TENANTS, node_group, node_groups_path, tenant, tenant_with_groups, worker_group};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_over_the_caps_are_422_naming_the_field() {
    let server = Server::options()
        .env("CMS_MAX_GROUP_COUNT", "3")
        .env("CMS_MAX_MACHINES_PER_TENANT", "5")
        .start()
        .await;
    let api = server.api();

    let big = tenant_with_groups("big", vec![worker_group("w", 4, 1)]);
    let message = api.post(TENANTS, &big).await.expect_error(422, "Invalid");
    assert!(message.starts_with("spec.nodeGroups[0].count: "), "{message}");
    assert!(message.contains("over the limit of 3"), "{message}");
    let wide = tenant_with_groups("wide", vec![worker_group("a", 3, 1), worker_group("b", 3, 2)]);
    let message = api.post(TENANTS, &wide).await.expect_error(422, "Invalid");
    assert!(message.starts_with("spec.nodeGroups: "), "{message}");
    assert!(message.contains("would have 6 machines") && message.contains("limit of 5"), "{message}");
    api.get(&format!("{TENANTS}/wide")).await.expect_error(404, "NotFound");

    api.post(TENANTS, &tenant("beta")).await.expect(201);
    let groups = node_groups_path("beta");
    let message = api.post(&groups, &node_group(worker_group("w", 4, 1))).await.expect_error(422, "Invalid");
    assert!(message.starts_with("spec.count: "), "{message}");
    api.post(&groups, &node_group(worker_group("a", 3, 1))).await.expect(201);
    let message = api.post(&groups, &node_group(worker_group("b", 3, 2))).await.expect_error(422, "Invalid");
    assert!(message.starts_with("spec.count: ") && message.contains("would have 6 machines"), "{message}");
    api.get(&format!("{groups}/b")).await.expect_error(404, "NotFound");
    let created = api.post(&groups, &node_group(worker_group("b", 2, 2))).await.expect(201);

    let mut grown = created.clone();
    grown["spec"] = worker_group("b", 3, 2);
    let message = api.put(&format!("{groups}/b"), &grown).await.expect_error(422, "Invalid");
    assert!(message.contains("would have 6 machines"), "{message}");
    let mut shrunk = created;
    shrunk["spec"] = worker_group("b", 1, 2);
    api.put(&format!("{groups}/b"), &shrunk).await.expect(200);
}

//! Machines: read-only over HTTP, since only the reconciler creates them.

use cms_e2e::fixtures::{TENANTS, control_plane_group, tenant_path, tenant_with_groups};
use cms_e2e::{Method, Server};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn machines_are_listed_and_never_created_over_http() {
    let server = Server::start().await;
    let api = server.api();
    api.post(TENANTS, &tenant_with_groups("delta", vec![control_plane_group()])).await.expect(201);
    let machines = format!("{}/machines", tenant_path("delta"));

    assert_eq!(api.get("/api/v1/machines").await.expect(200), json!({"items": [], "total": 0}));
    assert_eq!(api.get(&machines).await.expect(200), json!({"items": [], "total": 0}));

    let missing = format!("{machines}/m-1");
    api.get(&missing).await.expect_error(404, "NotFound");
    api.delete(&missing).await.expect_error(404, "NotFound");
    let status = json!({
        "metadata": {"name": "m-1", "resourceVersion": 1},
        "spec": {},
        "status": {"stage": "ready", "ready": true}
    });
    api.put(&format!("{missing}/status"), &status).await.expect_error(404, "NotFound");
    api.get(&format!("{}/machines", tenant_path("nobody"))).await.expect_error(404, "NotFound");

    // There is no POST for machines: the path exists, the method does not.
    let post = api.request(Method::POST, &machines).json(&status);
    api.send(post).await.expect_error(405, "MethodNotAllowed");
}

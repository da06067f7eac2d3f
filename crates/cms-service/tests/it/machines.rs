//! Machines: made by the reconciler (here, directly in the store), then read,
//! listed, given a status and deleted through the API.

use cms_model::Kind;
use cms_store::{Draft, Key, Store};
use serde_json::json;

use crate::harness;

#[actix_web::test]
async fn machines_are_read_listed_updated_and_deleted() {
    let h = harness().await;
    h.tenant("t1").await;
    h.tenant("t2").await;
    for (tenant, id) in [("t2", "m-a"), ("t1", "m-b"), ("t1", "m-a")] {
        let draft = Draft {
            spec: json!({"managementAddress": "10.0.0.1:50000", "providerType": "metal", "shape": "m"}),
            ..Draft::default()
        };
        h.store.create(Key::child(Kind::Machine, tenant, id), draft).await.expect("machine created");
    }

    let reply = h.get("/api/v1/tenants/t1/machines/m-a").await;
    assert_eq!(reply.status.as_u16(), 200);
    let machine = reply.json();
    assert_eq!(machine["spec"]["managementAddress"], "10.0.0.1:50000");
    let version = machine["metadata"]["resourceVersion"].as_u64().unwrap_or_default();

    let all = h.get("/api/v1/machines?limit=2").await.json();
    assert_eq!(all["total"], 3);
    let names: Vec<_> =
        all["items"].as_array().into_iter().flatten().map(|m| m["metadata"]["name"].clone()).collect();
    assert_eq!(names, [json!("m-a"), json!("m-b")], "sorted by tenant then name: {all}");
    let second_page = h.get("/api/v1/machines?limit=2&offset=2").await.json();
    assert_eq!(second_page["items"][0]["metadata"]["name"], "m-a");
    let of_t1 = h.get("/api/v1/tenants/t1/machines").await.json();
    assert_eq!(of_t1["total"], 2);

    let status = |version: u64| {
        format!(
            r#"{{"metadata":{{"name":"m-a","resourceVersion":{version}}},"spec":{{"connected":true}},
                "status":{{"stage":"ready","ready":true,"role":"worker"}}}}"#
        )
    };
    let reply = h.put("/api/v1/tenants/t1/machines/m-a/status", &status(version)).await;
    assert_eq!(reply.status.as_u16(), 200, "{:?}", reply.body);
    let updated = reply.json();
    assert_eq!(updated["status"]["stage"], "ready");
    assert_eq!(updated["metadata"]["resourceVersion"], version + 1);
    assert_eq!(updated["spec"], machine["spec"], "spec is not written by a status update");

    h.put("/api/v1/tenants/t1/machines/m-a/status", &status(version)).await.error(409, "Conflict");
    let missing = status(1).replace("m-a", "m-z");
    h.put("/api/v1/tenants/t1/machines/m-z/status", &missing).await.error(404, "NotFound");

    let reply = h.delete("/api/v1/tenants/t1/machines/m-a").await;
    assert_eq!(reply.status.as_u16(), 202);
    assert!(reply.json()["metadata"]["deletionTimestamp"].is_string(), "{}", reply.json());
    assert_eq!(reply.json()["metadata"]["name"], "m-a");
    // Only t1's m-a is marked: t2's machine of the same name and t1's other
    // machine stay as they were.
    let marked = h.get("/api/v1/tenants/t1/machines/m-a").await.json();
    assert!(marked["metadata"]["deletionTimestamp"].is_string(), "{marked}");
    for other in ["/api/v1/tenants/t2/machines/m-a", "/api/v1/tenants/t1/machines/m-b"] {
        let kept = h.get(other).await;
        assert_eq!(kept.status.as_u16(), 200, "{other}");
        assert!(kept.json()["metadata"]["deletionTimestamp"].is_null(), "{other}: {}", kept.json());
    }
    h.get("/api/v1/tenants/t3/machines").await.error(404, "NotFound");
}

//! Tenants end to end: create, update with optimistic concurrency, child
//! resources, delete, and the watch stream.

use actix_web::test::TestRequest;
use serde_json::json;

use crate::{harness, next_chunk};

#[actix_web::test]
async fn tenant_lifecycle() {
    let h = harness().await;
    let created = h.tenant("t1").await;
    assert_eq!(created["metadata"]["resourceVersion"], 1);
    assert_eq!(created["spec"]["podNetwork"], json!(["10.244.0.0/16"]));

    let update = r#"{"metadata":{"name":"t1","resourceVersion":1,"labels":{"a":"b"}},"spec":{"kubernetesVersion":"1.32.0"}}"#;
    let reply = h.put("/api/v1/tenants/t1", update).await;
    assert_eq!(reply.status.as_u16(), 200, "{:?}", reply.body);
    assert_eq!(reply.json()["metadata"]["labels"]["a"], "b");
    h.put("/api/v1/tenants/t1", update).await.error(409, "Conflict");
    h.put("/api/v1/tenants/t2", update).await.error(400, "BadRequest");

    let group = r#"{"metadata":{"name":"w"},"spec":{"role":"worker","count":1,"providerClass":"metal:m","providerConfig":{"hosts":[{"address":"10.0.0.1"}]}}}"#;
    assert_eq!(h.post("/api/v1/tenants/t1/node-groups", group).await.status.as_u16(), 201);
    let tenant = h.get("/api/v1/tenants/t1").await.json();
    assert_eq!(tenant["spec"]["nodeGroups"][0]["name"], "w", "{tenant}");
    assert_eq!(h.get("/api/v1/tenants/t1/node-groups").await.json()["total"], 1);
    let other = group.replace(r#""name":"w""#, r#""name":"w2""#);
    assert_eq!(h.post("/api/v1/tenants/t1/node-groups", &other).await.status.as_u16(), 201);
    assert_eq!(h.delete("/api/v1/tenants/t1/node-groups/w").await.status.as_u16(), 204);
    h.get("/api/v1/tenants/t1/node-groups/w").await.error(404, "NotFound");
    // Only `w` went: the other node group stays.
    let left = h.get("/api/v1/tenants/t1/node-groups").await.json();
    assert_eq!(
        (left["total"].clone(), left["items"][0]["metadata"]["name"].clone()),
        (json!(1), json!("w2"))
    );

    h.tenant("t2").await;
    let reply = h.delete("/api/v1/tenants/t1").await;
    assert_eq!(reply.status.as_u16(), 202);
    assert!(reply.json()["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(reply.json()["metadata"]["name"], "t1");
    let list = h.get("/api/v1/tenants").await.json();
    assert_eq!(list["total"], 2, "a deleting tenant stays until its finalizers are cleared: {list}");
    // Only t1 is marked; t2 is not deleting.
    let t2 = h.get("/api/v1/tenants/t2").await.json();
    assert!(t2["metadata"]["deletionTimestamp"].is_null(), "{t2}");
}

#[actix_web::test]
async fn watch_sends_burst_sync_and_live_events_and_ends_at_shutdown() {
    let h = harness().await;
    h.tenant("a").await;
    let response = h.open(TestRequest::get().uri("/api/v1/tenants?watch=true")).await;
    assert_eq!(response.status().as_u16(), 200);
    let mut body = response.into_body();

    let burst = next_chunk(&mut body).await.unwrap_or_default();
    assert!(burst.starts_with(b"data: {\"type\":\"ADDED\",\"object\":{"), "{burst:?}");
    let synced = next_chunk(&mut body).await.unwrap_or_default();
    let revision = String::from_utf8_lossy(&synced).trim().strip_prefix("id: ").map(str::to_string);
    assert!(revision.as_deref().is_some_and(|r| r.parse::<u64>().is_ok()), "{synced:?}");

    h.tenant("b").await;
    let live = String::from_utf8_lossy(&next_chunk(&mut body).await.unwrap_or_default()).into_owned();
    assert!(live.starts_with("id: "), "{live}");
    assert!(live.contains("\ndata: {\"type\":\"ADDED\",\"object\":{"), "{live}");
    assert!(live.contains("\"name\":\"b\""), "{live}");

    h.state.shutdown.cancel();
    assert!(next_chunk(&mut body).await.is_none());
}

/// The API and a Rust tool on `cms-tenancy` refuse the same writes with the
/// same message: the API maps the tool's typed error, it adds no rule.
#[actix_web::test]
async fn the_api_refuses_what_the_tenancy_refuses_in_the_same_words() {
    let h = harness().await;
    let tenancy = cms_tenancy::Tenancy::new(h.store.clone(), h.state.tenancy.secrets().clone());
    let bodies = [
        r#"{"metadata":{"name":"a"},"spec":{"kubernetesVersion":"1.31.0","talosVersion":"1.7.4"}}"#,
        r#"{"metadata":{"name":"a"},"spec":{"kubernetesVersion":"1.31.0","nodeGroups":[{"name":"w",
            "role":"worker","count":2,"providerClass":"metal:bare","providerConfig":{"hosts":[]}}]}}"#,
        r#"{"metadata":{"name":"a"},"spec":{"kubernetesVersion":"1.31.0","podNetwork":["10.0.0.0/33"]}}"#,
    ];
    for body in bodies {
        let over_http = h.post("/api/v1/tenants", body).await.error(422, "Invalid");
        let tenant: cms_model::Tenant = cms_model::parse_json(body.as_bytes()).expect("parses");
        match tenancy.create_tenant(tenant).await {
            Err(cms_tenancy::TenancyError::Invalid(field)) => assert_eq!(field.to_string(), over_http),
            other => panic!("{body}: the tenancy accepted what the API refused: {other:?}"),
        }
    }
    assert!(
        cms_store::Store::get(h.store.as_ref(), &cms_store::Key::tenant("a")).is_none(),
        "nothing refused is written"
    );
}

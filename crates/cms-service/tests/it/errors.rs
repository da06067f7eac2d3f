//! Every error shape over the real store, the framework's included.

use actix_web::http::Method;
use actix_web::test::TestRequest;
use cms_service::ServiceOptions;

use crate::{harness, harness_with, json};

#[actix_web::test]
async fn routing_errors() {
    let h = harness().await;
    h.get("/api/v1/nothing-here").await.error(404, "NotFound");
    h.get("/nothing-here").await.error(404, "NotFound");
    h.send(TestRequest::default().method(Method::PATCH).uri("/api/v1/tenants"))
        .await
        .error(405, "MethodNotAllowed");
    h.send(TestRequest::post().uri("/api/v1/tenants/t1/machines")).await.error(405, "MethodNotAllowed");
    h.send(TestRequest::put().uri("/version")).await.error(405, "MethodNotAllowed");
}

#[actix_web::test]
async fn body_errors() {
    let h = harness_with(ServiceOptions { body_limit: 256, ..ServiceOptions::default() }).await;
    let big = format!(r#"{{"metadata":{{"name":"t1","labels":{{"x":"{}"}}}}}}"#, "y".repeat(300));
    h.post("/api/v1/tenants", &big).await.error(413, "PayloadTooLarge");
    let plain = TestRequest::post().uri("/api/v1/tenants").insert_header(("content-type", "text/plain"));
    h.send(plain.set_payload("{}")).await.error(415, "UnsupportedMediaType");
    h.post("/api/v1/tenants", "{not json").await.error(400, "BadRequest");
    let message = h
        .post(
            "/api/v1/tenants",
            r#"{"metadata":{"name":"t1"},"spec":{"kubernetesVersion":"1.31.0","cout":3}}"#,
        )
        .await
        .error(422, "Invalid");
    assert!(message.starts_with("spec.cout"), "{message}");
    let group = r#"{"metadata":{"name":"w"},"spec":{"role":"worker","count":0,"providerClass":"metal:m"}}"#;
    h.tenant("t1").await;
    let message = h.post("/api/v1/tenants/t1/node-groups", group).await.error(422, "Invalid");
    assert!(message.starts_with("spec.count"), "{message}");
}

#[actix_web::test]
async fn store_errors() {
    let h = harness().await;
    h.tenant("t1").await;
    let again = r#"{"metadata":{"name":"t1"},"spec":{"kubernetesVersion":"1.31.0"}}"#;
    h.post("/api/v1/tenants", again).await.error(409, "Conflict");
    h.get("/api/v1/tenants/t2").await.error(404, "NotFound");
    let patch = r#"{"metadata":{"name":"p"},"spec":{"format":"strategic","patches":[{"machine":{}}]}}"#;
    h.post("/api/v1/tenants/t2/configpatches", patch).await.error(404, "NotFound");
    h.get("/api/v1/tenants?limit=1001").await.error(400, "BadRequest");
    h.get("/api/v1/tenants?watch=true&resourceVersion=999").await.error(400, "BadRequest");
    let reply = h.send(json(TestRequest::put().uri("/api/v1/tenants/t1"), again)).await;
    assert!(reply.error(422, "Invalid").contains("metadata.resourceVersion"));
    assert!(reply.request_id.is_some(), "every response carries a request id");
}

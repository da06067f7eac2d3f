//! Every failure has the `{error, code, status}` shape, the framework's too.

use actix_web::test::TestRequest;
use cms_store::{MockStore, StoreError};

use super::{TENANT, call, call_with, json_request};
use crate::{INTERNAL_MESSAGE, ServiceOptions};

#[actix_web::test]
async fn unknown_routes_are_404() {
    for uri in ["/nope", "/api/v1/nope", "/api/v1/tenants/t1/nope/x/y", "/api/v2/tenants"] {
        call(MockStore::new(), TestRequest::get().uri(uri)).await.error(404, "NotFound");
    }
}

#[actix_web::test]
async fn wrong_methods_are_405() {
    for (method, uri, allow) in [
        ("PATCH", "/api/v1/tenants/t1", "GET, PUT, DELETE"),
        ("DELETE", "/api/v1/tenants", "GET, POST"),
        ("POST", "/api/v1/machines", "GET"),
        ("POST", "/healthz", "GET"),
        ("GET", "/api/v1/tenants/t1/machines/m1/status", "PUT"),
    ] {
        let method = method.parse().unwrap_or_default();
        let reply = call(MockStore::new(), TestRequest::default().method(method).uri(uri)).await;
        reply.error(405, "MethodNotAllowed");
        assert_eq!(reply.headers.get("allow").map(|v| v.as_bytes()), Some(allow.as_bytes()), "{uri}");
    }
}

#[actix_web::test]
async fn bodies_must_be_json() {
    let post = || TestRequest::post().uri("/api/v1/tenants");
    call(MockStore::new(), post().set_payload(TENANT)).await.error(415, "UnsupportedMediaType");
    let text = post().insert_header(("content-type", "text/plain")).set_payload(TENANT);
    call(MockStore::new(), text).await.error(415, "UnsupportedMediaType");
    let with_charset =
        post().insert_header(("content-type", "application/json; charset=utf-8")).set_payload("{");
    call(MockStore::new(), with_charset).await.error(400, "BadRequest");
}

#[actix_web::test]
async fn bodies_over_the_limit_are_413() {
    let options = ServiceOptions { body_limit: 16, ..ServiceOptions::default() };
    let request = json_request(TestRequest::post().uri("/api/v1/tenants"), TENANT);
    call_with(MockStore::new(), options, request).await.error(413, "PayloadTooLarge");
}

#[actix_web::test]
async fn invalid_bodies_name_the_field() {
    let post = || TestRequest::post().uri("/api/v1/tenants");
    let typo = r#"{"metadata":{"name":"t1"},"spec":{"kubernetesVersion":"1.31.0","podNetwrk":[]}}"#;
    let message = call(MockStore::new(), json_request(post(), typo)).await.error(422, "Invalid");
    assert!(message.starts_with("spec.podNetwrk"), "{message}");
    let bad = r#"{"metadata":{"name":"T1"},"spec":{"kubernetesVersion":"1.31.0"}}"#;
    let message = call(MockStore::new(), json_request(post(), bad)).await.error(422, "Invalid");
    assert!(message.starts_with("metadata.name"), "{message}");
    let version = r#"{"metadata":{"name":"t1"},"spec":{"kubernetesVersion":"1.31"}}"#;
    let message = call(MockStore::new(), json_request(post(), version)).await.error(422, "Invalid");
    assert!(message.starts_with("spec.kubernetesVersion"), "{message}");
}

#[actix_web::test]
async fn bad_queries_are_400() {
    for uri in ["/api/v1/tenants?limit=0", "/api/v1/tenants?offset=x", "/api/v1/machines?watch=true"] {
        call(MockStore::new(), TestRequest::get().uri(uri)).await.error(400, "BadRequest");
    }
}

#[actix_web::test]
async fn internal_errors_carry_the_request_id_and_nothing_else() {
    let mut store = MockStore::new();
    store.expect_get().returning(|_| None);
    store.expect_create().returning(|_, _| Err(StoreError::Corrupt("/var/lib/cms/cms.db row 7".into())));
    let reply = call(store, json_request(TestRequest::post().uri("/api/v1/tenants"), TENANT)).await;
    assert_eq!(reply.error(500, "Internal"), INTERNAL_MESSAGE);
    let header = reply.headers.get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or_default();
    assert_eq!(reply.json()["requestId"], header);
    assert!(uuid::Uuid::parse_str(header).is_ok(), "{header}");
    assert!(!String::from_utf8_lossy(&reply.body).contains("cms.db"));
}

#[actix_web::test]
async fn future_revisions_are_400() {
    let mut store = MockStore::new();
    store.expect_watch().returning(|_, _| Err(StoreError::Future { requested: 99, current: 3 }));
    let request = TestRequest::get().uri("/api/v1/tenants?watch=true&resourceVersion=99");
    call(store, request).await.error(400, "BadRequest");
}

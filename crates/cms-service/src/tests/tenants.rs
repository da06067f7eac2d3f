//! Tenant handlers: list, create, read, replace, delete and watch.

use std::sync::Arc;

use actix_web::test::TestRequest;
use bytes::Bytes;
use cms_model::{Kind, Page};
use cms_store::{
    Deleted, EventType, Key, Listing, MockStore, Object, StoreError, WatchEvent, WatchItem, WatchStream,
};
use futures_util::stream;

use super::{TENANT, call, json_request, object, store_with_tenant};

#[actix_web::test]
async fn list_passes_the_page_and_concatenates_objects() {
    let mut store = MockStore::new();
    store
        .expect_select()
        .withf(|kind, tenant, selector, page| {
            *kind == Kind::Tenant
                && tenant.is_none()
                && selector.to_string() == "env!=prod,team in (a,b)"
                && *page == Page { limit: 2, offset: 1 }
        })
        .returning(|_, _, _, _| Listing { items: vec![object(Key::tenant("b"), 3)], total: 5 });
    let uri = "/api/v1/tenants?limit=2&offset=1&labelSelector=team%20in%20(a,b),env!%3Dprod";
    let reply = call(store, TestRequest::get().uri(uri)).await;
    assert_eq!(reply.status.as_u16(), 200);
    let body = reply.json();
    assert_eq!(body["total"], 5);
    assert_eq!(body["items"][0]["metadata"]["name"], "b");
}

#[actix_web::test]
async fn get_returns_the_stored_bytes() {
    let reply = call(store_with_tenant(), TestRequest::get().uri("/api/v1/tenants/t1")).await;
    assert_eq!(reply.status.as_u16(), 200);
    assert_eq!(reply.body, object(Key::tenant("t1"), 1).json);
    assert_eq!(reply.headers.get("content-type").map(|v| v.as_bytes()), Some(&b"application/json"[..]));
    assert!(reply.headers.contains_key("x-request-id"));

    let reply = call(store_with_tenant(), TestRequest::get().uri("/api/v1/tenants/nope")).await;
    assert!(reply.error(404, "NotFound").contains("\"nope\""));
}

#[actix_web::test]
async fn create_normalizes_and_leaves_node_groups_out() {
    let mut store = MockStore::new();
    store.expect_get().returning(|_| None);
    store
        .expect_create()
        .withf(move |key, draft| {
            *key == Key::tenant("t1")
                && draft.spec["kubernetesVersion"] == "1.31.0"
                && draft.spec.get("nodeGroups").is_none()
                // Status is the store's to start (and its derived condition
                // with it), never the writer's.
                && draft.status.is_none()
                && draft.secrets.as_ref().is_some_and(|sealed| sealed.starts_with(b"cms\x01"))
        })
        .returning(|key, _| Ok(object(key, 1)));
    let reply = call(store, json_request(TestRequest::post().uri("/api/v1/tenants"), TENANT)).await;
    assert_eq!(reply.status.as_u16(), 201, "{:?}", reply.body);
    assert_eq!(reply.json()["metadata"]["resourceVersion"], 1);
}

#[actix_web::test]
async fn create_of_a_taken_name_is_409() {
    // A name in the cache is refused before any key is made: the mock has
    // no `create` expectation, so reaching the store would fail the test.
    let reply = call(store_with_tenant(), json_request(TestRequest::post().uri("/api/v1/tenants"), TENANT));
    let message = reply.await.error(409, "Conflict");
    assert_eq!(message, r#"tenant "t1" already exists"#);

    // A create that loses the race in the store is refused there.
    let mut store = MockStore::new();
    store.expect_get().returning(|_| None);
    store.expect_create().returning(|key, _| Err(StoreError::AlreadyExists(key.to_string())));
    let reply = call(store, json_request(TestRequest::post().uri("/api/v1/tenants"), TENANT)).await;
    reply.error(409, "Conflict");
}

#[actix_web::test]
async fn update_checks_name_and_version_before_the_store() {
    let put = || TestRequest::put().uri("/api/v1/tenants/t1");
    let mismatched =
        r#"{"metadata":{"name":"t2","resourceVersion":1},"spec":{"kubernetesVersion":"1.31.0"}}"#;
    call(MockStore::new(), json_request(put(), mismatched)).await.error(400, "BadRequest");
    let message = call(MockStore::new(), json_request(put(), TENANT)).await.error(422, "Invalid");
    assert!(message.contains("metadata.resourceVersion"), "{message}");

    let mut store = MockStore::new();
    // The replacement keeps the service's annotations of the version it read.
    store.expect_get().returning(|key| Some(stored_tenant(key.clone(), 1)));
    store
        .expect_update()
        .withf(|_, _, expected| *expected == 1)
        .returning(|key, _, _| Err(StoreError::Conflict { what: key.to_string(), expected: 1, current: 2 }));
    let stale = r#"{"metadata":{"name":"t1","resourceVersion":1},"spec":{"kubernetesVersion":"1.31.0"}}"#;
    call(store, json_request(put(), stale)).await.error(409, "Conflict");
}

/// A stored tenant that parses as one: a replacement reads the stored
/// tenant's annotations and sizes.
fn stored_tenant(key: Key, resource_version: u64) -> Arc<Object> {
    let json = format!(
        r#"{{"metadata":{{"name":"{}","resourceVersion":{resource_version}}},"spec":{{"kubernetesVersion":"1.31.0"}},"status":{{}}}}"#,
        key.name
    );
    Arc::new(Object { key, resource_version, generation: 1, deleting: false, json: Bytes::from(json) })
}

#[actix_web::test]
async fn update_answers_its_own_write_not_a_later_one() {
    let mut store = MockStore::new();
    store.expect_update().returning(|key, _, _| Ok(object(key, 2)));
    // The cache is at the version read, for the service's annotations; by
    // the time the write answers, another writer's change reached it.
    let reads = std::sync::atomic::AtomicUsize::new(0);
    store.expect_get().returning(move |key| {
        let version = match reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
            0 => 1,
            _ => 3,
        };
        Some(stored_tenant(key.clone(), version))
    });
    let body = r#"{"metadata":{"name":"t1","resourceVersion":1},"spec":{"kubernetesVersion":"1.31.0"}}"#;
    let reply = call(store, json_request(TestRequest::put().uri("/api/v1/tenants/t1"), body)).await;
    assert_eq!(reply.status.as_u16(), 200);
    assert_eq!(reply.json()["metadata"]["resourceVersion"], 2);
}

#[actix_web::test]
async fn delete_is_202_with_the_marked_object() {
    let mut store = MockStore::new();
    store
        .expect_delete()
        .withf(|key| *key == Key::tenant("t1"))
        .times(1)
        .returning(|key| Ok(Deleted::Marked(object(key, 4))));
    let reply = call(store, TestRequest::delete().uri("/api/v1/tenants/t1")).await;
    assert_eq!(reply.status.as_u16(), 202);
    assert_eq!(reply.json()["metadata"]["resourceVersion"], 4);
    assert_eq!(reply.json()["metadata"]["name"], "t1");
}

fn watch_of(items: Vec<WatchItem>) -> WatchStream {
    Box::pin(stream::iter(items.into_iter().map(Ok)))
}

#[actix_web::test]
async fn watch_streams_server_sent_events() {
    let mut store = MockStore::new();
    store.expect_watch().withf(|kind, since| *kind == Kind::Tenant && since.is_none()).returning(|_, _| {
        let event =
            WatchEvent { revision: 3, event_type: EventType::Added, object: object(Key::tenant("a"), 3) };
        Ok(watch_of(vec![WatchItem::Event(event), WatchItem::Synced(3)]))
    });
    let reply = call(store, TestRequest::get().uri("/api/v1/tenants?watch=true")).await;
    assert_eq!(reply.status.as_u16(), 200);
    assert_eq!(reply.headers.get("content-type").map(|v| v.as_bytes()), Some(&b"text/event-stream"[..]));
    let text = String::from_utf8_lossy(&reply.body).into_owned();
    assert!(text.starts_with("data: {\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\""), "{text}");
    assert!(text.ends_with("}}\n\nid: 3\n\n"), "{text}");
}

#[actix_web::test]
async fn watch_resumes_from_the_header_and_maps_gone() {
    let mut store = MockStore::new();
    store
        .expect_watch()
        .withf(|_, since| *since == Some(2))
        .returning(|_, _| Err(StoreError::Gone { requested: 2, compacted: 10 }));
    let request = TestRequest::get().uri("/api/v1/tenants?watch=true").insert_header(("Last-Event-ID", "2"));
    call(store, request).await.error(410, "Gone");

    let request = TestRequest::get().uri("/api/v1/tenants?watch=true").insert_header(("Last-Event-ID", "x"));
    call(MockStore::new(), request).await.error(400, "BadRequest");
}

#[actix_web::test]
async fn watch_ends_at_shutdown() {
    let store = Arc::new({
        let mut store = MockStore::new();
        store.expect_watch().returning(|_, _| Ok(Box::pin(stream::pending()) as WatchStream));
        store
    });
    let state = super::state(store, crate::ServiceOptions::default()).await;
    let shutdown = state.shutdown.clone();
    let service = actix_web::test::init_service(crate::app(state)).await;
    let request = TestRequest::get().uri("/api/v1/tenants?watch=true").to_request();
    let response = actix_web::test::call_service(&service, request).await;
    assert_eq!(response.status().as_u16(), 200);
    shutdown.cancel();
    let body = actix_web::test::read_body(response).await;
    assert!(body.is_empty(), "{body:?}");
}

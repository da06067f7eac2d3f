//! Node groups, config patches, machines, projected state and the
//! operational endpoints.

use actix_web::test::TestRequest;
use cms_model::{Kind, Page, Projected};
use cms_store::{Deleted, Key, Listing, MockStore, StoreError};
use serde_json::json;

use super::{call, json_request, machine_key, object, store_with_tenant};

const GROUP: &str = r#"{"metadata":{"name":"w"},"spec":{"role":"worker","count":1,"providerClass":"metal:m","providerConfig":{"hosts":[{"address":"10.0.0.1"}]}}}"#;

#[actix_web::test]
async fn child_lists_need_their_tenant() {
    for uri in
        ["/api/v1/tenants/t2/node-groups", "/api/v1/tenants/t2/configpatches", "/api/v1/tenants/t2/machines"]
    {
        let message = call(store_with_tenant(), TestRequest::get().uri(uri)).await.error(404, "NotFound");
        assert!(message.contains("tenant \"t2\""), "{message}");
    }
    let mut store = store_with_tenant();
    store
        .expect_list()
        .withf(|kind, tenant, _| *kind == Kind::NodeGroup && tenant.as_deref() == Some("t1"))
        .returning(|_, _, _| Listing::default());
    let reply = call(store, TestRequest::get().uri("/api/v1/tenants/t1/node-groups")).await;
    assert_eq!(reply.body, r#"{"items":[],"total":0}"#);
}

#[actix_web::test]
async fn node_groups_are_created_and_deleted() {
    let mut store = MockStore::new();
    store.expect_get().returning(|_| None);
    store
        .expect_create()
        .withf(|key, draft| *key == Key::child(Kind::NodeGroup, "t1", "w") && draft.spec["name"] == "w")
        .returning(|key, _| Ok(object(key, 1)));
    let request = json_request(TestRequest::post().uri("/api/v1/tenants/t1/node-groups"), GROUP);
    assert_eq!(call(store, request).await.status.as_u16(), 201);

    for uri in ["/api/v1/tenants/t1/node-groups/w", "/api/v1/tenants/t1/configpatches/p"] {
        let mut store = MockStore::new();
        store.expect_get().returning(|_| None);
        store.expect_delete().returning(|_| Ok(Deleted::Removed));
        let reply = call(store, TestRequest::delete().uri(uri)).await;
        assert_eq!(reply.status.as_u16(), 204);
        assert!(reply.body.is_empty());
    }
}

#[actix_web::test]
async fn missing_children_name_what_is_missing() {
    let message = call(store_with_tenant(), TestRequest::get().uri("/api/v1/tenants/t1/machines/m9")).await;
    assert!(message.error(404, "NotFound").contains("machine \"m9\""));
    let message =
        call(store_with_tenant(), TestRequest::get().uri("/api/v1/tenants/t2/configpatches/p")).await;
    assert!(message.error(404, "NotFound").contains("tenant \"t2\""));
}

#[actix_web::test]
async fn machines_list_across_tenants() {
    let mut store = MockStore::new();
    store
        .expect_list()
        .withf(|kind, tenant, page| *kind == Kind::Machine && tenant.is_none() && *page == Page::default())
        .returning(|_, _, _| Listing { items: vec![object(machine_key("m1"), 2)], total: 1 });
    let reply = call(store, TestRequest::get().uri("/api/v1/machines")).await;
    assert_eq!(reply.json()["items"][0]["metadata"]["name"], "m1");
}

#[actix_web::test]
async fn machine_status_is_written_with_its_version() {
    let uri = "/api/v1/tenants/t1/machines/m1/status";
    let body = r#"{"metadata":{"name":"m1","resourceVersion":2},"spec":{"connected":true},"status":{"stage":"ready","ready":true}}"#;
    let mut store = MockStore::new();
    store
        .expect_update_status()
        .withf(|key, status, expected| {
            *key == machine_key("m1") && status["stage"] == "ready" && *expected == Some(2)
        })
        .returning(|key, _, _| Ok(object(key, 3)));
    let reply = call(store, json_request(TestRequest::put().uri(uri), body)).await;
    assert_eq!(reply.json()["metadata"]["resourceVersion"], 3);

    let other = body.replace("\"m1\"", "\"m2\"");
    call(MockStore::new(), json_request(TestRequest::put().uri(uri), &other)).await.error(400, "BadRequest");
    let unknown = body.replace("\"ready\":true", "\"redy\":true");
    let message = call(MockStore::new(), json_request(TestRequest::put().uri(uri), &unknown)).await;
    assert!(message.error(422, "Invalid").starts_with("status.redy"));
}

#[actix_web::test]
async fn machine_delete_is_202() {
    let mut store = MockStore::new();
    store.expect_delete().returning(|key| Ok(Deleted::Marked(object(key, 5))));
    let reply = call(store, TestRequest::delete().uri("/api/v1/tenants/t1/machines/m1")).await;
    assert_eq!(reply.status.as_u16(), 202);
}

fn projected(kind: &str, name: &str) -> Projected {
    Projected {
        tenant: "t1".into(),
        kind: kind.into(),
        tf_type: "x".into(),
        name: name.into(),
        spec: json!({}),
    }
}

#[actix_web::test]
async fn projected_is_503_until_an_apply_then_filters_by_kind() {
    let mut store = store_with_tenant();
    store.expect_projection().returning(|_| Ok(None));
    call(store, TestRequest::get().uri("/api/v1/projected")).await.error(503, "Unavailable");
    let reply = call(store_with_tenant(), TestRequest::get().uri("/api/v1/tenants/t2/projected")).await;
    reply.error(404, "NotFound");

    let mut store = store_with_tenant();
    store
        .expect_projection()
        .withf(|tenant| tenant.as_deref() == Some("t1"))
        .returning(|_| Ok(Some(vec![projected("Machine", "a"), projected("DataSource", "b")])));
    let reply = call(store, TestRequest::get().uri("/api/v1/tenants/t1/projected/machine")).await;
    assert_eq!(reply.status.as_u16(), 200);
    let body = reply.json();
    assert_eq!(body["items"].as_array().map(Vec::len), Some(1), "{body}");
    assert_eq!(body["items"][0]["name"], "a");
}

#[actix_web::test]
async fn operational_endpoints() {
    let reply = call(MockStore::new(), TestRequest::get().uri("/healthz")).await;
    assert_eq!(reply.body, "ok");

    let mut store = MockStore::new();
    store.expect_ping().returning(|| Ok(()));
    assert_eq!(call(store, TestRequest::get().uri("/readyz")).await.body, "ready");
    let mut store = MockStore::new();
    store.expect_ping().returning(|| Err(StoreError::Corrupt("no".into())));
    call(store, TestRequest::get().uri("/readyz")).await.error(503, "Unavailable");

    let version = call(MockStore::new(), TestRequest::get().uri("/version")).await.json();
    for field in ["version", "gitCommit", "buildTime"] {
        assert!(version[field].is_string(), "{version}");
    }
}

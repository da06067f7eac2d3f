//! Node groups, config patches, machines, projected state and the
//! operational endpoints.

use actix_web::test::TestRequest;
use cms_model::{Kind, LabelSelector, Page, Projected};
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
        .expect_select()
        .withf(|kind, tenant, selector, _| {
            *kind == Kind::NodeGroup
                && tenant.as_deref() == Some("t1")
                && *selector == LabelSelector::parse("role in (a,b)").unwrap()
        })
        .returning(|_, _, _, _| Listing::default());
    let uri = "/api/v1/tenants/t1/node-groups?labelSelector=role+in+%28a%2Cb%29";
    let reply = call(store, TestRequest::get().uri(uri)).await;
    assert_eq!(reply.body, r#"{"items":[],"total":0}"#);
}

#[actix_web::test]
async fn malformed_selectors_are_400_on_every_list() {
    for uri in [
        "/api/v1/tenants",
        "/api/v1/tenants/t1/node-groups",
        "/api/v1/tenants/t1/configpatches",
        "/api/v1/tenants/t1/machines",
        "/api/v1/machines",
    ] {
        let reply =
            call(MockStore::new(), TestRequest::get().uri(&format!("{uri}?labelSelector=!x%3Da"))).await;
        let message = reply.error(400, "BadRequest");
        assert_eq!(
            message, r#"labelSelector "!x=a" is not valid: found '=', expected ',' or the end"#,
            "{uri}"
        );
    }
    for uri in ["/api/v1/projected", "/api/v1/tenants/t1/projected", "/api/v1/tenants/t1/projected/machine"] {
        let message = call(MockStore::new(), TestRequest::get().uri(&format!("{uri}?labelSelector=x"))).await;
        assert!(message.error(400, "BadRequest").contains("no labels"), "{uri}");
    }
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

    // Each delete reaches the store once, with the key its path names.
    let cases = [
        ("/api/v1/tenants/t1/node-groups/w", Key::child(Kind::NodeGroup, "t1", "w")),
        ("/api/v1/tenants/t1/configpatches/p", Key::child(Kind::ConfigPatch, "t1", "p")),
    ];
    for (uri, expected) in cases {
        let mut store = MockStore::new();
        store.expect_get().returning(|_| None);
        store.expect_delete().withf(move |key| *key == expected).times(1).returning(|_| Ok(Deleted::Removed));
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
        .expect_select()
        .withf(|kind, tenant, selector, page| {
            *kind == Kind::Machine && tenant.is_none() && selector.is_empty() && *page == Page::default()
        })
        .returning(|_, _, _, _| Listing { items: vec![object(machine_key("m1"), 2)], total: 1 });
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
    store
        .expect_delete()
        .withf(|key| *key == machine_key("m1"))
        .times(1)
        .returning(|key| Ok(Deleted::Marked(object(key, 5))));
    let reply = call(store, TestRequest::delete().uri("/api/v1/tenants/t1/machines/m1")).await;
    assert_eq!(reply.status.as_u16(), 202);
    assert_eq!(reply.json()["metadata"]["name"], "m1");
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
    assert_eq!(body["total"], 1);
}

#[actix_web::test]
async fn projected_lists_page_by_tenant_then_name() {
    let items = vec![projected("Machine", "c"), projected("Machine", "a"), projected("DataSource", "b")];
    let names = |body: &serde_json::Value| -> Vec<String> {
        body["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| item["name"].as_str().unwrap().to_string())
            .collect()
    };
    for (query, expected) in [
        ("", vec!["a", "b", "c"]),
        ("?limit=2", vec!["a", "b"]),
        ("?limit=2&offset=2", vec!["c"]),
        ("?offset=3", vec![]),
    ] {
        let mut store = store_with_tenant();
        let all = items.clone();
        store.expect_projection().returning(move |_| Ok(Some(all.clone())));
        let body =
            call(store, TestRequest::get().uri(&format!("/api/v1/tenants/t1/projected{query}"))).await.json();
        assert_eq!(names(&body), expected, "{query}");
        assert_eq!(body["total"], 3, "{query}");
    }
    for query in ["limit=abc", "limit=-1", "limit=0", "limit=1001", "offset=-1", "offset=x", "watch=true"] {
        let reply =
            call(MockStore::new(), TestRequest::get().uri(&format!("/api/v1/projected?{query}"))).await;
        let message = reply.error(400, "BadRequest");
        let named = query.split('=').next().unwrap();
        assert!(message.contains(named), "{query}: {message}");
    }
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

//! The document covers the route table, holds together, and changes only
//! when a reviewed snapshot changes with it.

use std::collections::BTreeSet;

use serde_json::Value;

use super::*;

fn json() -> Value {
    serde_json::to_value(document()).expect("the document serializes")
}

#[test]
fn every_route_is_in_the_document() {
    let document = json();
    for route in ROUTES {
        let path = full_path(route);
        let method = route.method.to_ascii_lowercase();
        let operation = &document["paths"][&path][&method];
        assert!(operation.is_object(), "{} {path} is missing from the OpenAPI document", route.method);
        let security = operation.get("security");
        match route.access {
            Access::Public => assert!(security.is_none(), "{} {path} is public", route.method),
            Access::Requires(_) | Access::OnTenant(_) | Access::OnTenants(_) => {
                let schemes: Vec<&str> = security
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|requirement| requirement.as_object()?.keys().next().map(String::as_str))
                    .collect();
                assert_eq!(schemes, [LOGIN_TOKEN, API_TOKEN], "{} {path}", route.method);
                assert!(operation["responses"]["401"].is_object(), "{} {path} documents 401", route.method);
            }
        }
    }
}

#[test]
fn the_document_has_no_operation_the_table_lacks() {
    let document = json();
    let table: BTreeSet<(String, String)> =
        ROUTES.iter().map(|route| (full_path(route), route.method.to_ascii_lowercase())).collect();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("a path item").keys() {
            assert!(table.contains(&(path.clone(), method.clone())), "{method} {path} is not a route");
        }
    }
}

/// Every `$ref` names a component that exists, and operation ids are unique.
#[test]
fn references_resolve() {
    let document = json();
    let mut refs = Vec::new();
    collect_refs(&document, &mut refs);
    assert!(!refs.is_empty());
    for reference in refs {
        let pointer = reference.strip_prefix('#').expect("local references only");
        assert!(document.pointer(pointer).is_some(), "{reference} does not resolve");
    }
    let mut ids = BTreeSet::new();
    for item in document["paths"].as_object().expect("paths").values() {
        for operation in item.as_object().expect("a path item").values() {
            let id = operation["operationId"].as_str().expect("an operation id");
            assert!(ids.insert(id.to_string()), "operation id {id} is used twice");
        }
    }
}

fn collect_refs(value: &Value, refs: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(reference)) = map.get("$ref") {
                refs.push(reference.clone());
            }
            map.values().for_each(|value| collect_refs(value, refs));
        }
        Value::Array(items) => items.iter().for_each(|value| collect_refs(value, refs)),
        _ => {}
    }
}

#[test]
fn the_document_is_openapi_3_1() {
    let document = json();
    assert_eq!(document["openapi"], "3.1.0");
    let schemes = &document["components"]["securitySchemes"];
    assert_eq!(schemes[LOGIN_TOKEN]["scheme"], "bearer");
    assert_eq!(schemes[API_TOKEN]["scheme"], "bearer");
    assert_eq!(document["components"]["schemas"]["UserSpec"]["properties"]["password"]["writeOnly"], true);
}

/// The whole document, so that every change to it is reviewed. The version
/// is the build's, so it is replaced.
#[test]
fn snapshot() {
    let mut document = json();
    document["info"]["version"] = Value::String("<version>".to_string());
    let text = serde_json::to_string_pretty(&document).expect("the document serializes");
    insta::assert_snapshot!("openapi", text);
}

#[actix_web::test]
async fn the_routes_serve_the_document_and_the_page() {
    use actix_web::test::{TestRequest, call_service, init_service, read_body};
    let store: std::sync::Arc<dyn cms_store::Store> = std::sync::Arc::new(cms_store::MockStore::new());
    let state = crate::tests::state(store, crate::ServiceOptions::default()).await;
    let app = init_service(crate::app(state)).await;
    let response = call_service(&app, TestRequest::get().uri("/openapi.json").to_request()).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers().get("content-type").map(|v| v.as_bytes()), Some(&b"application/json"[..]));
    let body: Value = serde_json::from_slice(&read_body(response).await).expect("JSON");
    assert_eq!(body["openapi"], "3.1.0");
    let response = call_service(&app, TestRequest::get().uri("/docs").to_request()).await;
    assert_eq!(response.status(), 200);
    let page = read_body(response).await;
    assert!(std::str::from_utf8(&page).is_ok_and(|page| page.contains("/openapi.json")));
}

/// The page is self-contained: it loads nothing from elsewhere.
#[test]
fn the_page_loads_nothing_from_elsewhere() {
    for needle in ["http://", "https://", "//cdn", "<link", "src="] {
        assert!(!DOCS_PAGE.contains(needle), "assets/docs.html contains {needle:?}");
    }
}

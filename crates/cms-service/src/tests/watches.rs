//! Watches of one tenant, bookmarks and field selectors at the handlers:
//! what the store is asked for, and what the client gets.

use actix_web::test::TestRequest;
use cms_model::Kind;
use cms_store::{EventType, Key, MockStore, StoreError, WatchEvent, WatchItem, WatchRequest, WatchStream};
use futures_util::stream;

use super::{call, object};

fn watch_of(items: Vec<WatchItem>) -> WatchStream {
    Box::pin(stream::iter(items.into_iter().map(Ok)))
}

/// A store whose watch of one object expects `expected` and opens with
/// that object, then ends.
fn store_expecting(expected: WatchRequest) -> MockStore {
    let mut store = MockStore::new();
    store.expect_watch_with().withf(move |request| *request == expected).times(1).returning(|request| {
        let key = request.only.clone().expect("one object");
        let event = WatchEvent { revision: 9, event_type: EventType::Added, object: object(key, 2) };
        Ok(watch_of(vec![WatchItem::Event(event), WatchItem::Synced(9)]))
    });
    store
}

#[actix_web::test]
async fn one_tenant_by_field_selector_or_by_its_path() {
    for uri in [
        "/api/v1/tenants?watch=true&fieldSelector=metadata.name%3Dquiet",
        "/api/v1/tenants?watch=true&fieldSelector=metadata.name%3D%3Dquiet",
        "/api/v1/tenants/quiet?watch=true",
        "/api/v1/tenants/quiet?watch=true&fieldSelector=metadata.name%3Dquiet",
    ] {
        let reply =
            call(store_expecting(WatchRequest::only(Key::tenant("quiet"))), TestRequest::get().uri(uri))
                .await;
        assert_eq!(reply.status.as_u16(), 200, "{uri}");
        let text = String::from_utf8_lossy(&reply.body).into_owned();
        assert!(
            text.starts_with("data: {\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"quiet\""),
            "{text}"
        );
        assert!(text.ends_with("\n\nid: 9\n\n"), "{text}");
    }
}

#[actix_web::test]
async fn resumes_and_bookmarks_reach_the_store() {
    let expected = WatchRequest::only(Key::tenant("quiet")).since(Some(4)).with_progress();
    let mut store = MockStore::new();
    store
        .expect_watch_with()
        .withf(move |request| *request == expected)
        .returning(|_| Err(StoreError::Gone { requested: 4, compacted: 9 }));
    let uri = "/api/v1/tenants/quiet?watch=true&allowWatchBookmarks=true";
    let request = TestRequest::get().uri(uri).insert_header(("Last-Event-ID", "4"));
    call(store, request).await.error(410, "Gone");

    // Bookmarks on a watch of every tenant ask the store for progress.
    let expected = WatchRequest::kind(Kind::Tenant).with_progress();
    let mut store = MockStore::new();
    store
        .expect_watch_with()
        .withf(move |request| *request == expected)
        .returning(|_| Ok(watch_of(vec![WatchItem::Synced(3)])));
    let reply = call(store, TestRequest::get().uri("/api/v1/tenants?watch=1&allowWatchBookmarks")).await;
    assert_eq!(String::from_utf8_lossy(&reply.body), "id: 3\n\n");
}

#[actix_web::test]
async fn bad_selectors_and_bookmark_values_are_400() {
    for (uri, named) in [
        ("/api/v1/tenants?watch=true&fieldSelector=status.phase%3Dactive", "fieldSelector"),
        ("/api/v1/tenants?watch=true&fieldSelector=metadata.name!%3Dquiet", "fieldSelector"),
        ("/api/v1/tenants?fieldSelector=metadata.name%3DNot_A_Name", "fieldSelector"),
        ("/api/v1/tenants?watch=true&allowWatchBookmarks=yes", "allowWatchBookmarks"),
        ("/api/v1/tenants/quiet?watch=true&fieldSelector=metadata.name%3Dother", "fieldSelector"),
    ] {
        let message = call(MockStore::new(), TestRequest::get().uri(uri)).await.error(400, "BadRequest");
        assert!(message.contains(named), "{uri}: {message}");
    }
}

#[actix_web::test]
async fn a_field_selector_narrows_the_list_too() {
    let mut store = MockStore::new();
    store.expect_get().returning(|key| (*key == Key::tenant("quiet")).then(|| object(key.clone(), 3)));
    let reply =
        call(store, TestRequest::get().uri("/api/v1/tenants?fieldSelector=metadata.name%3Dquiet")).await;
    assert_eq!(reply.status.as_u16(), 200);
    let body = reply.json();
    assert_eq!(body["total"], 1);
    assert_eq!(body["items"][0]["metadata"]["name"], "quiet");

    let mut store = MockStore::new();
    store.expect_get().returning(|_| None);
    let reply =
        call(store, TestRequest::get().uri("/api/v1/tenants?fieldSelector=metadata.name%3Dnobody")).await;
    assert_eq!(
        (reply.json()["total"].clone(), reply.json()["items"].clone()),
        (0.into(), serde_json::json!([]))
    );
}

//! The live updates: changes of tenants and their machines as small JSON
//! events, resumed from the page's revision, filtered to one tenant.

use cms_model::Kind;
use cms_store::{Key, Store};
use http::StatusCode;
use serde_json::{Value, json};

use super::{ADMIN, Fixture, VIEWER, next_chunk};
use crate::Body;

/// The update a frame carries, and its id.
fn update(frame: &str) -> (String, Value) {
    let id = frame.lines().find_map(|line| line.strip_prefix("id: ")).unwrap_or_default().to_string();
    let data = frame.lines().find_map(|line| line.strip_prefix("data: ")).unwrap_or("null");
    (id, serde_json::from_str(data).expect("JSON data"))
}

#[tokio::test]
async fn changes_since_the_page_arrive_as_small_json() {
    let f = Fixture::new().await;
    f.tenant("web", json!({"env": "prod"}), "pending").await;
    let viewer = f.sign_in(VIEWER).await;
    let since = f.store.revision();
    f.store
        .update_status(Key::tenant("web"), json!({"phase": "active", "ready": true}), None)
        .await
        .expect("status written");
    let mut stream = f.open(&format!("/events?since={since}"), &viewer).await;
    assert_eq!(stream.status(), StatusCode::OK);
    assert_eq!(stream.headers().get("content-type").map(|v| v.as_bytes()), Some(&b"text/event-stream"[..]));
    assert!(stream.headers().contains_key("content-security-policy"));

    let (id, modified) = update(&next_chunk(&mut stream).await);
    assert_eq!(modified["type"], "MODIFIED");
    assert_eq!(modified["name"], "web");
    assert_eq!(modified["phase"], "active");
    assert_eq!(modified["ready"], true);
    assert_eq!(modified["kubernetes"], "1.31.0");
    assert_eq!(modified["machines"], "0/0");
    assert_eq!(modified["labels"], json!({"env": "prod"}));
    assert_eq!(id, format!("{}.{since}", f.store.revision()));

    f.machine("web", "m1", true).await;
    let (_, machine) = update(&next_chunk(&mut stream).await);
    assert_eq!((machine["type"].as_str(), machine["machines"].as_str()), (Some("MODIFIED"), Some("1/1")));

    f.tenant("api", json!({}), "pending").await;
    let (_, added) = update(&next_chunk(&mut stream).await);
    assert_eq!((added["type"].as_str(), added["name"].as_str()), (Some("ADDED"), Some("api")));

    let admin = f.sign_in(ADMIN).await;
    let mut only_web = f.open("/events?tenant=web", &admin).await;
    let (synced, nothing) = update(&next_chunk(&mut only_web).await);
    assert!(nothing.is_null(), "a fresh stream starts with its position only");
    assert_eq!(synced, format!("{}.{}", f.store.revision(), f.store.revision()));
    f.store.update_status(Key::tenant("api"), json!({"phase": "failed"}), None).await.expect("written");
    f.store.delete(Key::tenant("web")).await.expect("deletion begins");
    let (_, web) = update(&next_chunk(&mut only_web).await);
    assert_eq!((web["name"].as_str(), web["deleting"].as_bool()), (Some("web"), Some(true)), "{web}");
    assert!(web["conditions"].is_array());
    assert!(f.store.get(&Key::child(Kind::Machine, "web", "m1")).is_some());
}

#[tokio::test]
async fn a_resume_point_the_log_no_longer_holds_asks_for_a_reload() {
    let f = Fixture::new().await;
    let admin = f.sign_in(ADMIN).await;
    let ahead = f.store.revision() + 100;
    let mut stream = f.open(&format!("/events?since={ahead}"), &admin).await;
    let (_, resync) = update(&next_chunk(&mut stream).await);
    assert_eq!(resync, json!({"type": "RESYNC"}));

    f.tenant("early", json!({}), "pending").await;
    let last = f.store.revision();
    let path = format!("/events?since={ahead}");
    let mut request = super::request(http::Method::GET, &path, Some(&admin), Default::default());
    let id = http::HeaderValue::from_str(&format!("{last}.{last}")).expect("an id");
    request.headers_mut().insert("last-event-id", id);
    let mut resumed = f.console.handle(request).await;
    f.tenant("late", json!({}), "pending").await;
    let (id, late) = update(&next_chunk(&mut resumed).await);
    assert_eq!(late["name"], "late", "the browser's last event id wins over the page's revision");
    let (tenants, machines) = id.split_once('.').expect("an id of two revisions");
    assert!(tenants.parse::<u64>().is_ok_and(|revision| revision > last), "{id}");
    assert_eq!(machines, last.to_string());
}

#[tokio::test]
async fn streams_are_bounded_per_user_and_freed_when_dropped() {
    let f = Fixture::new().await;
    let viewer = f.sign_in(VIEWER).await;
    let bound = cms_auth::LimitOptions::DEFAULT_WATCHES_PER_IDENTITY;
    let mut streams = Vec::new();
    for _ in 0..bound {
        let stream = f.open("/events", &viewer).await;
        assert_eq!(stream.status(), StatusCode::OK);
        streams.push(stream);
    }
    let refused = f.open("/events", &viewer).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers().get("retry-after").map(|v| v.as_bytes()), Some(&b"5"[..]));
    let admin = f.sign_in(ADMIN).await;
    assert_eq!(f.open("/events", &admin).await.status(), StatusCode::OK, "another user is not affected");
    streams.pop();
    assert_eq!(f.open("/events", &viewer).await.status(), StatusCode::OK, "a dropped stream frees its slot");
}

#[tokio::test]
async fn updates_say_whether_the_page_s_label_selector_matches() {
    let f = Fixture::new().await;
    let viewer = f.sign_in(VIEWER).await;
    let since = f.store.revision();
    f.tenant("dev-a", json!({"team": "a", "env": "dev"}), "pending").await;
    f.tenant("prod-a", json!({"team": "a", "env": "prod"}), "pending").await;
    f.tenant("none", json!({}), "pending").await;
    let selector = "team+in+%28a%2Cb%29%2Cenv%21%3Dprod";
    let mut stream = f.open(&format!("/events?since={since}&label={selector}"), &viewer).await;
    assert_eq!(stream.status(), StatusCode::OK);
    for (name, selected) in [("dev-a", true), ("prod-a", false), ("none", false)] {
        let (_, added) = update(&next_chunk(&mut stream).await);
        assert_eq!((added["name"].as_str(), added["selected"].as_bool()), (Some(name), Some(selected)));
    }
    let mut plain = f.open(&format!("/events?since={since}"), &viewer).await;
    let (_, added) = update(&next_chunk(&mut plain).await);
    assert!(added.get("selected").is_none(), "without a selector, updates say nothing of it: {added}");

    let mut refused = f.open("/events?label=%21x%3Da", &viewer).await;
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    let Body::Full(body) = refused.body_mut() else { panic!("a whole answer") };
    let message = String::from_utf8_lossy(body).into_owned();
    assert!(message.contains("\"!x=a\" is not valid"), "{message}");
}

//! `/tenants/{name}/support` over the real app and store: a bundle holds one
//! of its caller's watch slots until its stream ends or its client goes, so
//! past the caller's limit a bundle is 429, as a watch is.

use actix_web::test::TestRequest;
use cms_auth::LimitOptions;
use cms_model::UserRole;

use crate::harness;

#[actix_web::test]
async fn a_bundle_holds_a_watch_slot_while_it_streams() {
    let h = harness().await;
    h.tenant("acme").await;
    let editor = h.user("ed", UserRole::Edit).await;
    let caller = h.state.auth.authenticate(&editor).await.unwrap();
    let limits = h.state.auth.limits();
    // Every slot but one is taken by the editor's other streams.
    let held: Vec<_> = (1..LimitOptions::DEFAULT_WATCHES_PER_IDENTITY)
        .map(|_| limits.open_watch(&caller).expect("a slot"))
        .collect();
    let bundle = || {
        TestRequest::get()
            .uri("/api/v1/tenants/acme/support")
            .insert_header(("authorization", format!("Bearer {editor}")))
    };

    let open = h.open_as(bundle()).await;
    assert_eq!(open.status(), 200);
    assert_eq!(limits.open_watches(&caller), LimitOptions::DEFAULT_WATCHES_PER_IDENTITY);
    h.send_as(bundle()).await.error(429, "TooManyRequests");
    // Another identity is not held back.
    assert_eq!(h.get("/api/v1/tenants/acme/support").await.status, 200);

    // The client goes: its slot is free again.
    drop(open);
    assert_eq!(limits.open_watches(&caller), LimitOptions::DEFAULT_WATCHES_PER_IDENTITY - 1);
    let reply = h.send_as(bundle()).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert!(reply.body.starts_with(b"PK"), "a zip");
    // A bundle read to its end gives its slot back.
    assert_eq!(limits.open_watches(&caller), LimitOptions::DEFAULT_WATCHES_PER_IDENTITY - 1);
    drop(held);
    assert_eq!(limits.open_watches(&caller), 0);
}

//! `DELETE /tenants/{name}/state-lock`: an administrator's release of a
//! tenant's tool state lock, recorded on the tenant for the reconciler.

use actix_web::test::TestRequest;
use cms_model::{RELEASE_STATE_LOCK_ANNOTATION, UserRole};
use cms_store::{Key, Store};
use serde_json::json;

use crate::harness;

const PATH: &str = "/api/v1/tenants/acme/state-lock";

/// Writes the tenant's `status.stateLock`, as the reconciler would.
async fn hold(store: &dyn Store, holder: &str) {
    let status =
        json!({"stateLock": {"holder": holder, "operation": "apply", "since": "2026-01-01T00:00:00Z"}});
    store.update_status(Key::tenant("acme"), status, None).await.unwrap();
}

#[actix_web::test]
async fn a_lock_is_released_on_request_only_for_admins_and_never_under_a_live_holder() {
    let h = harness().await;
    h.delete("/api/v1/tenants/ghost/state-lock").await.error(404, "NotFound");
    h.tenant("acme").await;
    let message = h.delete(PATH).await.error(404, "NotFound");
    assert!(message.contains("no tool state lock"), "{message}");

    // A holder that is this very process (one server on SQLite) is alive.
    let alive = cms_store::replica_id().to_string();
    hold(h.store.as_ref(), &alive).await;
    let editor = h.user("ed", UserRole::Edit).await;
    let request =
        TestRequest::delete().uri(PATH).insert_header(("authorization", format!("Bearer {editor}")));
    h.send_as(request).await.error(403, "Forbidden");
    let message = h.delete(PATH).await.error(409, "Conflict");
    assert!(message.contains(&alive) && message.contains("force=true"), "{message}");
    h.delete(&format!("{PATH}?force=2")).await.error(400, "BadRequest");
    h.delete(&format!("{PATH}?other=1")).await.error(400, "BadRequest");
    let annotations = |h: &crate::Harness<_>| {
        let object = h.store.get(&Key::tenant("acme")).unwrap();
        let tenant: cms_model::Tenant = object.parse().unwrap();
        tenant.metadata.annotations
    };
    assert!(!annotations(&h).contains_key(RELEASE_STATE_LOCK_ANNOTATION));
    // Force never overrides a live holder: its run must end first.
    let message = h.delete(&format!("{PATH}?force=true")).await.error(409, "Conflict");
    assert!(message.contains(&alive) && message.contains("even with force=true"), "{message}");
    assert!(!annotations(&h).contains_key(RELEASE_STATE_LOCK_ANNOTATION));

    // A holder of another process, even one with this process's host and
    // pid (a previous server in a container is pid 1 too), is gone:
    // released without force.
    let (host_and_pid, _) = alive.rsplit_once('/').unwrap();
    hold(h.store.as_ref(), &format!("{host_and_pid}/0123456789abcdef")).await;
    let reply = h.delete(PATH).await;
    assert_eq!(reply.status.as_u16(), 202, "{}", reply.text());
    assert_eq!(reply.json()["force"], false);
    assert_eq!(annotations(&h)[RELEASE_STATE_LOCK_ANNOTATION], "stale");

    // Every request is on the audit log.
    let audit = h.get("/api/v1/audit?tenant=acme").await.json();
    let statuses: Vec<u64> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|record| record["route"] == "/api/v1/tenants/{name}/state-lock")
        .map(|record| record["status"].as_u64().unwrap())
        .collect();
    assert_eq!(statuses, [202, 409, 400, 400, 409, 403, 404], "newest first");
}

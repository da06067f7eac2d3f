//! `POST /tenants/{name}/rotate-ca`: an administrator's request to rotate a
//! tenant's CAs, sealed in its bundle and recorded on the tenant for the
//! reconciler.

use actix_web::test::TestRequest;
use cms_model::{CA_ROTATION_ANNOTATION, Tenant, UserRole};
use cms_store::{Key, Store};
use cms_tenancy::{Authority, CaRotations, RotationPhase, SealedRotations};
use serde_json::Value;

use crate::{Harness, harness, json};

const PATH: &str = "/api/v1/tenants/acme/rotate-ca";

/// The tenant `acme` as stored.
fn stored<S>(h: &Harness<S>) -> Tenant {
    h.store.get(&Key::tenant("acme")).expect("the tenant").parse().expect("a tenant")
}

/// The rotation the sealed bundle of `acme` records.
async fn sealed_rotation<S>(h: &Harness<S>) -> Option<cms_tenancy::Rotation> {
    let rotations = SealedRotations::new(h.store.clone(), h.store.clone(), h.state.tenancy.secrets().clone());
    rotations.rotation("acme").await.expect("the bundle opens")
}

#[actix_web::test]
async fn an_admin_begins_a_rotation_which_is_sealed_annotated_and_shown() {
    let h = harness().await;
    h.tenant("acme").await;
    let reply = h.post(PATH, r#"{"authorities": ["kubernetes", "os"]}"#).await;
    assert_eq!(reply.status.as_u16(), 202, "{}", reply.text());
    let answer = reply.json();
    assert_eq!(answer["authorities"], serde_json::json!(["os", "kubernetes"]), "the bundle's order");
    assert_eq!(answer["phase"], "generated");
    let since = answer["since"].as_str().expect("since").to_string();

    let tenant = stored(&h);
    let asked = &tenant.metadata.annotations[CA_ROTATION_ANNOTATION];
    assert!(chrono::DateTime::parse_from_rfc3339(asked).is_ok(), "{asked}");
    let status = tenant.status.ca_rotation.expect("status.caRotation");
    assert_eq!(status.phase, "generated");
    assert_eq!(status.authorities, ["os", "kubernetes"]);
    assert_eq!(serde_json::to_value(status.since).unwrap(), Value::String(since));
    let rotation = sealed_rotation(&h).await.expect("a rotation in the bundle");
    assert_eq!(rotation.phase, RotationPhase::Generated);
    assert_eq!(rotation.authorities, [Authority::Os, Authority::Kubernetes]);

    // A second request while it runs is refused and changes nothing.
    let message = h.post(PATH, r#"{"authorities": ["os"]}"#).await.error(409, "Conflict");
    assert!(message.contains("under way"), "{message}");
    assert_eq!(stored(&h).metadata.annotations[CA_ROTATION_ANNOTATION], *asked);

    // The requests are on the audit log with the tenant as their target.
    let audit = h.get("/api/v1/audit?tenant=acme").await.json();
    let records: Vec<&Value> = audit["items"]
        .as_array()
        .expect("records")
        .iter()
        .filter(|record| record["route"] == "/api/v1/tenants/{name}/rotate-ca")
        .collect();
    let statuses: Vec<u64> = records.iter().map(|record| record["status"].as_u64().unwrap()).collect();
    assert_eq!(statuses, [409, 202], "newest first");
    assert_eq!(records[1]["target"]["kind"], "Tenant");
    assert_eq!(records[1]["target"]["name"], "acme");
    assert_eq!(records[1]["actor"], "admin");
}

#[actix_web::test]
async fn one_authority_is_rotated_alone() {
    let h = harness().await;
    h.tenant("acme").await;
    let reply = h.post(PATH, r#"{"authorities": ["os"]}"#).await;
    assert_eq!(reply.status.as_u16(), 202, "{}", reply.text());
    assert_eq!(reply.json()["authorities"], serde_json::json!(["os"]));
    assert_eq!(sealed_rotation(&h).await.expect("a rotation").authorities, [Authority::Os]);
}

#[actix_web::test]
async fn only_admins_rotate_and_bad_requests_change_nothing() {
    let h = harness().await;
    h.tenant("acme").await;
    let editor = h.user("editor", UserRole::Edit).await;
    let viewer = h.user("viewer", UserRole::View).await;
    for token in [&editor, &viewer] {
        let request = json(TestRequest::post().uri(PATH), r#"{"authorities": ["os"]}"#)
            .insert_header(("authorization", format!("Bearer {token}")));
        let message = h.send_as(request).await.error(403, "Forbidden");
        assert!(message.contains("rotate"), "{message}");
    }
    h.post("/api/v1/tenants/ghost/rotate-ca", r#"{"authorities": ["os"]}"#).await.error(404, "NotFound");
    h.post(PATH, "{not json").await.error(400, "BadRequest");
    for (body, field) in [
        (r#"{"authorities": ["etcd"]}"#, "authorities[0]"),
        (r#"{"authorities": []}"#, "authorities"),
        (r#"{"authorities": ["os", "os"]}"#, "authorities[1]"),
        (r#"{"authorities": ["os"], "force": true}"#, "force"),
        (r#"{}"#, "authorities"),
    ] {
        let message = h.post(PATH, body).await.error(422, "Invalid");
        assert!(message.contains(field), "{body}: {message}");
    }
    let request = TestRequest::post().uri(PATH).set_payload(r#"{"authorities": ["os"]}"#);
    assert_eq!(h.send(request).await.status.as_u16(), 415, "JSON only");
    let huge = format!(r#"{{"authorities": ["{}"]}}"#, "x".repeat(2 << 20));
    h.post(PATH, &huge).await.error(413, "PayloadTooLarge");
    let tenant = stored(&h);
    assert!(!tenant.metadata.annotations.contains_key(CA_ROTATION_ANNOTATION));
    assert!(tenant.status.ca_rotation.is_none());
    assert!(sealed_rotation(&h).await.is_none());

    // A tenant being deleted is not rotated.
    assert_eq!(h.delete("/api/v1/tenants/acme").await.status.as_u16(), 202);
    let message = h.post(PATH, r#"{"authorities": ["os"]}"#).await.error(409, "Conflict");
    assert!(message.contains("being deleted"), "{message}");
    assert!(sealed_rotation(&h).await.is_none());
}

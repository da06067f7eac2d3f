//! The rotation of a tenant's CAs from the tenant page: who sees the form,
//! the typed confirmation, and what a request does.

use std::sync::Arc;

use cms_model::{CA_ROTATION_ANNOTATION, Tenant};
use cms_store::{Key, Store};
use cms_tenancy::{Authority, CaRotations, SealedRotations};
use http::StatusCode;

use super::{ADMIN, Fixture, VIEWER, location};

const PATH: &str = "/tenants/acme/rotate-ca";

/// The fixture with rotations, and tenant `acme` made with its secrets.
async fn fixture() -> (Fixture, Arc<SealedRotations>) {
    let mut f = Fixture::new().await;
    let tenancy = f.console.tenancy.clone();
    let rotations =
        Arc::new(SealedRotations::new(tenancy.store().clone(), f.store.clone(), tenancy.secrets().clone()));
    f.console = f.console.clone().with_rotations(rotations.clone());
    let tenant: Tenant = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "acme"},
        "spec": {"kubernetesVersion": "1.31.0"}
    }))
    .expect("a tenant");
    tenancy.create_tenant(tenant).await.expect("the tenant is made");
    (f, rotations)
}

fn stored(f: &Fixture) -> Tenant {
    f.store.get(&Key::tenant("acme")).expect("the tenant").parse().expect("a tenant")
}

#[tokio::test]
async fn an_admin_rotates_after_typing_the_name_and_the_page_shows_the_phase() {
    let (f, rotations) = fixture().await;
    let admin = f.sign_in(ADMIN).await;
    let page = f.get("/tenants/acme", Some(&admin)).await;
    assert!(page.body.contains(r#"id="rotate-ca""#), "the form shows to admins");
    assert!(!page.body.contains(r#"id="ca-rotation""#), "no status before a rotation");

    // Nothing checked, or the name mistyped: refused at the form, nothing rotated.
    let reply = f.submit(PATH, &admin, &[("confirm", "acme")]).await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(reply.body.contains("Check the OS CA, the Kubernetes CA or both"), "{}", reply.body);
    let reply = f.submit(PATH, &admin, &[("os", "on"), ("confirm", "acm")]).await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(reply.body.contains("Type acme exactly to rotate"), "{}", reply.body);
    assert!(reply.body.contains(r#"id="rotate-ca-error""#), "the message is at the form");
    assert!(rotations.rotation("acme").await.unwrap().is_none());

    // Without the form token: refused before anything.
    let reply = f.post(PATH, Some(&admin), &[("os", "on"), ("confirm", "acme")]).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.body);
    assert!(rotations.rotation("acme").await.unwrap().is_none());

    let reply = f.submit(PATH, &admin, &[("kubernetes", "on"), ("confirm", "acme")]).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    assert_eq!(location(&reply), "/tenants/acme");
    let rotation = rotations.rotation("acme").await.unwrap().expect("a rotation");
    assert_eq!(rotation.authorities, [Authority::Kubernetes]);
    let tenant = stored(&f);
    assert!(tenant.metadata.annotations.contains_key(CA_ROTATION_ANNOTATION));
    assert_eq!(tenant.status.ca_rotation.as_ref().map(|status| status.phase.as_str()), Some("generated"));

    let page = f.get("/tenants/acme", Some(&admin)).await;
    assert!(page.body.contains(r#"id="ca-rotation""#), "{}", page.body);
    assert!(page.body.contains(r#"data-phase="generated""#), "{}", page.body);

    // A second request while it runs: 409 at the form.
    let reply = f.submit(PATH, &admin, &[("os", "on"), ("confirm", "acme")]).await;
    assert_eq!(reply.status, StatusCode::CONFLICT, "{}", reply.body);
    assert!(reply.body.contains("under way"), "{}", reply.body);
}

#[tokio::test]
async fn others_see_the_status_but_neither_the_form_nor_the_right() {
    let (f, rotations) = fixture().await;
    let viewer = f.sign_in(VIEWER).await;
    let editor = f.sso_session("ed@example.com", &["devs"]);
    for session in [&viewer, &editor] {
        let page = f.get("/tenants/acme", Some(session)).await;
        assert_eq!(page.status, StatusCode::OK);
        assert!(!page.body.contains(r#"id="rotate-ca""#), "no form for non-admins");
        let reply = f.submit(PATH, session, &[("os", "on"), ("confirm", "acme")]).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.body);
        assert!(reply.body.contains("may not rotate"), "{}", reply.body);
    }
    assert!(rotations.rotation("acme").await.unwrap().is_none());

    let admin = f.sign_in(ADMIN).await;
    let reply = f.submit(PATH, &admin, &[("os", "on"), ("kubernetes", "on"), ("confirm", "acme")]).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    let page = f.get("/tenants/acme", Some(&viewer)).await;
    assert!(page.body.contains(r#"id="ca-rotation""#), "the status shows to every reader");
    assert!(page.body.contains("os, kubernetes"), "{}", page.body);
}

#[tokio::test]
async fn a_server_without_rotations_answers_503_and_a_missing_tenant_404() {
    let f = Fixture::new().await;
    f.tenant("acme", serde_json::json!({}), "active").await;
    let admin = f.sign_in(ADMIN).await;
    let reply = f.submit(PATH, &admin, &[("os", "on"), ("confirm", "acme")]).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE, "{}", reply.body);
    let (f, _) = fixture().await;
    let admin = f.sign_in(ADMIN).await;
    let reply = f.submit("/tenants/ghost/rotate-ca", &admin, &[("os", "on"), ("confirm", "ghost")]).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.body);
}

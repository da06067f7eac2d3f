//! The autoscaler identity from the console: who gets it, with what, and
//! what a server without an autoscaler port shows.

use cms_auth::Caller;
use cms_store::{Key, Store};
use http::StatusCode;
use serde_json::json;

use super::{ADMIN, Fixture, VIEWER, location};
use crate::{Recorded, Response};

/// The address the fixture's autoscaler port is reached at.
const ADDRESS: &str = "cms.test:8443";

/// The fixture with an autoscaler port, and the PEM of its CA's certificate.
async fn with_port() -> (Fixture, String) {
    let mut f = Fixture::new().await;
    let ca = cms_talos::CertificateAuthority::generate_p256(cms_tenancy::AUTOSCALER_CA_NAME).expect("a CA");
    let ca_pem = ca.cert_pem().to_string();
    f.console = f.console.clone().with_autoscaler(ca, ADDRESS.into());
    f.tenant("acme", json!({}), "active").await;
    (f, ca_pem)
}

/// An editor, signed in at the identity provider.
fn editor(f: &Fixture) -> String {
    f.sso_session("ed@example.com", &["devs"])
}

/// Who the answer is recorded on the audit log for, when it is.
fn recorded(response: &Response) -> Option<String> {
    response.extensions().get::<Recorded>()?;
    response.extensions().get::<Caller>().map(|caller| caller.user.clone())
}

#[tokio::test]
async fn an_admin_downloads_the_secret_with_a_fresh_certificate() {
    let (f, ca_pem) = with_port().await;
    let admin = f.sign_in(ADMIN).await;
    let reply = f.get("/tenants/acme/autoscaler-identity", Some(&admin)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.header("content-type"), "application/yaml");
    assert_eq!(reply.header("cache-control"), "no-store");
    assert_eq!(reply.header("content-disposition"), "attachment; filename=\"acme-autoscaler.yaml\"");
    let secret = crate::yaml::read(&reply.body).expect("a YAML document");
    assert_eq!((secret["apiVersion"].as_str(), secret["kind"].as_str()), (Some("v1"), Some("Secret")));
    assert_eq!(secret["metadata"]["name"], "cms-autoscaler");
    let data = &secret["stringData"];
    assert_eq!(data["ca.crt"].as_str(), Some(ca_pem.as_str()));
    let cert = data["tls.crt"].as_str().expect("a certificate");
    assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"), "{cert}");
    assert_ne!(cert, ca_pem, "the tenant's own certificate");
    assert!(data["tls.key"].as_str().is_some_and(|key| key.contains("PRIVATE KEY")));
    let config = data["cloud-config"].as_str().expect("a cloud config");
    assert!(config.contains(&format!("address: \"{ADDRESS}\"")), "{config}");

    let again = f.get("/tenants/acme/autoscaler-identity", Some(&admin)).await;
    let again = crate::yaml::read(&again.body).expect("a YAML document");
    assert_ne!(again["stringData"]["tls.crt"].as_str(), Some(cert), "every download issues a new one");

    let response = f.open("/tenants/acme/autoscaler-identity", &admin).await;
    assert_eq!(recorded(&response).as_deref(), Some(ADMIN), "the download is on the audit log");
    assert_eq!(
        location(&f.get("/tenants/acme/autoscaler-identity", None).await),
        "/login?next=%2Ftenants%2Facme%2Fautoscaler-identity"
    );
}

#[tokio::test]
async fn editors_and_viewers_are_refused_and_see_no_link() {
    let (f, _) = with_port().await;
    for (session, role) in [(editor(&f), "edit"), (f.sign_in(VIEWER).await, "view")] {
        let reply = f.get("/tenants/acme/autoscaler-identity", Some(&session)).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{role}: {}", reply.body);
        assert!(reply.body.contains("<h1>Forbidden</h1>"), "a page: {}", reply.body);
        let message = format!("role {role} may not download autoscaler identities");
        assert!(reply.body.contains(&message), "{role}: {}", reply.body);
        assert!(!reply.body.contains("BEGIN CERTIFICATE"));
        let response = f.open("/tenants/acme/autoscaler-identity", &session).await;
        assert_eq!(recorded(&response), None, "refused before the download, as the API's guard refuses");

        let page = f.get("/tenants/acme", Some(&session)).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        assert!(page.body.contains("id=\"download-kubeconfig\""), "{role} downloads a kubeconfig");
        assert!(!page.body.contains("autoscaler-identity"), "{role} sees no autoscaler identity");
    }
    let admin = f.sign_in(ADMIN).await;
    let page = f.get("/tenants/acme", Some(&admin)).await;
    let link = "<a id=\"download-autoscaler-identity\" href=\"/tenants/acme/autoscaler-identity\" download>\
                Autoscaler identity</a>";
    assert!(page.body.contains(link), "{}", page.body);
}

#[tokio::test]
async fn without_an_autoscaler_port_there_is_no_link_and_the_download_says_why() {
    let f = Fixture::new().await;
    f.tenant("acme", json!({}), "active").await;
    let admin = f.sign_in(ADMIN).await;
    let page = f.get("/tenants/acme", Some(&admin)).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("id=\"download-kubeconfig\""));
    assert!(!page.body.contains("autoscaler-identity"), "no link without an autoscaler port");
    let reply = f.get("/tenants/acme/autoscaler-identity", Some(&admin)).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE, "{}", reply.body);
    assert!(reply.body.contains("This server serves no autoscaler port"), "{}", reply.body);
    assert!(reply.header("content-type").starts_with("text/html"), "an error page");
    assert!(reply.header("content-disposition").is_empty(), "nothing to save");
}

#[tokio::test]
async fn an_unknown_or_departing_tenant_gets_no_identity() {
    let (f, _) = with_port().await;
    let admin = f.sign_in(ADMIN).await;
    let reply = f.get("/tenants/ghost/autoscaler-identity", Some(&admin)).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.body);
    assert!(reply.body.contains("<h1>Not Found</h1>"), "{}", reply.body);

    f.machine("acme", "m-1", true).await;
    f.store.delete(Key::tenant("acme")).await.expect("deletion begins");
    assert!(f.store.get(&Key::tenant("acme")).is_some_and(|tenant| tenant.deleting));
    let reply = f.get("/tenants/acme/autoscaler-identity", Some(&admin)).await;
    assert_eq!(reply.status, StatusCode::CONFLICT, "{}", reply.body);
    assert!(reply.body.contains("is being deleted: its autoscaler gets no new identity"), "{}", reply.body);
    assert!(!reply.body.contains("BEGIN CERTIFICATE"));

    let reply = f.get("/tenants/acme/autoscaler-identity?ttl=1h", Some(&admin)).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
}

//! kubeconfig, talosconfig and the secrets export: what each role gets, the
//! certificate lifetimes, the endpoints, and what is kept at rest.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cms_model::{Kind, UserRole};
use cms_store::{Draft, FINALIZER_SECRETS, Key, Store};
use serde_json::{Value, json};
use x509_parser::pem::parse_x509_pem;

use crate::harness;

/// The organizations (groups or roles), common names and lifetime of a
/// base64-encoded PEM certificate.
pub(crate) fn certificate(data: &Value) -> (Vec<String>, Vec<String>, i64) {
    let pem = STANDARD.decode(data.as_str().expect("base64 text")).expect("base64");
    let (_, pem) = parse_x509_pem(&pem).expect("PEM");
    let (_, cert) = x509_parser::parse_x509_certificate(&pem.contents).expect("X.509");
    let texts = |iter: &mut dyn Iterator<Item = &x509_parser::x509::AttributeTypeAndValue<'_>>| {
        iter.map(|a| a.as_str().expect("UTF-8").to_string()).collect::<Vec<_>>()
    };
    let lifetime = cert.validity().not_after.timestamp() - cert.validity().not_before.timestamp();
    (texts(&mut cert.subject().iter_organization()), texts(&mut cert.subject().iter_common_name()), lifetime)
}

const TENANT: &str = r#"{"metadata":{"name":"t1"},"spec":{"kubernetesVersion":"1.31.0",
    "talosVersion":"1.9.6","controlPlaneEndpoint":"https://k8s.t1.example:6443"}}"#;

#[actix_web::test]
async fn client_configs_follow_the_callers_role() {
    let h = harness().await;
    assert_eq!(h.post("/api/v1/tenants", TENANT).await.status.as_u16(), 201);
    let viewer = h.user("viewer", UserRole::View).await;
    let editor = h.user("editor", UserRole::Edit).await;
    let cases = [
        (&viewer, "viewer", "cms:viewers", "os:reader"),
        (&editor, "editor", "system:masters", "os:operator"),
        (&h.token, "admin", "system:masters", "os:admin"),
    ];
    for (token, user, group, talos_role) in cases {
        let kubeconfig = h.get_as("/api/v1/tenants/t1/kubeconfig", token).await.yaml("t1-kubeconfig.yaml");
        assert_eq!(kubeconfig["current-context"], format!("{user}@t1"));
        assert_eq!(kubeconfig["clusters"][0]["cluster"]["server"], "https://k8s.t1.example:6443");
        let (groups, names, lifetime) =
            certificate(&kubeconfig["users"][0]["user"]["client-certificate-data"]);
        assert_eq!((groups, names), (vec![group.to_string()], vec![user.to_string()]), "{user}");
        assert!((24 * 3600..=24 * 3600 + 60).contains(&lifetime), "24 h by default: {lifetime}");

        let talosconfig = h.get_as("/api/v1/tenants/t1/talosconfig", token).await.yaml("t1-talosconfig.yaml");
        let context = &talosconfig["contexts"]["t1"];
        assert_eq!(context["endpoints"], json!(["k8s.t1.example"]), "no machines yet: the endpoint's host");
        let (roles, names, _) = certificate(&context["crt"]);
        assert_eq!((roles, names), (vec![talos_role.to_string()], vec![]), "{user}");
    }
    h.get_as("/api/v1/tenants/t1/secrets", &viewer).await.error(403, "Forbidden");
    h.get_as("/api/v1/tenants/t1/secrets", &editor).await.error(403, "Forbidden");
    h.get_as("/api/v1/tenants/t2/kubeconfig", &viewer).await.error(404, "NotFound");
}

#[actix_web::test]
async fn ttl_is_asked_for_and_capped() {
    let h = harness().await;
    assert_eq!(h.post("/api/v1/tenants", TENANT).await.status.as_u16(), 201);
    let kubeconfig = h.get("/api/v1/tenants/t1/kubeconfig?ttl=2h").await.yaml("t1-kubeconfig.yaml");
    let (_, _, lifetime) = certificate(&kubeconfig["users"][0]["user"]["client-certificate-data"]);
    assert!((2 * 3600..=2 * 3600 + 60).contains(&lifetime), "{lifetime}");
    let talosconfig = h.get("/api/v1/tenants/t1/talosconfig?ttl=90m").await.yaml("t1-talosconfig.yaml");
    let (_, _, lifetime) = certificate(&talosconfig["contexts"]["t1"]["crt"]);
    assert!((90 * 60..=90 * 60 + 60).contains(&lifetime), "{lifetime}");
    for (query, words) in [
        ("ttl=25h", "longer than the longest allowed, 24h"),
        ("ttl=soon", "not a duration"),
        ("ttl=5s", "shorter than one minute"),
        ("expires=2h", "bad query"),
    ] {
        let message = h.get(&format!("/api/v1/tenants/t1/kubeconfig?{query}")).await.error(400, "BadRequest");
        assert!(message.contains(words), "{query}: {message}");
    }
}

#[actix_web::test]
async fn endpoints_follow_the_control_plane_machines() {
    let h = harness().await;
    let tenant = r#"{"metadata":{"name":"t1"},"spec":{"kubernetesVersion":"1.31.0","nodeGroups":[
        {"name":"cp","role":"controlplane","count":1,"providerClass":"metal:m","providerConfig":{"hosts":[{"address":"10.0.0.7"}]}},
        {"name":"w","role":"worker","count":1,"providerClass":"metal:m","providerConfig":{"hosts":[{"address":"10.0.0.8"}]}}]}}"#;
    assert_eq!(h.post("/api/v1/tenants", tenant).await.status.as_u16(), 201);
    let message = h.get("/api/v1/tenants/t1/kubeconfig").await.error(503, "Unavailable");
    assert!(message.contains("no control-plane endpoint yet"), "{message}");
    h.get("/api/v1/tenants/t1/talosconfig").await.error(503, "Unavailable");
    for (id, group, address) in [("m-b", "cp", "10.0.0.7:50000"), ("m-a", "w", "10.0.0.8:50000")] {
        let spec = json!({"nodeGroup": group, "managementAddress": address});
        let draft = Draft { spec, ..Draft::default() };
        h.store.create(Key::child(Kind::Machine, "t1", id), draft).await.expect("machine");
    }
    let kubeconfig = h.get("/api/v1/tenants/t1/kubeconfig").await.yaml("t1-kubeconfig.yaml");
    assert_eq!(kubeconfig["clusters"][0]["cluster"]["server"], "https://10.0.0.7:6443");
    let talosconfig = h.get("/api/v1/tenants/t1/talosconfig").await.yaml("t1-talosconfig.yaml");
    assert_eq!(talosconfig["contexts"]["t1"]["endpoints"], json!(["10.0.0.7"]), "control planes only");
}

#[actix_web::test]
async fn secrets_are_exported_to_admins_and_sealed_at_rest() {
    let h = harness().await;
    assert_eq!(h.post("/api/v1/tenants", TENANT).await.status.as_u16(), 201);
    let bundle = h.get("/api/v1/tenants/t1/secrets").await.yaml("t1-secrets.yaml");
    let values: Vec<String> = [
        &bundle["cluster"]["secret"],
        &bundle["secrets"]["bootstraptoken"],
        &bundle["secrets"]["secretboxencryptionsecret"],
        &bundle["trustdinfo"]["token"],
    ]
    .iter()
    .map(|value| value.as_str().expect("a secret value").to_string())
    .collect();
    let key =
        STANDARD.decode(bundle["certs"]["k8sserviceaccount"]["key"].as_str().expect("key")).expect("b64");
    assert!(String::from_utf8_lossy(&key).starts_with("-----BEGIN RSA PRIVATE KEY-----"));
    let sealed = h.store.secrets("t1".into()).await.expect("read").expect("sealed secrets");
    assert!(sealed.starts_with(b"cms\x01"), "stored sealed");
    for entry in std::fs::read_dir(h.dir()).expect("the data directory") {
        let bytes = std::fs::read(entry.expect("an entry").path()).expect("a database file");
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains("PRIVATE KEY"), "no PEM private key at rest");
        for value in &values {
            assert!(!text.contains(value.as_str()), "no secret value at rest");
        }
    }

    h.delete("/api/v1/tenants/t1").await;
    h.store.remove_finalizer(Key::tenant("t1"), FINALIZER_SECRETS.into()).await.expect("finalizer");
    let message = h.get("/api/v1/tenants/t1/kubeconfig").await.error(409, "Conflict");
    assert!(message.contains("has no secrets"), "{message}");
}

#[actix_web::test]
async fn unsupported_talos_versions_are_refused_before_any_key_is_made() {
    let h = harness().await;
    let old = TENANT.replace("1.9.6", "1.7.4");
    let message = h.post("/api/v1/tenants", &old).await.error(422, "Invalid");
    assert!(message.starts_with("spec.talosVersion") && message.contains("1.8 to 1.14"), "{message}");
    assert!(h.store.get(&Key::tenant("t1")).is_none());
    assert_eq!(h.post("/api/v1/tenants", TENANT).await.status.as_u16(), 201);
    let again = h.post("/api/v1/tenants", TENANT).await.error(409, "Conflict");
    assert!(again.contains("already exists"), "{again}");
}

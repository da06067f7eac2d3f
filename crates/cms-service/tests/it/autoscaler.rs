//! The autoscaler identity download: the Secret a tenant's cluster
//! autoscaler mounts, who may have it, and the manifest that mounts it.

use cms_model::UserRole;
use cms_service::{AppState, AutoscalerAccess, app};
use serde_json::Value;
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::{Harness, harness};

/// The address the harness's autoscaler port is reached at.
pub(crate) const AUTOSCALER_ADDRESS: &str = "cms.test:8443";

/// The autoscaler access of the test application.
pub(crate) fn access() -> AutoscalerAccess {
    let ca = cms_talos::CertificateAuthority::generate_p256(cms_tenancy::AUTOSCALER_CA_NAME).expect("a CA");
    AutoscalerAccess { ca, address: AUTOSCALER_ADDRESS.into() }
}

/// The DER of the one certificate in `pem`.
fn der(pem: &str) -> Vec<u8> {
    x509_parser::pem::parse_x509_pem(pem.as_bytes()).expect("PEM").1.contents
}

/// The `createdAt` of the tenant `name`, in Unix milliseconds.
fn created_millis<S>(h: &Harness<S>, name: &str) -> i64 {
    let tenant = h.state.tenancy.tenant(name).expect("the tenant");
    tenant.metadata.created_at.expect("a creation time").timestamp_millis()
}

#[actix_web::test]
async fn an_admin_gets_a_secret_whose_certificate_names_the_tenant_and_verifies_against_the_ca() {
    let h = harness().await;
    h.tenant("acme").await;
    let secret = h.get("/api/v1/tenants/acme/autoscaler-identity").await.yaml("acme-autoscaler.yaml");
    assert_eq!((secret["apiVersion"].as_str(), secret["kind"].as_str()), (Some("v1"), Some("Secret")));
    assert_eq!(secret["type"], "Opaque");
    assert_eq!(secret["metadata"]["namespace"], "kube-system");
    assert_eq!(secret["metadata"]["name"], "cms-autoscaler");
    let data = &secret["stringData"];
    let config: Value = serde_saphyr::from_str(data["cloud-config"].as_str().expect("text")).expect("YAML");
    assert_eq!(config["address"], AUTOSCALER_ADDRESS);
    assert_eq!(config["cert"], "/etc/cms-autoscaler/tls.crt");
    assert_eq!(config["key"], "/etc/cms-autoscaler/tls.key");
    assert_eq!(config["cacert"], "/etc/cms-autoscaler/ca.crt");
    assert_eq!(config["grpc_timeout"], "10s");

    let ca_der = der(data["ca.crt"].as_str().expect("the CA"));
    let (_, ca) = X509Certificate::from_der(&ca_der).expect("X.509");
    let leaf_der = der(data["tls.crt"].as_str().expect("the certificate"));
    let (_, leaf) = X509Certificate::from_der(&leaf_der).expect("X.509");
    leaf.verify_signature(Some(ca.public_key())).expect("issued by the CA the Secret carries");
    let common_names: Vec<_> = leaf.subject().iter_common_name().map(|a| a.as_str().unwrap()).collect();
    assert_eq!(common_names, ["acme"]);
    let organizations: Vec<_> = leaf.subject().iter_organization().map(|a| a.as_str().unwrap()).collect();
    assert_eq!(organizations, [format!("cms:autoscaler:{}", created_millis(&h, "acme"))]);
    assert!(leaf.extended_key_usage().unwrap().expect("EKU").value.client_auth);
    assert!(data["tls.key"].as_str().expect("the key").contains("PRIVATE KEY"));

    // The download is on the audit log, with the tenant as its target.
    let audit = h.get("/api/v1/audit?tenant=acme").await.json();
    let downloads: Vec<&Value> = audit["items"]
        .as_array()
        .expect("records")
        .iter()
        .filter(|record| record["method"] == "GET")
        .collect();
    assert_eq!(downloads.len(), 1, "{audit}");
    assert_eq!(downloads[0]["target"]["kind"], "Tenant");
    assert_eq!(downloads[0]["target"]["name"], "acme");
    assert!(!audit.to_string().contains("PRIVATE"), "no credential on the log");
}

#[actix_web::test]
async fn editors_are_refused_unknown_tenants_are_404_and_deleting_ones_409() {
    let h = harness().await;
    h.tenant("acme").await;
    let editor = h.user("editor", UserRole::Edit).await;
    let viewer = h.user("viewer", UserRole::View).await;
    for token in [&editor, &viewer] {
        let message =
            h.get_as("/api/v1/tenants/acme/autoscaler-identity", token).await.error(403, "Forbidden");
        assert!(message.contains("autoscaler"), "{message}");
    }
    h.get("/api/v1/tenants/nope/autoscaler-identity").await.error(404, "NotFound");
    h.get("/api/v1/tenants/acme/autoscaler-identity?ttl=1h").await.error(400, "BadRequest");
    assert_eq!(h.send(actix_web::test::TestRequest::delete().uri("/api/v1/tenants/acme")).await.status, 202);
    let message = h.get("/api/v1/tenants/acme/autoscaler-identity").await.error(409, "Conflict");
    assert!(message.contains("being deleted"), "{message}");
}

#[actix_web::test]
async fn the_console_s_download_is_the_same_secret_and_on_the_audit_log() {
    let h = harness().await;
    h.tenant("acme").await;
    let request = actix_web::test::TestRequest::get()
        .uri("/tenants/acme/autoscaler-identity")
        .insert_header(("cookie", format!("cms_session={}", h.token)));
    let reply = h.send_as(request).await;
    assert_eq!(reply.status.as_u16(), 200, "{}", reply.text());
    assert_eq!(reply.header("content-type"), "application/yaml");
    assert_eq!(reply.header("cache-control"), "no-store");
    assert_eq!(reply.header("content-disposition"), "attachment; filename=\"acme-autoscaler.yaml\"");
    let secret: Value = serde_saphyr::from_str(&reply.text()).expect("YAML");
    let data = &secret["stringData"];
    let leaf_der = der(data["tls.crt"].as_str().expect("the certificate"));
    let (_, leaf) = X509Certificate::from_der(&leaf_der).expect("X.509");
    let common_names: Vec<_> = leaf.subject().iter_common_name().map(|a| a.as_str().unwrap()).collect();
    assert_eq!(common_names, ["acme"]);

    let audit = h.get("/api/v1/audit?tenant=acme").await.json();
    let items = audit["items"].as_array().cloned().unwrap_or_default();
    let record = items
        .iter()
        .find(|record| record["route"] == "/tenants/{name}/autoscaler-identity")
        .unwrap_or_else(|| panic!("the console's download is on the audit log: {audit}"));
    assert_eq!((record["method"].as_str(), record["status"].as_u64()), (Some("GET"), Some(200)), "{record}");
    assert_eq!(record["target"]["kind"], "Tenant", "{record}");
    assert_eq!(record["target"]["name"], "acme", "{record}");
    assert!(!audit.to_string().contains("PRIVATE"), "no credential on the log");
}

#[actix_web::test]
async fn a_server_without_an_autoscaler_port_answers_503() {
    let h = harness().await;
    h.tenant("acme").await;
    let state = AppState { autoscaler: None, ..h.state.clone() };
    let service = actix_web::test::init_service(app(state)).await;
    let request = actix_web::test::TestRequest::get()
        .uri("/api/v1/tenants/acme/autoscaler-identity")
        .insert_header(("authorization", format!("Bearer {}", h.token)))
        .to_request();
    let response = actix_web::test::call_service(&service, request).await;
    assert_eq!(response.status().as_u16(), 503);
    let body: Value = actix_web::test::read_body_json(response).await;
    assert_eq!((body["code"].as_str(), body["status"].as_u64()), (Some("Unavailable"), Some(503)), "{body}");
    assert!(body["error"].as_str().unwrap().contains("autoscaler port"), "{body}");
}

#[actix_web::test]
async fn the_deployment_manifest_mounts_the_downloaded_secret_where_its_cloud_config_points() {
    let h = harness().await;
    h.tenant("acme").await;
    let secret = h.get("/api/v1/tenants/acme/autoscaler-identity").await.yaml("acme-autoscaler.yaml");
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/autoscaler/cluster-autoscaler.yaml");
    let text = std::fs::read_to_string(file).expect("the manifest");
    let documents: Vec<Value> = serde_saphyr::from_multiple(&text).expect("YAML documents");
    let deployment =
        documents.iter().find(|document| document["kind"] == "Deployment").expect("a Deployment");
    assert_eq!(deployment["metadata"]["namespace"], secret["metadata"]["namespace"], "beside the Secret");
    let pod = &deployment["spec"]["template"]["spec"];
    let account = pod["serviceAccountName"].as_str().expect("a service account");
    assert!(
        documents.iter().any(|d| d["kind"] == "ServiceAccount" && d["metadata"]["name"] == account),
        "the ServiceAccount is in the manifest"
    );
    let volume = pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|volume| volume["secret"]["secretName"] == secret["metadata"]["name"])
        .expect("a volume of the downloaded Secret");
    let container = &pod["containers"][0];
    assert_eq!(container["image"], "registry.k8s.io/autoscaling/cluster-autoscaler:v1.32.1");
    let mount = container["volumeMounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .find(|mount| mount["name"] == volume["name"])
        .expect("the Secret's volume is mounted");
    let mount_path = mount["mountPath"].as_str().expect("a path");
    let args: Vec<&str> =
        container["args"].as_array().expect("args").iter().map(|arg| arg.as_str().unwrap()).collect();
    assert!(args.contains(&"--cloud-provider=externalgrpc"), "{args:?}");
    assert!(!args.iter().any(|arg| arg.starts_with("--nodes")), "groups are discovered: {args:?}");
    let cloud_config =
        args.iter().find_map(|arg| arg.strip_prefix("--cloud-config=")).expect("a --cloud-config");
    let key = cloud_config.strip_prefix(&format!("{mount_path}/")).expect("a file of the mount");
    let data = &secret["stringData"];
    let config: Value = serde_saphyr::from_str(data[key].as_str().expect("the cloud config")).expect("YAML");
    for (field, file) in [("cert", "tls.crt"), ("key", "tls.key"), ("cacert", "ca.crt")] {
        assert_eq!(config[field], format!("{mount_path}/{file}"), "{field}");
        assert!(data[file].is_string(), "the Secret holds {file}");
    }
    let tolerations = pod["tolerations"].as_array().expect("tolerations");
    assert!(tolerations.iter().any(|t| t["key"] == "node-role.kubernetes.io/control-plane"));
}

//! kubeconfig and talosconfig: their shape and the certificates they carry.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cms_model::UserRole;
use cms_talos::{
    KubeIdentity, issue_client_cert, issue_server_cert, kubeconfig, kubeconfig_for, talos_client_cert,
    talosconfig,
};
use serde_json::{Value, json};

use crate::bundle;
use crate::x509::{self, ED25519, P256};

const DAY: Duration = Duration::from_secs(24 * 3600);
const ROLES: [UserRole; 3] = [UserRole::Admin, UserRole::Edit, UserRole::View];

fn decode(value: &Value) -> String {
    String::from_utf8(STANDARD.decode(value.as_str().expect("a base64 string")).unwrap()).unwrap()
}

#[test]
fn talosconfig_certificates_carry_the_role_and_verify_against_the_os_ca() {
    let bundle = bundle();
    let endpoints = vec!["10.0.0.10".to_string(), "10.0.0.11".to_string()];
    let nodes = vec!["10.0.0.20".to_string()];
    for (role, expected) in ROLES.into_iter().zip(["os:admin", "os:operator", "os:reader"]) {
        let yaml = talosconfig(bundle, "demo", &endpoints, &nodes, role, DAY).unwrap();
        assert!(yaml.starts_with("context: demo\n"), "{yaml}");
        let parsed: Value = serde_saphyr::from_str(&yaml).unwrap();
        let context = &parsed["contexts"]["demo"];
        assert_eq!(context["endpoints"], json!(endpoints));
        assert_eq!(context["nodes"], json!(nodes));
        assert_eq!(decode(&context["ca"]), bundle.os_ca().cert_pem());
        let crt = decode(&context["crt"]);
        assert!(x509::signed_by(&crt, bundle.os_ca().cert_pem()), "{role:?}");
        let summary = x509::summary(&crt);
        assert_eq!(summary.organizations, [expected]);
        assert!(summary.common_names.is_empty(), "{summary:?}");
        assert!(summary.client_auth && !summary.server_auth && !summary.is_ca, "{summary:?}");
        assert_eq!(summary.key_algorithm, ED25519);
        assert!((summary.not_after - x509::now() - DAY.as_secs() as i64).abs() < 60);
        assert!(decode(&context["key"]).starts_with("-----BEGIN ED25519 PRIVATE KEY-----\n"));
    }
}

#[test]
fn kubeconfig_names_the_user_and_carries_its_group() {
    let bundle = bundle();
    for (role, (user, group)) in ROLES.into_iter().zip([
        ("admin", "system:masters"),
        ("editor", "system:masters"),
        ("viewer", "cms:viewers"),
    ]) {
        let yaml = kubeconfig(bundle, "demo", "https://10.0.0.10:6443", role, DAY).unwrap();
        let parsed: Value = serde_saphyr::from_str(&yaml).unwrap();
        let name = format!("{user}@demo");
        assert_eq!(parsed["current-context"], json!(name));
        assert_eq!(
            parsed["contexts"][0],
            json!({"name": name, "context": {"cluster": "demo", "namespace": "default", "user": name}})
        );
        assert_eq!(parsed["clusters"][0]["cluster"]["server"], "https://10.0.0.10:6443");
        assert_eq!(
            decode(&parsed["clusters"][0]["cluster"]["certificate-authority-data"]),
            bundle.kubernetes_ca().cert_pem()
        );
        assert_eq!(parsed["users"][0]["name"], json!(name));
        let crt = decode(&parsed["users"][0]["user"]["client-certificate-data"]);
        assert!(x509::signed_by(&crt, bundle.kubernetes_ca().cert_pem()));
        let summary = x509::summary(&crt);
        assert_eq!(
            (summary.common_names.as_slice(), summary.organizations.as_slice()),
            (&[user.to_string()][..], &[group.to_string()][..])
        );
        assert!(summary.client_auth && !summary.server_auth);
        assert_eq!(summary.curve.as_deref(), Some(P256), "the leaf key follows the P-256 CA");
        let now = x509::now();
        assert!(
            (now - 10 - summary.not_before).abs() <= 5,
            "not before is now - 10 s: {}",
            now - summary.not_before
        );
        assert!((summary.not_after - now - DAY.as_secs() as i64).abs() < 60);
        assert!(
            decode(&parsed["users"][0]["user"]["client-key-data"])
                .starts_with("-----BEGIN EC PRIVATE KEY-----\n")
        );
    }
    assert!(kubeconfig(bundle, "demo", "http://plain", UserRole::Admin, DAY).is_err());
    assert!(kubeconfig(bundle, "demo", "https://x", UserRole::Admin, Duration::ZERO).is_err());
}

#[test]
fn an_identity_with_groups_gets_every_group_in_an_o_of_its_own() {
    let bundle = bundle();
    let groups = ["oidc:viewers".to_string(), "oidc:devs".to_string()];
    let identity = KubeIdentity { role: UserRole::Edit, name: Some("oidc:alice"), groups: &groups };
    let yaml = kubeconfig_for(bundle, "demo", "https://10.0.0.10:6443", &identity, DAY).unwrap();
    let parsed: Value = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(parsed["current-context"], json!("oidc:alice@demo"));
    let crt = decode(&parsed["users"][0]["user"]["client-certificate-data"]);
    assert!(x509::signed_by(&crt, bundle.kubernetes_ca().cert_pem()));
    let summary = x509::summary(&crt);
    assert_eq!(summary.common_names, ["oidc:alice"]);
    assert_eq!(summary.organizations, ["system:masters", "oidc:viewers", "oidc:devs"]);
    assert!(summary.client_auth && !summary.server_auth && !summary.is_ca, "{summary:?}");
    assert!(summary.digital_signature);
    assert_eq!(summary.curve.as_deref(), Some(P256));
    let now = x509::now();
    assert!((now - 10 - summary.not_before).abs() <= 5);
    assert!((summary.not_after - now - DAY.as_secs() as i64).abs() < 60);
    assert!(
        decode(&parsed["users"][0]["user"]["client-key-data"])
            .starts_with("-----BEGIN EC PRIVATE KEY-----\n")
    );
    // Several organizations under the Ed25519 OS CA, or for no time, are refused.
    assert!(issue_client_cert(bundle.os_ca(), None, &["a", "b"], DAY).is_err());
    assert!(issue_client_cert(bundle.kubernetes_ca(), None, &["a", "b"], Duration::ZERO).is_err());
}

#[test]
fn apid_and_server_certificates_come_from_the_right_ca() {
    let bundle = bundle();
    let client = talos_client_cert(bundle, UserRole::Admin, DAY).unwrap();
    assert!(x509::signed_by(&client.cert_pem, bundle.os_ca().cert_pem()));
    assert_eq!(x509::summary(&client.cert_pem).organizations, ["os:admin"]);
    let server = issue_server_cert(bundle.os_ca(), &["10.0.0.10", "node-1"], DAY).unwrap();
    assert!(x509::signed_by(&server.cert_pem, bundle.os_ca().cert_pem()));
    let summary = x509::summary(&server.cert_pem);
    assert!(summary.server_auth && !summary.client_auth);
    assert_eq!(summary.key_algorithm, ED25519);
}

//! The secrets bundle: algorithms, encodings, labels, chains, export and sealing.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use cms_talos::{CertificateAuthority, Sealer, SealingKey, SecretsBundle, issue_client_cert};
use rsa::pkcs1::DecodeRsaPrivateKey;
use rsa::traits::PublicKeyParts;
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;

use crate::bundle;
use crate::x509::{self, EC_PUBLIC_KEY, ED25519, P256};

/// Ten years of 87600 hours, in seconds.
const TEN_YEARS: i64 = 87_600 * 3600;

fn is_token(token: &str) -> bool {
    let ok = |part: &str, len: usize| {
        part.len() == len && part.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
    };
    token.split_once('.').is_some_and(|(head, tail)| ok(head, 6) && ok(tail, 16))
}

fn check_ca(
    name: &str,
    ca: &CertificateAuthority,
    organization: Option<&str>,
    common_name: Option<&str>,
    ed25519: bool,
) {
    let summary = x509::summary(ca.cert_pem());
    assert_eq!(summary.organizations, organization.into_iter().collect::<Vec<_>>(), "{name}: {summary:?}");
    assert_eq!(summary.common_names, common_name.into_iter().collect::<Vec<_>>(), "{name}: {summary:?}");
    assert!(summary.is_ca && summary.key_cert_sign && summary.digital_signature, "{name}: {summary:?}");
    assert!(summary.server_auth && summary.client_auth, "{name}: {summary:?}");
    assert_eq!(summary.not_after - summary.not_before, TEN_YEARS, "{name}");
    assert!((summary.not_before - x509::now()).abs() < 3600, "{name}: starts now");
    assert!(x509::signed_by(ca.cert_pem(), ca.cert_pem()), "{name}: self-signed");
    let label = if ed25519 {
        assert_eq!(summary.key_algorithm, ED25519, "{name}");
        "ED25519 PRIVATE KEY"
    } else {
        assert_eq!(
            (summary.key_algorithm.as_str(), summary.curve.as_deref()),
            (EC_PUBLIC_KEY, Some(P256)),
            "{name}"
        );
        "EC PRIVATE KEY"
    };
    let key = ca.key_pem().expose_secret();
    assert!(key.starts_with(&format!("-----BEGIN {label}-----\n")), "{name}: {}", &key[..40]);
    // The key belongs to the certificate: a leaf it signs verifies against it.
    let leaf = issue_client_cert(ca, Some("probe"), &["probe"], Duration::from_secs(60)).unwrap();
    assert!(x509::signed_by(&leaf.cert_pem, ca.cert_pem()), "{name}: key matches certificate");
    assert_eq!(
        x509::summary(&leaf.cert_pem).key_algorithm,
        summary.key_algorithm,
        "{name}: leaf key follows the CA"
    );
}

#[test]
fn certificate_authorities_follow_talosctl() {
    let bundle = bundle();
    check_ca("os", bundle.os_ca(), Some("talos"), None, true);
    check_ca("etcd", bundle.etcd_ca(), Some("etcd"), None, false);
    check_ca("k8s", bundle.kubernetes_ca(), Some("kubernetes"), None, false);
    check_ca("aggregator", bundle.aggregator_ca(), None, Some("front-proxy"), false);
}

#[test]
fn service_account_key_is_rsa_4096_pkcs1() {
    let pem = bundle().service_account_key().expose_secret();
    assert!(pem.starts_with("-----BEGIN RSA PRIVATE KEY-----\n"));
    let key = rsa::RsaPrivateKey::from_pkcs1_pem(pem).expect("PKCS#1");
    assert_eq!(key.size() * 8, 4096);
}

#[test]
fn tokens_and_random_values_have_talos_forms() {
    let bundle = bundle();
    assert!(is_token(bundle.bootstrap_token().expose_secret()));
    assert!(is_token(bundle.trustd_token().expose_secret()));
    assert_ne!(bundle.bootstrap_token().expose_secret(), bundle.trustd_token().expose_secret());
    assert_eq!(STANDARD.decode(bundle.cluster_secret().expose_secret()).unwrap().len(), 32);
    assert_eq!(STANDARD.decode(bundle.secretbox_encryption_secret().expose_secret()).unwrap().len(), 32);
    // Generated for 1.9: URL-safe base64.
    assert_eq!(URL_SAFE.decode(bundle.cluster_id()).unwrap().len(), 32);
    assert_eq!(bundle.talos_version(), "1.9.6");
    assert!(SecretsBundle::generate("1.7.0").is_err());
    assert!(SecretsBundle::generate("one").is_err());
}

#[test]
fn secrets_yaml_has_the_talosctl_form() {
    let bundle = bundle();
    let yaml = bundle.to_secrets_yaml().unwrap();
    assert!(yaml.starts_with("cluster:\n"), "{yaml}");
    let parsed: Value = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(parsed["cluster"]["id"], bundle.cluster_id());
    assert_eq!(parsed["secrets"]["bootstraptoken"], bundle.bootstrap_token().expose_secret());
    assert_eq!(
        parsed["secrets"]["secretboxencryptionsecret"],
        bundle.secretbox_encryption_secret().expose_secret()
    );
    assert_eq!(parsed["trustdinfo"]["token"], bundle.trustd_token().expose_secret());
    let decoded = |path: &[&str]| {
        let value = path.iter().fold(&parsed, |value, key| &value[*key]);
        String::from_utf8(STANDARD.decode(value.as_str().expect("a string")).unwrap()).unwrap()
    };
    assert_eq!(decoded(&["certs", "os", "crt"]), bundle.os_ca().cert_pem());
    assert!(decoded(&["certs", "os", "key"]).starts_with("-----BEGIN ED25519 PRIVATE KEY-----"));
    for part in ["etcd", "k8s", "k8saggregator"] {
        assert!(decoded(&["certs", part, "crt"]).starts_with("-----BEGIN CERTIFICATE-----"), "{part}");
        assert!(decoded(&["certs", part, "key"]).starts_with("-----BEGIN EC PRIVATE KEY-----"), "{part}");
    }
    assert!(decoded(&["certs", "k8sserviceaccount", "key"]).starts_with("-----BEGIN RSA PRIVATE KEY-----"));
    let sections: Vec<&String> = parsed.as_object().unwrap().keys().collect();
    assert_eq!(sections.len(), 4, "{sections:?}");
}

/// Every secret value of the bundle, as text that must never leak.
fn secret_values(bundle: &SecretsBundle) -> Vec<String> {
    let mut values: Vec<String> = [
        bundle.cluster_secret(),
        bundle.bootstrap_token(),
        bundle.trustd_token(),
        bundle.secretbox_encryption_secret(),
    ]
    .into_iter()
    .map(|s| s.expose_secret().to_string())
    .collect();
    for ca in [bundle.os_ca(), bundle.etcd_ca(), bundle.kubernetes_ca(), bundle.aggregator_ca()] {
        values.push(ca.key_pem().expose_secret().lines().nth(1).unwrap().to_string());
    }
    values.push(bundle.service_account_key().expose_secret().lines().nth(1).unwrap().to_string());
    values
}

#[test]
fn debug_shows_no_secret_and_storage_round_trips() {
    let bundle = bundle();
    let debug = format!("{bundle:?}");
    for secret in secret_values(bundle) {
        assert!(!debug.contains(&secret), "{debug}");
    }
    assert!(!debug.contains("PRIVATE KEY"), "{debug}");
    let stored = serde_json::to_string(bundle).unwrap();
    let restored: SecretsBundle = serde_json::from_str(&stored).unwrap();
    assert_eq!(serde_json::to_string(&restored).unwrap(), stored);
    assert!(
        CertificateAuthority::from_pem(
            restored.os_ca().cert_pem().to_string(),
            SecretString::from(restored.os_ca().key_pem().expose_secret().to_string())
        )
        .is_ok()
    );
}

#[test]
fn a_sealed_bundle_holds_no_secret_in_clear() {
    let bundle = bundle();
    let sealer = Sealer::new(SealingKey::generate("k1").unwrap());
    let stored = serde_json::to_vec(bundle).unwrap();
    let sealed = sealer.seal("acme", "secrets-bundle", &stored).unwrap();
    let contains = |needle: &[u8]| sealed.windows(needle.len()).any(|window| window == needle);
    assert!(!contains(b"PRIVATE KEY") && !contains(b"BEGIN"));
    for secret in secret_values(bundle) {
        assert!(!contains(secret.as_bytes()), "{secret}");
    }
    assert_eq!(sealer.open("acme", "secrets-bundle", &sealed).unwrap(), stored);
    assert!(sealer.open("other", "secrets-bundle", &sealed).is_err());
}

use std::sync::Arc;

use cms_store::{SqlStore, StoreOptions};
use cms_talos::SealingKey;
use serde_json::Value;
use x509_parser::prelude::{FromDer, X509Certificate};

use super::*;

fn sealer(id: &str, byte: u8) -> Sealer {
    Sealer::new(SealingKey::new(id, [byte; 32]).unwrap())
}

async fn store(dir: &tempfile::TempDir) -> Arc<SqlStore> {
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("cms.db").display());
    SqlStore::open(&StoreOptions::new(url)).await.unwrap()
}

async fn stored(store: &SqlStore) -> String {
    store.setting(AUTOSCALER_CA_SETTING.to_string()).await.unwrap().expect("the setting is written")
}

/// A tenant named `name`, created at `millis` (Unix milliseconds).
fn tenant(name: &str, millis: Option<i64>) -> Tenant {
    let mut tenant: Tenant = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {"kubernetesVersion": "1.31.0"},
    }))
    .unwrap();
    tenant.metadata.created_at = millis.map(|ms| chrono::DateTime::from_timestamp_millis(ms).unwrap());
    tenant
}

/// The DER of the one certificate in `pem`.
fn der(pem: &str) -> Vec<u8> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
    pem.contents
}

#[tokio::test]
async fn the_ca_is_generated_once_stored_sealed_and_opened_later() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let sealer = sealer("k1", 1);
    let ca = autoscaler_ca(store.as_ref(), &sealer).await.unwrap();
    let text = stored(&store).await;
    assert!(!text.contains("PRIVATE") && !text.contains("CERTIFICATE"), "sealed: {text}");
    let blob = STANDARD.decode(&text).unwrap();
    assert_eq!(Sealer::sealed_key_id(&blob).unwrap(), "k1");
    let again = autoscaler_ca(store.as_ref(), &sealer).await.unwrap();
    assert_eq!(again.cert_pem(), ca.cert_pem(), "the next start opens the same CA");
    assert_eq!(again.key_pem().expose_secret(), ca.key_pem().expose_secret());
    assert_eq!(stored(&store).await, text, "and writes nothing");
    assert!(!format!("{again:?}").contains("PRIVATE"), "the key is never shown");

    let other = self::sealer("k2", 2);
    let err = autoscaler_ca(store.as_ref(), &other).await.unwrap_err();
    assert!(err.to_string().contains("\"k1\""), "a key not configured is named: {err}");
    store.put_setting(AUTOSCALER_CA_SETTING.to_string(), "not base64!".into()).await.unwrap();
    let err = autoscaler_ca(store.as_ref(), &sealer).await.unwrap_err();
    assert!(err.to_string().contains("not base64"), "{err}");
}

#[tokio::test]
async fn replicas_starting_together_agree_on_one_ca() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let sealer = sealer("k1", 1);
    let starts = (0..4).map(|_| autoscaler_ca(store.as_ref(), &sealer));
    let cas = futures_util::future::try_join_all(starts).await.unwrap();
    let stored_ca = open(&sealer, &stored(&store).await).unwrap();
    for ca in cas {
        assert_eq!(ca.cert_pem(), stored_ca.cert_pem(), "every replica issues with the stored CA");
    }
}

#[test]
fn an_identity_names_the_tenant_and_its_creation_and_verifies_against_the_ca() {
    let ca = CertificateAuthority::generate_p256(AUTOSCALER_CA_NAME).unwrap();
    let issued = issue_autoscaler_identity(&ca, &tenant("acme", Some(1_700_000_000_123))).unwrap();
    let leaf_der = der(&issued.cert_pem);
    let (_, leaf) = X509Certificate::from_der(&leaf_der).unwrap();
    let common_names: Vec<_> = leaf.subject().iter_common_name().map(|cn| cn.as_str().unwrap()).collect();
    assert_eq!(common_names, ["acme"]);
    let organizations: Vec<_> = leaf.subject().iter_organization().map(|o| o.as_str().unwrap()).collect();
    assert_eq!(organizations, ["cms:autoscaler:1700000000123"]);
    let usage = leaf.extended_key_usage().unwrap().expect("an extended key usage").value;
    assert!(usage.client_auth && !usage.server_auth);
    let validity = leaf.validity();
    let days = (validity.not_after.timestamp() - validity.not_before.timestamp()) / 86_400;
    assert_eq!(days, 365);
    let ca_der = der(ca.cert_pem());
    let (_, ca_cert) = X509Certificate::from_der(&ca_der).unwrap();
    leaf.verify_signature(Some(ca_cert.public_key())).expect("issued by the autoscaler CA");
    assert_eq!(ca.algorithm().unwrap(), cms_talos::KeyAlgorithm::EcdsaP256);

    let err = issue_autoscaler_identity(&ca, &tenant("acme", None)).unwrap_err();
    assert!(err.to_string().contains("no creation time"), "{err}");
}

#[test]
fn the_secret_holds_the_cloud_config_the_ca_and_a_fresh_identity() {
    let ca = CertificateAuthority::generate_p256(AUTOSCALER_CA_NAME).unwrap();
    let acme = tenant("acme", Some(42));
    let yaml = autoscaler_secret_yaml(&ca, &acme, "cms.example.com:8443").unwrap();
    let secret: Value = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(secret["apiVersion"], "v1");
    assert_eq!(secret["kind"], "Secret");
    assert_eq!(secret["type"], "Opaque");
    assert_eq!(secret["metadata"]["name"], AUTOSCALER_SECRET_NAME);
    assert_eq!(secret["metadata"]["namespace"], "kube-system");
    let data = &secret["stringData"];
    assert_eq!(data["ca.crt"], ca.cert_pem(), "PEM text survives the YAML whole");
    let config: Value = serde_saphyr::from_str(data["cloud-config"].as_str().unwrap()).unwrap();
    assert_eq!(
        config,
        serde_json::json!({"address": "cms.example.com:8443", "key": "/etc/cms-autoscaler/tls.key",
            "cert": "/etc/cms-autoscaler/tls.crt", "cacert": "/etc/cms-autoscaler/ca.crt", "grpc_timeout": "10s"})
    );
    let cert = data["tls.crt"].as_str().unwrap();
    assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"));
    assert!(data["tls.key"].as_str().unwrap().contains("PRIVATE KEY"));
    let again: Value =
        serde_saphyr::from_str(&autoscaler_secret_yaml(&ca, &acme, "cms.example.com:8443").unwrap()).unwrap();
    assert_ne!(again["stringData"]["tls.crt"], cert, "every download issues a new certificate");

    for bad in ["", "a b:1", "x\n:1"] {
        assert!(autoscaler_secret_yaml(&ca, &acme, bad).is_err(), "{bad:?}");
    }
}

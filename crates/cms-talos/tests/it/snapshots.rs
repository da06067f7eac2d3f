//! Snapshots of rendered configs, with every key, certificate and random value redacted.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cms_model::Role;
use cms_talos::{config_yaml, render_documents};
use secrecy::ExposeSecret;
use serde_json::Value;

use crate::{VERSIONS, bundle, input};

/// Each random value of the bundle, in each form it appears, with its placeholder.
fn redactions() -> Vec<(String, String)> {
    let bundle = bundle();
    let mut pairs = vec![
        (bundle.cluster_id().to_string(), "<cluster-id>".to_string()),
        (bundle.cluster_secret().expose_secret().to_string(), "<cluster-secret>".into()),
        (bundle.bootstrap_token().expose_secret().to_string(), "<bootstrap-token>".into()),
        (bundle.trustd_token().expose_secret().to_string(), "<trustd-token>".into()),
        (bundle.secretbox_encryption_secret().expose_secret().to_string(), "<secretbox-secret>".into()),
    ];
    let mut pem = |name: &str, text: &str| {
        pairs.push((text.to_string(), format!("<{name} PEM>")));
        pairs.push((STANDARD.encode(text.as_bytes()), format!("<{name} PEM, base64>")));
    };
    for (name, ca) in [
        ("os-ca", bundle.os_ca()),
        ("etcd-ca", bundle.etcd_ca()),
        ("k8s-ca", bundle.kubernetes_ca()),
        ("aggregator-ca", bundle.aggregator_ca()),
    ] {
        pem(&format!("{name} crt"), ca.cert_pem());
        pem(&format!("{name} key"), ca.key_pem().expose_secret());
    }
    pem("service-account key", bundle.service_account_key().expose_secret());
    pairs
}

fn redact(value: &mut Value, pairs: &[(String, String)]) {
    match value {
        Value::String(text) => {
            if let Some((_, placeholder)) = pairs.iter().find(|(secret, _)| secret == text) {
                *text = placeholder.clone();
                return;
            }
            for (secret, placeholder) in pairs {
                if text.contains(secret.as_str()) {
                    *text = text.replace(secret.as_str(), placeholder);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| redact(item, pairs)),
        Value::Object(map) => map.values_mut().for_each(|item| redact(item, pairs)),
        _ => {}
    }
}

#[test]
fn rendered_configs() {
    let pairs = redactions();
    for version in VERSIONS {
        for role in [Role::ControlPlane, Role::Worker] {
            let mut documents = render_documents(&input(version, role)).unwrap();
            documents.iter_mut().for_each(|document| redact(document, &pairs));
            let yaml = config_yaml(&documents).unwrap();
            assert!(
                !yaml.contains("-----BEGIN") && !yaml.contains("LS0tLS1CRUdJ"),
                "unredacted PEM:\n{yaml}"
            );
            let minor = version.rsplit_once('.').unwrap().0;
            insta::assert_snapshot!(format!("config-v{minor}-{}", role.as_str()), yaml);
        }
    }
}

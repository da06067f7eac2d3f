//! Configs during a CA rotation: each phase's CAs where Talos reads them,
//! valid against every version's official schema.

use cms_model::Role;
use cms_talos::{Authority, RotationPhase, SecretsBundle, render_documents};
use serde_json::Value;

use crate::schema::validate;
use crate::{VERSIONS, input, multidoc};

fn b64(text: &str) -> String {
    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, text)
}

/// The v1alpha1 document of a config.
fn v1alpha1(documents: &[Value]) -> &Value {
    documents.iter().find(|document| document.get("machine").is_some()).expect("a v1alpha1 document")
}

/// The Kubernetes CAs a config names: the issuing one (on a control plane)
/// and the accepted ones, as PEM.
fn kubernetes(documents: &[Value], talos_version: &str) -> (Option<String>, Vec<String>) {
    let text = |value: &Value| value.as_str().unwrap().to_string();
    let decoded = |value: &Value| {
        String::from_utf8(
            base64::Engine::decode(&base64::engine::general_purpose::STANDARD, text(value)).unwrap(),
        )
        .unwrap()
    };
    if multidoc(talos_version) {
        let ca = documents.iter().find(|d| d["kind"] == "KubeAPIServerCAConfig").expect("the CA document");
        let accepted =
            ca["acceptedCAs"].as_array().map(|list| list.iter().map(text).collect()).unwrap_or_default();
        (ca["issuingCA"].get("cert").map(text), accepted)
    } else {
        let cluster = &v1alpha1(documents)["cluster"];
        let accepted =
            cluster["acceptedCAs"].as_array().map(|list| list.iter().map(|ca| decoded(&ca["crt"])).collect());
        (Some(decoded(&cluster["ca"]["crt"])), accepted.unwrap_or_default())
    }
}

#[test]
fn every_phase_puts_its_cas_where_talos_reads_them_and_validates() {
    let mut bundle: SecretsBundle = crate::bundle().clone();
    let (old_os, old_k8s) =
        (bundle.os_ca().cert_pem().to_string(), bundle.kubernetes_ca().cert_pem().to_string());
    bundle.begin_rotation(Authority::Os).unwrap();
    bundle.begin_rotation(Authority::Kubernetes).unwrap();
    let new_os = bundle.rotation(Authority::Os).unwrap().incoming().cert_pem().to_string();
    let new_k8s = bundle.rotation(Authority::Kubernetes).unwrap().incoming().cert_pem().to_string();
    let mut phases = 0;
    while let Some(phase) = bundle.rotation_phase(Authority::Os) {
        for version in VERSIONS {
            for role in [Role::ControlPlane, Role::Worker] {
                let mut input = input(version, role);
                input.bundle = &bundle;
                let documents = render_documents(&input).unwrap();
                // The official schemas type `acceptedCAs` of v1alpha1 as one
                // object where Talos reads a list of them (its docs' examples
                // and `machine.go`'s `[]*x509.PEMEncodedCertificate`): the
                // rest is validated, the lists are checked below.
                let mut checked = documents.clone();
                for document in &mut checked {
                    for section in ["machine", "cluster"] {
                        if let Some(section) = document.get_mut(section).and_then(Value::as_object_mut) {
                            section.remove("acceptedCAs");
                        }
                    }
                }
                let errors = validate(version, &checked);
                assert!(errors.is_empty(), "{version} {role:?} {phase:?}: {errors:?}");
                let machine = &v1alpha1(&documents)["machine"];
                let accepted: Vec<&str> = machine["acceptedCAs"]
                    .as_array()
                    .map(|list| list.iter().map(|ca| ca["crt"].as_str().unwrap()).collect())
                    .unwrap_or_default();
                let (os_ca, os_accepted) = match phase {
                    RotationPhase::Generated => (&old_os, vec![]),
                    RotationPhase::Accepting | RotationPhase::Switched => (&old_os, vec![b64(&new_os)]),
                    RotationPhase::Swapping => (&new_os, vec![b64(&old_os)]),
                    RotationPhase::Dropping => (&new_os, vec![]),
                };
                assert_eq!(machine["ca"]["crt"], b64(os_ca), "{version} {role:?} {phase:?}");
                assert_eq!(accepted, os_accepted, "{version} {role:?} {phase:?}");
                let (issuing, accepted) = kubernetes(&documents, version);
                let expected_issuer = match phase {
                    RotationPhase::Swapping | RotationPhase::Dropping => new_k8s.clone(),
                    _ => old_k8s.clone(),
                };
                if role == Role::ControlPlane || !multidoc(version) {
                    assert_eq!(
                        issuing.as_deref(),
                        Some(expected_issuer.as_str()),
                        "{version} {role:?} {phase:?}"
                    );
                } else {
                    assert!(
                        accepted.contains(&expected_issuer),
                        "{version} worker {phase:?} accepts its issuer"
                    );
                }
                let other = match phase {
                    RotationPhase::Accepting | RotationPhase::Switched => Some(&new_k8s),
                    RotationPhase::Swapping => Some(&old_k8s),
                    _ => None,
                };
                // Besides the issuer (which a worker's list names too),
                // exactly the other CA of the phase, or none.
                let besides: Vec<&String> = accepted.iter().filter(|ca| **ca != expected_issuer).collect();
                assert_eq!(besides, other.into_iter().collect::<Vec<_>>(), "{version} {role:?} {phase:?}");
            }
        }
        phases += 1;
        bundle.advance_rotation(Authority::Os).unwrap();
        bundle.advance_rotation(Authority::Kubernetes).unwrap();
    }
    assert_eq!(phases, 5);
    assert_eq!(bundle.os_ca().cert_pem(), new_os);
}

#[test]
fn clients_trust_both_cas_during_a_rotation_and_take_certificates_from_the_issuer_of_the_moment() {
    use cms_model::UserRole;
    let mut bundle: SecretsBundle = crate::bundle().clone();
    let old = bundle.os_ca().cert_pem().to_string();
    bundle.begin_rotation(Authority::Os).unwrap();
    let new = bundle.rotation(Authority::Os).unwrap().incoming().cert_pem().to_string();
    let decode = |text: &str| {
        String::from_utf8(base64::Engine::decode(&base64::engine::general_purpose::STANDARD, text).unwrap())
            .unwrap()
    };
    let mut seen = Vec::new();
    while let Some(phase) = bundle.rotation_phase(Authority::Os) {
        let config: Value = serde_saphyr::from_str(
            &cms_talos::talosconfig(
                &bundle,
                "demo",
                &[],
                &[],
                UserRole::Admin,
                std::time::Duration::from_secs(60),
            )
            .unwrap(),
        )
        .unwrap();
        let context = &config["contexts"]["demo"];
        let trusted = decode(context["ca"].as_str().unwrap());
        let cert = decode(context["crt"].as_str().unwrap());
        let from_new = crate::x509::signed_by(&cert, &new);
        assert_eq!(from_new, !crate::x509::signed_by(&cert, &old), "{phase:?}: from one CA or the other");
        seen.push((phase, trusted.contains(&old), trusted.contains(&new), from_new));
        bundle.advance_rotation(Authority::Os).unwrap();
    }
    use RotationPhase::*;
    assert_eq!(
        seen,
        [
            (Generated, true, false, false),
            (Accepting, true, true, false),
            (Switched, true, true, true),
            (Swapping, true, true, true),
            (Dropping, true, true, true),
        ]
    );
}

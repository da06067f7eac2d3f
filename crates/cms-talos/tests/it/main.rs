//! Integration tests of `cms-talos`: the bundle and its certificates, rendered
//! configs against the official Talos schemas, snapshots, and client configs
//! accepted by a real `kubectl`.
//!
//! The test binary generates one secrets bundle and shares it: the RSA-4096
//! service-account key takes a while in a debug build.

mod bundle;
mod clients;
mod kubectl;
mod patches;
mod render;
mod rotation;
mod schema;
mod snapshots;
mod x509;

use std::sync::OnceLock;

use cms_model::Role;
use cms_talos::{RenderInput, SecretsBundle};
use serde_json::Value;

/// The Talos versions whose configs are rendered and validated, one per minor.
pub(crate) const VERSIONS: [&str; 7] = ["1.8.4", "1.9.6", "1.10.9", "1.11.6", "1.12.11", "1.13.9", "1.14.0"];

/// The Kubernetes version of the test clusters.
pub(crate) const KUBERNETES: &str = "1.31.4";

/// The bundle every test of this binary shares.
pub(crate) fn bundle() -> &'static SecretsBundle {
    static BUNDLE: OnceLock<SecretsBundle> = OnceLock::new();
    BUNDLE.get_or_init(|| SecretsBundle::generate("1.9.6").expect("a bundle generates"))
}

/// A render input for a cluster `demo` with two control-plane addresses.
pub(crate) fn input(talos_version: &str, role: Role) -> RenderInput<'static> {
    RenderInput {
        cluster_name: "demo".into(),
        role,
        talos_version: talos_version.into(),
        kubernetes_version: KUBERNETES.into(),
        kubelet_version: None,
        control_plane_endpoint: None,
        control_plane_addresses: vec!["10.0.0.10".into(), "10.0.0.11".into()],
        pod_networks: vec![],
        service_networks: vec![],
        cert_sans: vec!["demo.example.com".into()],
        install_image: None,
        bundle: bundle(),
        patches: vec![],
    }
}

/// Whether a Talos version renders the multi-document form.
pub(crate) fn multidoc(talos_version: &str) -> bool {
    talos_version.starts_with("1.14.")
}

/// Every string in a JSON value, depth first.
pub(crate) fn strings(value: &Value) -> Vec<&str> {
    match value {
        Value::String(s) => vec![s.as_str()],
        Value::Array(items) => items.iter().flat_map(strings).collect(),
        Value::Object(map) => map.values().flat_map(strings).collect(),
        _ => vec![],
    }
}

/// The first document of `kind` (or the `v1alpha1` document for `None`).
pub(crate) fn document<'a>(documents: &'a [Value], kind: Option<&str>) -> Option<&'a Value> {
    documents.iter().find(|document| document.get("kind").and_then(Value::as_str) == kind)
}

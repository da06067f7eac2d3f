//! Talos interop for `cms`: pure functions, no IO beyond the sealing key file.
//!
//! - [`SecretsBundle`]: a tenant's cluster secrets, generated as talosctl does
//!   and exportable in its `secrets.yaml` form.
//! - [`Sealer`]: encryption at rest with key ids and rotation, bound to a
//!   tenant and a purpose, with a startup canary.
//! - [`render`]: the complete machine config of a control plane or a worker
//!   for Talos 1.8 to 1.14, with config patches applied ([`resolve_patches`],
//!   [`check_patch`]).
//! - [`kubeconfig`], [`talosconfig`]: client configurations whose
//!   certificates carry the caller's role; [`issue_server_cert`] and
//!   [`issue_client_cert`] for anything else that speaks TLS with a tenant CA.

mod bundle;
mod certs;
mod clients;
mod error;
mod keyfile;
mod keys;
mod patch;
mod random;
mod render;
mod rotation;
mod seal;
mod sealed_bundle;
mod secret_serde;
mod version;
mod yaml;

pub use bundle::SecretsBundle;
pub use certs::{CertificateAuthority, IssuedCertificate, issue_client_cert, issue_server_cert};
pub use clients::{
    KubeIdentity, kubeconfig, kubeconfig_for, kubernetes_identity, talos_client_cert, talos_role,
    talosconfig, trusted_pem,
};
pub use error::{Result, TalosError};
pub use keys::{EC_LABEL, ED25519_LABEL, KeyAlgorithm, RSA_LABEL, ServiceAccountKey};
pub use patch::{PatchResolution, ResolvedPatch, check_patch, resolve_patches};
pub use render::{
    KUBERNETES_API_PORT, RenderInput, VIEWERS_GROUP, VIEWERS_MANIFEST_NAME, config_yaml,
    control_plane_endpoint, endpoint_host, render, render_documents,
};
pub use rotation::{Authority, CaRotation, ConfigCas, RotationPhase};
pub use seal::{Sealer, SealingKey};
pub use sealed_bundle::BUNDLE_PURPOSE;
pub use version::{MAX_TALOS_MINOR, MIN_TALOS_MINOR, TalosVersion};
pub use yaml::to_yaml;

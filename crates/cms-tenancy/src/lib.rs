//! The application layer of `cms`: what a tenant operation means, with no
//! HTTP. It sits on the store, Talos interop and the node API client; the
//! HTTP API, the reconciler, the prober and other Rust tools call it.
//!
//! - [`Tenancy`]: the operations users make (create, replace and delete
//!   tenants, node groups and config patches) with the checks the API
//!   makes ([`Writable::check`]: `cms-model`'s rules, supported Talos
//!   versions, patches that apply; `user_data_limits.rs`: no cloud group's
//!   config over its cloud's user-data limit, [`ConfigChange`]), and the
//!   documents built from a tenant's secrets (kubeconfig, talosconfig, the
//!   bundle, machine configs).
//! - [`Secrets`]: each tenant's bundle, generated (with a pool of
//!   pre-generated service-account keys) and sealed on create, opened for
//!   the documents and the node API credentials.
//! - [`Rekeyer`]: online rotation of the sealing key: every replica follows
//!   the active key the store names, and one re-seals the stored blobs.
//! - `control_plane.rs`: the tenant's control-plane endpoint, set in its
//!   spec, made by the service ([`MADE_ENDPOINT_ANNOTATION`]) or derived
//!   from its first control plane's address.
//! - [`login_signing_key`] (`login_key.rs`): the login signing key, kept
//!   sealed in the store's settings; one an older version kept in the clear
//!   is replaced by a new one on start.
//! - [`autoscaler_ca`] (`autoscaler_ca.rs`): the service-wide CA, kept
//!   sealed in the store's settings, that issues each tenant's cluster
//!   autoscaler its client certificate ([`issue_autoscaler_identity`]) and
//!   the Secret that carries it ([`autoscaler_secret_yaml`]).
//! - The seams it implements for the other crates, each mocked under the
//!   `testsuite` feature: [`MachineConfigs`] ([`StoreMachineConfigs`]: the
//!   user data that cloud instances boot with), [`NodeClient`]
//!   ([`TenantNodeClient`]: the reconciler's node API calls),
//!   [`KubeClient`] ([`TenantKube`]: the reconciler's Kubernetes API calls,
//!   on `kube` with a short-lived admin certificate) and
//!   [`TenantCredentials`] ([`SealedCredentials`]: the prober's) and
//!   [`CaRotations`] ([`SealedRotations`]: the rotation of a tenant's CAs,
//!   begun by the API and carried on by the reconciler, `ca_rotation.rs`; the request that begins
//!   it, [`request_rotation`], `rotation_request.rs`).
//!
//! Failures are one typed [`TenancyError`]; the API maps it to statuses in
//! one place, and [`TenancyError::is_transient`] tells the reconciler what
//! to retry rather than report as a problem with the spec.
//!
//! Tenant status is written by the store (the `ConfigPatchesResolved`
//! condition, kept in each write's transaction) and by the reconciler;
//! nothing here writes it.

mod autoscaler_ca;
mod ca_rotation;
mod control_plane;
mod credentials;
mod documents;
mod error;
mod key_pool;
mod kube;
mod kube_client;
mod login_key;
mod nodes;
mod rekey;
mod render;
mod reservations;
mod resources;
mod rotation_request;
mod secrets;
mod tenancy;
mod user_data_limits;

#[cfg(any(test, feature = "testsuite"))]
pub use crate::kube::MockKubeClient;
pub use crate::kube::{Drain, KubeClient, KubeError, KubeEvent, KubeNode, KubeTaint, TenantKube, node_of};
pub use autoscaler_ca::{
    AUTOSCALER_CA_NAME, AUTOSCALER_CA_PURPOSE, AUTOSCALER_CA_SETTING, AUTOSCALER_CLOUD_CONFIG_KEY,
    AUTOSCALER_IDENTITY_TTL, AUTOSCALER_MOUNT_PATH, AUTOSCALER_ORGANIZATION_PREFIX, AUTOSCALER_SECRET_NAME,
    AUTOSCALER_SECRET_NAMESPACE, autoscaler_ca, autoscaler_cloud_config, autoscaler_organization,
    autoscaler_secret_yaml, issue_autoscaler_identity,
};
#[cfg(any(test, feature = "testsuite"))]
pub use ca_rotation::MockCaRotations;
pub use ca_rotation::{CaRotations, Rotation, SealedRotations, authority_name, phase_name, rotation_of};
pub use cms_nodeapi::{EtcdMember, EtcdMemberStatus, LogsRequest, ServiceInfo, UploadStream};
pub use cms_talos::{Authority, RotationPhase};
pub use control_plane::{MADE_ENDPOINT_ANNOTATION, set_endpoint};
#[cfg(any(test, feature = "testsuite"))]
pub use credentials::MockTenantCredentials;
pub use credentials::{SealedCredentials, TenantCredentials};
pub use error::TenancyError;
pub use login_key::{
    LOGIN_KEY_PURPOSE, LOGIN_KEY_SETTING, is_clear_login_key, login_signing_key, replace_clear_login_key,
};
#[cfg(any(test, feature = "testsuite"))]
pub use nodes::MockNodeClient;
pub use nodes::{
    Bootstrapped, LogChunks, NodeClient, NodeError, NodeRef, SnapshotChunks, TenantNodeClient, machine_node,
    talos_node_api,
};
pub use rekey::{
    ACTIVE_KEY_SETTING, CANARY_SETTING, Census, Pass, REKEY_LEASE, RESEALED_COUNTER, RekeyLease,
    RekeyOptions, Rekeyer, SEALED_BLOBS_GAUGE, census, follow_active_key,
};
#[cfg(any(test, feature = "testsuite"))]
pub use render::MockMachineConfigs;
pub use render::{KubernetesVersions, MachineConfigs, StoreMachineConfigs};
pub use resources::{
    KUBERNETES_VERSION_ANNOTATION, REMOVABLE_ANNOTATIONS, SERVICE_ANNOTATION_PREFIX, Writable,
    service_annotations,
};
pub use rotation_request::{AUTHORITY_NAMES, authorities_named, request_rotation};
pub use secrets::{CERTIFICATE_EXPIRY_GAUGE, Secrets, SecretsOptions};
pub use tenancy::{DEFAULT_MAX_GROUP_COUNT, Tenancy, find};
pub use user_data_limits::{ConfigChange, STAND_IN_ENDPOINT, user_data_size};

//! Client configurations: kubeconfig and talosconfig, with role-bound certificates.
//!
//! | cms role | kubeconfig user | Kubernetes group (O) | Talos role (O) |
//! |---|---|---|---|
//! | admin | `admin` | `system:masters` | `os:admin` |
//! | edit | `editor` | `system:masters` | `os:operator` |
//! | view | `viewer` | `cms:viewers` | `os:reader` |

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cms_model::UserRole;
use secrecy::ExposeSecret;
use serde_json::json;

use crate::bundle::SecretsBundle;
use crate::certs::{IssuedCertificate, issue_client_cert};
use crate::error::{Result, TalosError};
use crate::render::VIEWERS_GROUP;
use crate::rotation::Authority;
use crate::yaml;

/// The Kubernetes user name (the certificate's CN) and group (its O) of a role.
pub fn kubernetes_identity(role: UserRole) -> (&'static str, &'static str) {
    match role {
        UserRole::Admin => ("admin", "system:masters"),
        UserRole::Edit => ("editor", "system:masters"),
        UserRole::View => ("viewer", VIEWERS_GROUP),
    }
}

/// The Talos API role (the certificate's O) of a role.
pub fn talos_role(role: UserRole) -> &'static str {
    match role {
        UserRole::Admin => "os:admin",
        UserRole::Edit => "os:operator",
        UserRole::View => "os:reader",
    }
}

/// Who a kubeconfig's client certificate names: by default the role's user
/// and group; a user from an identity provider by its own name (CN), with
/// its groups in O beside the role's group, so that the cluster's RBAC can
/// bind them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KubeIdentity<'a> {
    pub role: UserRole,
    /// The certificate's CN instead of the role's user name.
    pub name: Option<&'a str>,
    /// More groups (O), such as `oidc:platform`.
    pub groups: &'a [String],
}

impl KubeIdentity<'_> {
    /// The role's user and group alone.
    pub fn of_role(role: UserRole) -> KubeIdentity<'static> {
        KubeIdentity { role, name: None, groups: &[] }
    }
}

/// A kubeconfig for `role` on the cluster at `server_endpoint`
/// (`https://HOST:6443`), with a client certificate from the Kubernetes CA
/// that lives `ttl`. The user and the context are both `<user>@<cluster>`.
pub fn kubeconfig(
    bundle: &SecretsBundle,
    cluster_name: &str,
    server_endpoint: &str,
    role: UserRole,
    ttl: Duration,
) -> Result<String> {
    kubeconfig_for(bundle, cluster_name, server_endpoint, &KubeIdentity::of_role(role), ttl)
}

/// A kubeconfig as [`kubeconfig`], for `identity`.
pub fn kubeconfig_for(
    bundle: &SecretsBundle,
    cluster_name: &str,
    server_endpoint: &str,
    identity: &KubeIdentity<'_>,
    ttl: Duration,
) -> Result<String> {
    if cluster_name.is_empty() || !server_endpoint.starts_with("https://") {
        return Err(TalosError::InvalidInput(format!(
            "a kubeconfig needs a cluster name and an https:// server, got {cluster_name:?} and {server_endpoint:?}"
        )));
    }
    let (role_user, group) = kubernetes_identity(identity.role);
    let user = identity.name.unwrap_or(role_user);
    let mut groups = vec![group];
    groups.extend(identity.groups.iter().map(String::as_str));
    let cert = issue_client_cert(bundle.issuer(Authority::Kubernetes), Some(user), &groups, ttl)?;
    let context = format!("{user}@{cluster_name}");
    yaml::to_yaml(&json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": cluster_name,
            "cluster": {
                "server": server_endpoint,
                "certificate-authority-data": b64(&trusted_pem(bundle, Authority::Kubernetes)),
            },
        }],
        "users": [{
            "name": context,
            "user": {
                "client-certificate-data": b64(&cert.cert_pem),
                "client-key-data": b64(cert.key_pem.expose_secret()),
            },
        }],
        "contexts": [{
            "name": context,
            "context": {"cluster": cluster_name, "namespace": "default", "user": context},
        }],
        "current-context": context,
        "preferences": {},
    }))
}

/// A client certificate for the Talos API (apid): signed by the OS CA, no CN,
/// the role's Talos role in O, ClientAuth, an Ed25519 key.
pub fn talos_client_cert(bundle: &SecretsBundle, role: UserRole, ttl: Duration) -> Result<IssuedCertificate> {
    issue_client_cert(bundle.issuer(Authority::Os), None, &[talos_role(role)], ttl)
}

/// The CAs of `authority` a client trusts, one PEM text: both while a
/// rotation has nodes serve from either.
pub fn trusted_pem(bundle: &SecretsBundle, authority: Authority) -> String {
    bundle.trusted(authority).iter().map(|ca| ca.cert_pem()).collect()
}

/// A talosconfig with one context named `context` for `role`.
pub fn talosconfig(
    bundle: &SecretsBundle,
    context: &str,
    endpoints: &[String],
    nodes: &[String],
    role: UserRole,
    ttl: Duration,
) -> Result<String> {
    if context.is_empty() {
        return Err(TalosError::InvalidInput("a talosconfig context needs a name".into()));
    }
    let cert = talos_client_cert(bundle, role, ttl)?;
    yaml::to_yaml(&json!({
        "context": context,
        "contexts": {
            context: {
                "endpoints": endpoints,
                "nodes": nodes,
                "ca": b64(&trusted_pem(bundle, Authority::Os)),
                "crt": b64(&cert.cert_pem),
                "key": b64(cert.key_pem.expose_secret()),
            },
        },
    }))
}

fn b64(text: &str) -> String {
    STANDARD.encode(text.as_bytes())
}

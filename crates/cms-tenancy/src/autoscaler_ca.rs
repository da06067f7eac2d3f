//! The autoscaler's identity: a service-wide CA (the "autoscaler CA") that
//! issues each tenant's cluster autoscaler a client certificate for the
//! service's `externalgrpc` port.
//!
//! The CA is kept in the store's settings sealed like every other secret:
//! the setting [`AUTOSCALER_CA_SETTING`] holds, as base64, the CA (JSON)
//! sealed for no tenant and the purpose [`AUTOSCALER_CA_PURPOSE`]. It is
//! generated on the first start and opened on every start after; replicas
//! starting together agree on one. The [`Rekeyer`](crate::Rekeyer)
//! re-seals it when the sealing key rotates, and [`census`](crate::census)
//! counts it.
//!
//! An identity ([`issue_autoscaler_identity`]) is a P-256 client
//! certificate (ExtendedKeyUsage ClientAuth, 365 days) whose subject is
//! CN = the tenant's name and one O =
//! [`AUTOSCALER_ORGANIZATION_PREFIX`] followed by the tenant's
//! `metadata.createdAt` in Unix milliseconds, so that a certificate of a
//! deleted tenant never names a new tenant of the same name. The gRPC
//! server reads the identity back in exactly this form.
//! [`autoscaler_secret_yaml`] wraps a fresh identity in the Kubernetes
//! Secret the tenant's autoscaler mounts.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cms_model::Tenant;
use cms_store::{Accounts, Sealed};
use cms_talos::{CertificateAuthority, IssuedCertificate, Sealer, TalosError};
use secrecy::ExposeSecret;
use serde_json::json;

use crate::error::TenancyError;

/// The setting that holds the autoscaler CA, sealed, as base64.
pub const AUTOSCALER_CA_SETTING: &str = "autoscaler-ca";
/// The purpose the autoscaler CA is sealed for.
pub const AUTOSCALER_CA_PURPOSE: &str = "cms:autoscaler-ca";
/// What an autoscaler identity's one O attribute starts with; the tenant's
/// creation time in Unix milliseconds follows.
pub const AUTOSCALER_ORGANIZATION_PREFIX: &str = "cms:autoscaler:";
/// The common name of the autoscaler CA's certificate.
pub const AUTOSCALER_CA_NAME: &str = "cms autoscaler CA";
/// How long an autoscaler identity is valid.
pub const AUTOSCALER_IDENTITY_TTL: Duration = Duration::from_secs(365 * 24 * 3600);

/// The Secret the tenant's autoscaler mounts: its namespace and name.
pub const AUTOSCALER_SECRET_NAMESPACE: &str = "kube-system";
pub const AUTOSCALER_SECRET_NAME: &str = "cms-autoscaler";
/// Where the autoscaler's Deployment mounts the Secret.
pub const AUTOSCALER_MOUNT_PATH: &str = "/etc/cms-autoscaler";
/// The Secret's key that holds the `externalgrpc` cloud config.
pub const AUTOSCALER_CLOUD_CONFIG_KEY: &str = "cloud-config";

/// The autoscaler CA kept in `store`: generated and stored sealed on the
/// first start, opened on the next ones. Replicas that start together
/// agree on the one stored first.
pub async fn autoscaler_ca(
    store: &(impl Accounts + Sealed),
    sealer: &Sealer,
) -> Result<CertificateAuthority, TenancyError> {
    let fresh = CertificateAuthority::generate_p256(AUTOSCALER_CA_NAME)?;
    let sealed = seal(sealer, &fresh)?;
    let stored =
        Accounts::setting_or_insert(store, AUTOSCALER_CA_SETTING.to_string(), sealed.clone()).await?;
    if stored == sealed {
        tracing::info!("generated the autoscaler CA; the store keeps it sealed");
        return Ok(fresh);
    }
    open(sealer, &stored)
}

/// `sealed` (an autoscaler CA blob) sealed again with the active key, or
/// `None` when the active key sealed it already.
pub(crate) fn reseal(sealer: &Sealer, sealed: &[u8]) -> Result<Option<Vec<u8>>, TalosError> {
    sealer.reseal("", AUTOSCALER_CA_PURPOSE, sealed)
}

/// The O attribute of `tenant`'s autoscaler identity.
pub fn autoscaler_organization(tenant: &Tenant) -> Result<String, TenancyError> {
    let created = tenant.metadata.created_at.ok_or_else(|| {
        TenancyError::NotReady(format!("tenant {:?} has no creation time yet", tenant.metadata.name))
    })?;
    Ok(format!("{AUTOSCALER_ORGANIZATION_PREFIX}{}", created.timestamp_millis()))
}

/// A fresh client certificate for `tenant`'s cluster autoscaler, issued by
/// the autoscaler CA `ca`: CN the tenant's name, one O
/// ([`autoscaler_organization`]), ClientAuth, valid 365 days.
pub fn issue_autoscaler_identity(
    ca: &CertificateAuthority,
    tenant: &Tenant,
) -> Result<IssuedCertificate, TenancyError> {
    let organization = autoscaler_organization(tenant)?;
    let name = tenant.metadata.name.as_str();
    Ok(cms_talos::issue_client_cert(ca, Some(name), &[organization.as_str()], AUTOSCALER_IDENTITY_TTL)?)
}

/// The `externalgrpc` cloud config: the service at `address` (`host:port`),
/// over the files the Secret holds.
pub fn autoscaler_cloud_config(address: &str) -> Result<String, TenancyError> {
    if address.is_empty() || address.len() > 300 || address.chars().any(|c| c.is_control() || c == ' ') {
        return Err(TenancyError::NotReady("the autoscaler address is not a host:port".into()));
    }
    // A JSON string is a YAML double-quoted scalar: the address stays text.
    let quoted = serde_json::to_string(address).map_err(TenancyError::corrupt("the autoscaler address"))?;
    Ok(format!(
        "address: {quoted}\nkey: {AUTOSCALER_MOUNT_PATH}/tls.key\ncert: {AUTOSCALER_MOUNT_PATH}/tls.crt\n\
         cacert: {AUTOSCALER_MOUNT_PATH}/ca.crt\ngrpc_timeout: 10s\n"
    ))
}

/// The Kubernetes Secret (`kube-system/cms-autoscaler`) that `tenant`'s
/// cluster autoscaler mounts, as YAML: the cloud config for `address`, the
/// CA certificate and a freshly issued identity. Every call issues a new
/// certificate; earlier ones stay valid until they expire.
pub fn autoscaler_secret_yaml(
    ca: &CertificateAuthority,
    tenant: &Tenant,
    address: &str,
) -> Result<String, TenancyError> {
    let cloud_config = autoscaler_cloud_config(address)?;
    let identity = issue_autoscaler_identity(ca, tenant)?;
    let secret = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": AUTOSCALER_SECRET_NAME,
            "namespace": AUTOSCALER_SECRET_NAMESPACE,
            "labels": {"app.kubernetes.io/name": "cms-autoscaler"},
        },
        "type": "Opaque",
        "stringData": {
            AUTOSCALER_CLOUD_CONFIG_KEY: cloud_config,
            "ca.crt": ca.cert_pem(),
            "tls.crt": identity.cert_pem,
            "tls.key": identity.key_pem.expose_secret(),
        },
    });
    Ok(cms_talos::to_yaml(&secret)?)
}

fn seal(sealer: &Sealer, ca: &CertificateAuthority) -> Result<String, TenancyError> {
    let json = serde_json::to_vec(ca).map_err(TenancyError::corrupt("the autoscaler CA"))?;
    Ok(STANDARD.encode(sealer.seal("", AUTOSCALER_CA_PURPOSE, &json)?))
}

fn open(sealer: &Sealer, stored: &str) -> Result<CertificateAuthority, TenancyError> {
    let sealed = STANDARD
        .decode(stored.trim())
        .map_err(|_| TalosError::Corrupt("the stored autoscaler CA is not base64"))?;
    let json = secrecy::SecretSlice::from(sealer.open("", AUTOSCALER_CA_PURPOSE, &sealed)?);
    let ca: CertificateAuthority =
        serde_json::from_slice(json.expose_secret()).map_err(TenancyError::corrupt("the autoscaler CA"))?;
    Ok(CertificateAuthority::from_pem(ca.cert_pem().to_string(), ca.key_pem().clone())?)
}

#[cfg(test)]
mod tests;

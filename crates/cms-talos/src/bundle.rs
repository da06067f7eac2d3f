//! The Talos secrets bundle of a tenant, as `talosctl gen secrets` makes it.

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::certs::{CaSubject, CertificateAuthority};
use crate::error::Result;
use crate::keys::{KeyAlgorithm, ServiceAccountKey};
use crate::version::TalosVersion;
use crate::{random, yaml};

/// Every secret of one Talos cluster: cluster identity, tokens, the secretbox
/// key, four certificate authorities and the service-account key.
///
/// It serializes to JSON for storage (seal it first: see [`crate::Sealer`]),
/// and its `Debug` shows no secret.
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretsBundle {
    talos_version: String,
    cluster_id: String,
    #[serde(with = "crate::secret_serde")]
    cluster_secret: SecretString,
    #[serde(with = "crate::secret_serde")]
    bootstrap_token: SecretString,
    #[serde(with = "crate::secret_serde")]
    secretbox_encryption_secret: SecretString,
    #[serde(with = "crate::secret_serde")]
    trustd_token: SecretString,
    etcd_ca: CertificateAuthority,
    kubernetes_ca: CertificateAuthority,
    aggregator_ca: CertificateAuthority,
    os_ca: CertificateAuthority,
    #[serde(with = "crate::secret_serde")]
    service_account_key: SecretString,
    /// The CA rotations under way (`rotation.rs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    rotations: Vec<crate::rotation::CaRotation>,
}

impl fmt::Debug for SecretsBundle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretsBundle").field("talos_version", &self.talos_version).finish_non_exhaustive()
    }
}

impl SecretsBundle {
    /// Generates a bundle for a cluster that starts at `talos_version`.
    ///
    /// The cluster id is encoded for that version (URL-safe base64 up to 1.13,
    /// standard base64 from 1.14) and then kept as is: nodes that join after an
    /// upgrade must carry the same id string as the first ones.
    pub fn generate(talos_version: &str) -> Result<SecretsBundle> {
        TalosVersion::supported(talos_version)?;
        SecretsBundle::generate_with_key(talos_version, ServiceAccountKey::generate()?)
    }

    /// Like [`SecretsBundle::generate`], with a service-account key made
    /// earlier: everything else takes milliseconds.
    pub fn generate_with_key(talos_version: &str, key: ServiceAccountKey) -> Result<SecretsBundle> {
        let version = TalosVersion::supported(talos_version)?;
        let cluster_id = encode_cluster_id(version, &random::bytes::<32>()?);
        let secret = |bytes: [u8; 32]| SecretString::from(STANDARD.encode(bytes));
        let ca = |algorithm, organization, common_name| {
            CertificateAuthority::generate(algorithm, CaSubject { organization, common_name })
        };
        Ok(SecretsBundle {
            talos_version: version.to_string(),
            cluster_id,
            cluster_secret: secret(random::bytes()?),
            bootstrap_token: SecretString::from(random::token()?),
            secretbox_encryption_secret: secret(random::bytes()?),
            trustd_token: SecretString::from(random::token()?),
            etcd_ca: ca(KeyAlgorithm::EcdsaP256, Some("etcd"), None)?,
            kubernetes_ca: ca(KeyAlgorithm::EcdsaP256, Some("kubernetes"), None)?,
            aggregator_ca: ca(KeyAlgorithm::EcdsaP256, None, Some("front-proxy"))?,
            os_ca: ca(KeyAlgorithm::Ed25519, Some("talos"), None)?,
            service_account_key: key.into_pem(),
            rotations: Vec::new(),
        })
    }

    /// The Talos version the bundle was generated for.
    pub fn talos_version(&self) -> &str {
        &self.talos_version
    }

    /// `cluster.id`: 32 random bytes, base64 as described in [`SecretsBundle::generate`].
    pub fn cluster_id(&self) -> &str {
        &self.cluster_id
    }

    /// `cluster.secret`: 32 random bytes, standard base64.
    pub fn cluster_secret(&self) -> &SecretString {
        &self.cluster_secret
    }

    /// The Kubernetes bootstrap token, `[0-9a-z]{6}.[0-9a-z]{16}`.
    pub fn bootstrap_token(&self) -> &SecretString {
        &self.bootstrap_token
    }

    /// The secretbox key that encrypts Kubernetes secrets in etcd: base64 of 32 bytes.
    pub fn secretbox_encryption_secret(&self) -> &SecretString {
        &self.secretbox_encryption_secret
    }

    /// The trustd token with which machines join the OS PKI, `[0-9a-z]{6}.[0-9a-z]{16}`.
    pub fn trustd_token(&self) -> &SecretString {
        &self.trustd_token
    }

    /// The etcd CA: ECDSA P-256, O=etcd.
    pub fn etcd_ca(&self) -> &CertificateAuthority {
        &self.etcd_ca
    }

    /// The Kubernetes CA: ECDSA P-256, O=kubernetes.
    pub fn kubernetes_ca(&self) -> &CertificateAuthority {
        &self.kubernetes_ca
    }

    /// The front-proxy (aggregation layer) CA: ECDSA P-256, CN=front-proxy.
    pub fn aggregator_ca(&self) -> &CertificateAuthority {
        &self.aggregator_ca
    }

    /// The Talos OS CA that signs apid and client certificates: Ed25519, O=talos.
    pub fn os_ca(&self) -> &CertificateAuthority {
        &self.os_ca
    }

    pub(crate) fn rotations(&self) -> &[crate::rotation::CaRotation] {
        &self.rotations
    }

    pub(crate) fn rotations_mut(&mut self) -> &mut Vec<crate::rotation::CaRotation> {
        &mut self.rotations
    }

    /// The CA of `authority`, to replace at the end of its rotation.
    pub(crate) fn current_mut(&mut self, authority: crate::rotation::Authority) -> &mut CertificateAuthority {
        match authority {
            crate::rotation::Authority::Os => &mut self.os_ca,
            crate::rotation::Authority::Kubernetes => &mut self.kubernetes_ca,
        }
    }

    /// The earliest expiry (Unix seconds) among the bundle's CAs.
    pub fn earliest_ca_expiry(&self) -> Result<i64> {
        let cas = [self.os_ca(), self.kubernetes_ca(), self.aggregator_ca(), self.etcd_ca()];
        cas.into_iter()
            .map(CertificateAuthority::not_after)
            .try_fold(i64::MAX, |earliest, at| Ok(earliest.min(at?)))
    }

    /// The service-account signing key: RSA-4096, PKCS#1 PEM.
    pub fn service_account_key(&self) -> &SecretString {
        &self.service_account_key
    }

    /// The bundle as `talosctl gen secrets` writes `secrets.yaml`: certificate
    /// and key values are base64 of their PEM text.
    pub fn to_secrets_yaml(&self) -> Result<String> {
        yaml::to_yaml(&self.to_secrets_value())
    }

    fn to_secrets_value(&self) -> Value {
        let b64 = |text: &str| STANDARD.encode(text.as_bytes());
        let pair = |ca: &CertificateAuthority| json!({"crt": b64(ca.cert_pem()), "key": b64(ca.key_pem().expose_secret())});
        json!({
            "cluster": {"id": self.cluster_id, "secret": self.cluster_secret.expose_secret()},
            "secrets": {
                "bootstraptoken": self.bootstrap_token.expose_secret(),
                "secretboxencryptionsecret": self.secretbox_encryption_secret.expose_secret(),
            },
            "trustdinfo": {"token": self.trustd_token.expose_secret()},
            "certs": {
                "etcd": pair(&self.etcd_ca),
                // During a rotation, the CAs the service issues from.
                "k8s": pair(self.issuer(crate::rotation::Authority::Kubernetes)),
                "k8saggregator": pair(&self.aggregator_ca),
                "k8sserviceaccount": {"key": b64(self.service_account_key.expose_secret())},
                "os": pair(self.issuer(crate::rotation::Authority::Os)),
            },
        })
    }
}

/// `cluster.id` as talosctl encodes it for `version`.
fn encode_cluster_id(version: TalosVersion, id: &[u8; 32]) -> String {
    if version.standard_cluster_id() { STANDARD.encode(id) } else { URL_SAFE.encode(id) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_ids_are_url_safe_up_to_1_13_and_standard_from_1_14() {
        let id = [0xfb; 32];
        let old = encode_cluster_id(TalosVersion::parse("1.13.4").unwrap(), &id);
        let new = encode_cluster_id(TalosVersion::parse("1.14.0").unwrap(), &id);
        assert_eq!(old.len(), 44);
        assert!(old.contains('-') || old.contains('_'), "{old}");
        assert!(!old.contains('+') && !old.contains('/'), "{old}");
        assert!(new.contains('+') || new.contains('/'), "{new}");
        assert_eq!(URL_SAFE.decode(&old).unwrap(), STANDARD.decode(&new).unwrap());
    }
}

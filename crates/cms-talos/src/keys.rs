//! Private keys in the encodings talosctl writes.
//!
//! - Ed25519: PKCS#8 under the PEM label `ED25519 PRIVATE KEY`.
//! - ECDSA P-256: SEC1 under `EC PRIVATE KEY`.
//! - RSA (the service-account key): PKCS#1 under `RSA PRIVATE KEY`.

use p256::pkcs8::{DecodePrivateKey, EncodePrivateKey};
use rcgen::{KeyPair, PKCS_ECDSA_P256_SHA256, PKCS_ED25519};
use secrecy::{ExposeSecret, SecretString};

use crate::error::{Result, TalosError};
use crate::random;

/// The PEM label of an Ed25519 key, as Talos writes it.
pub const ED25519_LABEL: &str = "ED25519 PRIVATE KEY";
/// The PEM label of a SEC1 elliptic-curve key.
pub const EC_LABEL: &str = "EC PRIVATE KEY";
/// The PEM label of a PKCS#1 RSA key.
pub const RSA_LABEL: &str = "RSA PRIVATE KEY";

/// The key algorithm of a certificate authority, which its leaf keys follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyAlgorithm {
    Ed25519,
    EcdsaP256,
}

/// The DER prefix of a PKCS#8 v1 Ed25519 private key (RFC 8410), before the
/// 32-byte seed: what Go's `x509.MarshalPKCS8PrivateKey` writes.
const ED25519_PKCS8_PREFIX: [u8; 16] =
    [0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20];

/// A freshly generated key: the signing handle and its PEM text.
pub(crate) struct GeneratedKey {
    pub(crate) pair: KeyPair,
    pub(crate) pem: SecretString,
}

/// Generates a key of `algorithm` in talosctl's encoding.
pub(crate) fn generate(algorithm: KeyAlgorithm) -> Result<GeneratedKey> {
    match algorithm {
        KeyAlgorithm::Ed25519 => {
            let seed = random::bytes::<32>()?;
            let mut der = ED25519_PKCS8_PREFIX.to_vec();
            der.extend_from_slice(&seed);
            let pair = KeyPair::from_pkcs8_der_and_sign_algo(&der.as_slice().into(), &PKCS_ED25519)
                .map_err(TalosError::crypto)?;
            Ok(GeneratedKey { pair, pem: pem_text(ED25519_LABEL, der) })
        }
        KeyAlgorithm::EcdsaP256 => {
            let pair = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(TalosError::crypto)?;
            let secret =
                p256::SecretKey::from_pkcs8_der(pair.serialized_der()).map_err(TalosError::crypto)?;
            Ok(GeneratedKey { pair, pem: pem_text(EC_LABEL, sec1_der(&secret)?) })
        }
    }
}

/// SEC1 `ECPrivateKey` with the named curve and the public key, as Go's
/// `x509.MarshalECPrivateKey` writes it. (Go's parser needs the curve, which
/// `p256`'s own SEC1 encoder leaves out.)
fn sec1_der(secret: &p256::SecretKey) -> Result<Vec<u8>> {
    use p256::elliptic_curve::sec1::ToEncodedPoint;
    use sec1::der::Encode;
    let private_key = secret.to_bytes();
    let public_key = secret.public_key().to_encoded_point(false);
    let structure = sec1::EcPrivateKey {
        private_key: &private_key,
        parameters: Some(sec1::EcParameters::NamedCurve(P256_OID)),
        public_key: Some(public_key.as_bytes()),
    };
    structure.to_der().map_err(TalosError::crypto)
}

/// The object identifier of the P-256 curve (prime256v1).
const P256_OID: sec1::der::asn1::ObjectIdentifier =
    sec1::der::asn1::ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7");

/// Loads a key written by [`generate`] (or a plain PKCS#8 `PRIVATE KEY`).
pub(crate) fn load(pem: &SecretString) -> Result<(KeyPair, KeyAlgorithm)> {
    let parsed = pem::parse(pem.expose_secret()).map_err(TalosError::crypto)?;
    match parsed.tag() {
        EC_LABEL => {
            let secret = p256::SecretKey::from_sec1_der(parsed.contents()).map_err(TalosError::crypto)?;
            let pkcs8 = secret.to_pkcs8_der().map_err(TalosError::crypto)?;
            let pair =
                KeyPair::from_pkcs8_der_and_sign_algo(&pkcs8.as_bytes().into(), &PKCS_ECDSA_P256_SHA256)
                    .map_err(TalosError::crypto)?;
            Ok((pair, KeyAlgorithm::EcdsaP256))
        }
        ED25519_LABEL | "PRIVATE KEY" => {
            let pair = KeyPair::try_from(parsed.contents()).map_err(TalosError::crypto)?;
            let algorithm = if pair.algorithm() == &PKCS_ED25519 {
                KeyAlgorithm::Ed25519
            } else if pair.algorithm() == &PKCS_ECDSA_P256_SHA256 {
                KeyAlgorithm::EcdsaP256
            } else {
                return Err(TalosError::Crypto("only Ed25519 and P-256 CA keys are supported".into()));
            };
            Ok((pair, algorithm))
        }
        other => Err(TalosError::Crypto(format!("unexpected private key label {other:?}"))),
    }
}

/// The service-account signing key: RSA-4096 as PKCS#1 PEM.
///
/// Generating one is the slow part of a bundle (about 0.1 to 1 s, and more
/// under load), so it is a value of its own: a service can generate keys
/// ahead of time, off its request path, and hand one to
/// [`crate::SecretsBundle::generate_with_key`].
pub struct ServiceAccountKey(SecretString);

impl std::fmt::Debug for ServiceAccountKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServiceAccountKey(<redacted>)")
    }
}

impl ServiceAccountKey {
    /// A key from its PKCS#1 PEM (`RSA PRIVATE KEY`), such as one taken from
    /// an existing `secrets.yaml`.
    pub fn from_pem(pem: SecretString) -> Result<ServiceAccountKey> {
        let parsed = pem::parse(pem.expose_secret()).map_err(|err| TalosError::Crypto(err.to_string()))?;
        if parsed.tag() != RSA_LABEL {
            return Err(TalosError::Crypto(format!("expected a {RSA_LABEL} PEM, got {}", parsed.tag())));
        }
        Ok(ServiceAccountKey(pem))
    }

    /// The key as PKCS#1 PEM.
    pub fn pem(&self) -> &SecretString {
        &self.0
    }

    /// Generates a fresh RSA-4096 key with AWS-LC, which is several times
    /// faster at it than the pure-Rust `rsa` crate. AWS-LC writes PKCS#8;
    /// the PKCS#1 `RSAPrivateKey` that talosctl writes is the PKCS#8
    /// structure's inner key, taken out without re-encoding.
    pub fn generate() -> Result<ServiceAccountKey> {
        use aws_lc_rs::encoding::{AsDer, Pkcs8V1Der};
        let pair = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa4096)
            .map_err(|_| TalosError::Crypto("RSA key generation failed".into()))?;
        let pkcs8: Pkcs8V1Der<'static> =
            pair.as_der().map_err(|_| TalosError::Crypto("RSA key encoding failed".into()))?;
        let info = pkcs8::PrivateKeyInfo::try_from(pkcs8.as_ref()).map_err(TalosError::crypto)?;
        if info.algorithm.oid != RSA_ENCRYPTION {
            return Err(TalosError::Crypto("the generated key is not an RSA key".into()));
        }
        Ok(ServiceAccountKey(pem_text(RSA_LABEL, info.private_key.to_vec())))
    }

    /// The key as PKCS#1 PEM (`RSA PRIVATE KEY`).
    pub(crate) fn into_pem(self) -> SecretString {
        self.0
    }
}

/// The object identifier of `rsaEncryption` (RFC 8017).
const RSA_ENCRYPTION: pkcs8::ObjectIdentifier = pkcs8::ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");

/// PEM text with `\n` line endings and 64-column lines, as Go's encoder writes.
pub(crate) fn pem_text(label: &str, der: Vec<u8>) -> SecretString {
    let config = pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF);
    SecretString::from(pem::encode_config(&pem::Pem::new(label, der), config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_through_their_labels() {
        for algorithm in [KeyAlgorithm::Ed25519, KeyAlgorithm::EcdsaP256] {
            let key = generate(algorithm).unwrap();
            let label = if algorithm == KeyAlgorithm::Ed25519 { ED25519_LABEL } else { EC_LABEL };
            assert!(key.pem.expose_secret().starts_with(&format!("-----BEGIN {label}-----\n")));
            let (loaded, loaded_algorithm) = load(&key.pem).unwrap();
            assert_eq!(loaded_algorithm, algorithm);
            assert_eq!(loaded.public_key_raw(), key.pair.public_key_raw());
        }
    }

    #[test]
    fn ed25519_keys_are_pkcs8_v1() {
        let key = generate(KeyAlgorithm::Ed25519).unwrap();
        let der = pem::parse(key.pem.expose_secret()).unwrap();
        assert_eq!(der.contents().len(), 48);
        assert_eq!(der.contents()[..16], ED25519_PKCS8_PREFIX);
    }

    #[test]
    fn ec_keys_name_their_curve() {
        use sec1::der::Decode;
        let key = generate(KeyAlgorithm::EcdsaP256).unwrap();
        let der = pem::parse(key.pem.expose_secret()).unwrap();
        let parsed = sec1::EcPrivateKey::from_der(der.contents()).unwrap();
        assert_eq!(parsed.parameters, Some(sec1::EcParameters::NamedCurve(P256_OID)));
        assert!(parsed.public_key.is_some());
    }

    #[test]
    fn unknown_labels_are_refused() {
        let pem = SecretString::from("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
        assert!(load(&pem).is_err());
    }
}

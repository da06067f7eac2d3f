//! Certificate authorities and the leaf certificates they issue.
//!
//! CAs follow talosctl: self-signed, IsCA, CertSign and DigitalSignature,
//! ServerAuth plus ClientAuth, ten years. A leaf's key type follows its CA
//! (Ed25519 under the OS CA, P-256 under the others), and a leaf starts ten
//! seconds in the past so that a slightly slow clock still accepts it.

use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, KeyUsagePurpose, SanType, SerialNumber,
};
use secrecy::SecretString;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::error::{Result, TalosError};
use crate::keys::{self, KeyAlgorithm};
use crate::random;

mod names;

/// How long a CA lives: 87600 hours, as talosctl.
const CA_LIFETIME: Duration = Duration::from_secs(87_600 * 3600);
/// How far in the past a leaf certificate starts.
const LEAF_BACKDATE: Duration = Duration::from_secs(10);

/// A certificate authority: its certificate and private key, both PEM.
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CertificateAuthority {
    cert_pem: String,
    #[serde(with = "crate::secret_serde")]
    key_pem: SecretString,
}

impl fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertificateAuthority").field("key_pem", &"[redacted]").finish_non_exhaustive()
    }
}

/// A certificate issued by a [`CertificateAuthority`], with its private key.
#[derive(Clone)]
pub struct IssuedCertificate {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// The private key, PEM, in the encoding of the CA's key type.
    pub key_pem: SecretString,
}

impl fmt::Debug for IssuedCertificate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IssuedCertificate").field("key_pem", &"[redacted]").finish_non_exhaustive()
    }
}

/// The subject of a CA: an organization, a common name, or both.
pub(crate) struct CaSubject<'a> {
    pub(crate) organization: Option<&'a str>,
    pub(crate) common_name: Option<&'a str>,
}

impl CertificateAuthority {
    /// Generates a self-signed CA in talosctl's shape.
    pub(crate) fn generate(algorithm: KeyAlgorithm, subject: CaSubject<'_>) -> Result<CertificateAuthority> {
        let key = keys::generate(algorithm)?;
        let now = OffsetDateTime::now_utc();
        let mut params = CertificateParams::default();
        params.distinguished_name = name(subject.common_name, subject.organization.into_iter());
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages =
            vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        params.not_before = now;
        params.not_after = now + CA_LIFETIME;
        params.serial_number = Some(serial()?);
        let cert = params.self_signed(&key.pair).map_err(TalosError::crypto)?;
        Ok(CertificateAuthority { cert_pem: cert.pem(), key_pem: key.pem })
    }

    /// Generates a self-signed ECDSA P-256 CA whose subject is `common_name`
    /// alone, for a service's own clients (such as the autoscaler's).
    pub fn generate_p256(common_name: &str) -> Result<CertificateAuthority> {
        let subject = CaSubject { organization: None, common_name: Some(common_name) };
        CertificateAuthority::generate(KeyAlgorithm::EcdsaP256, subject)
    }

    /// Rebuilds a CA from stored PEM text, checking that the key loads.
    pub fn from_pem(cert_pem: String, key_pem: SecretString) -> Result<CertificateAuthority> {
        let ca = CertificateAuthority { cert_pem, key_pem };
        ca.issuer()?;
        Ok(ca)
    }

    /// The CA certificate, PEM.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA private key, PEM.
    pub fn key_pem(&self) -> &SecretString {
        &self.key_pem
    }

    /// When the CA certificate expires, as Unix seconds.
    pub fn not_after(&self) -> Result<i64> {
        let invalid =
            |err: String| TalosError::InvalidInput(format!("the CA certificate does not parse: {err}"));
        let (_, pem) =
            x509_parser::pem::parse_x509_pem(self.cert_pem.as_bytes()).map_err(|e| invalid(e.to_string()))?;
        let cert = pem.parse_x509().map_err(|e| invalid(e.to_string()))?;
        Ok(cert.validity().not_after.timestamp())
    }

    /// The CA's key algorithm, which its leaf keys follow.
    pub fn algorithm(&self) -> Result<KeyAlgorithm> {
        Ok(keys::load(&self.key_pem)?.1)
    }

    fn issuer(&self) -> Result<(Issuer<'static, KeyPair>, KeyAlgorithm)> {
        let (pair, algorithm) = keys::load(&self.key_pem)?;
        let issuer = Issuer::from_ca_cert_pem(&self.cert_pem, pair).map_err(TalosError::crypto)?;
        Ok((issuer, algorithm))
    }

    /// Issues a leaf certificate with a fresh key of the CA's type.
    fn issue(&self, mut params: CertificateParams, ttl: Duration) -> Result<IssuedCertificate> {
        positive(ttl)?;
        let (issuer, algorithm) = self.issuer()?;
        let key = keys::generate(algorithm)?;
        let now = OffsetDateTime::now_utc();
        params.not_before = now - LEAF_BACKDATE;
        params.not_after = now + ttl;
        params.serial_number = Some(serial()?);
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let cert = params.signed_by(&key.pair, &issuer).map_err(TalosError::crypto)?;
        Ok(IssuedCertificate { cert_pem: cert.pem(), key_pem: key.pem })
    }
}

/// Issues a TLS server certificate for `sans` (IP addresses or DNS names);
/// the first SAN is also the common name.
pub fn issue_server_cert(
    ca: &CertificateAuthority,
    sans: &[&str],
    ttl: Duration,
) -> Result<IssuedCertificate> {
    let Some(first) = sans.first() else {
        return Err(TalosError::InvalidInput("a server certificate needs at least one SAN".into()));
    };
    let mut params = CertificateParams::default();
    params.distinguished_name = name(Some(first), std::iter::empty());
    params.subject_alt_names = sans.iter().map(|san| san_type(san)).collect::<Result<_>>()?;
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    ca.issue(params, ttl)
}

/// Issues a TLS client certificate with an optional common name and the
/// given organizations (Kubernetes groups, Talos roles), each in an O
/// attribute of its own. Several organizations need a P-256 CA.
pub fn issue_client_cert(
    ca: &CertificateAuthority,
    common_name: Option<&str>,
    organizations: &[&str],
    ttl: Duration,
) -> Result<IssuedCertificate> {
    if organizations.len() > 1 {
        positive(ttl)?;
        return names::issue(ca, common_name, organizations, ttl);
    }
    let mut params = CertificateParams::default();
    params.distinguished_name = name(common_name, organizations.iter().copied());
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    ca.issue(params, ttl)
}

fn name<'a>(common_name: Option<&str>, organizations: impl Iterator<Item = &'a str>) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    for organization in organizations {
        name.push(DnType::OrganizationName, organization);
    }
    if let Some(common_name) = common_name {
        name.push(DnType::CommonName, common_name);
    }
    name
}

fn san_type(san: &str) -> Result<SanType> {
    let trimmed = san.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = trimmed.parse::<IpAddr>() {
        return Ok(SanType::IpAddress(ip));
    }
    let label_ok = |label: &str| {
        !label.is_empty()
            && label.len() <= 63
            && (label == "*" || label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
    };
    let not_dns = || TalosError::InvalidInput(format!("{san:?} is neither an IP address nor a DNS name"));
    if san.len() > 253 || !san.split('.').all(label_ok) {
        return Err(not_dns());
    }
    let dns = san.to_string().try_into().map_err(|_| not_dns())?;
    Ok(SanType::DnsName(dns))
}

/// Refuses a leaf certificate lifetime of zero.
fn positive(ttl: Duration) -> Result<()> {
    if ttl.is_zero() {
        return Err(TalosError::InvalidInput("a certificate lifetime must be positive".into()));
    }
    Ok(())
}

/// A random positive 128-bit serial number.
fn serial() -> Result<SerialNumber> {
    Ok(SerialNumber::from_slice(&serial_bytes()?))
}

/// The bytes of a random positive 128-bit serial number.
fn serial_bytes() -> Result<[u8; 16]> {
    let mut bytes = random::bytes::<16>()?;
    bytes[0] = (bytes[0] & 0x7f) | 0x01;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaves_need_a_lifetime_and_a_san() {
        let subject = CaSubject { organization: Some("etcd"), common_name: None };
        let ca = CertificateAuthority::generate(KeyAlgorithm::EcdsaP256, subject).unwrap();
        assert!(issue_server_cert(&ca, &[], Duration::from_secs(60)).is_err());
        assert!(issue_client_cert(&ca, None, &["x"], Duration::ZERO).is_err());
        assert!(issue_server_cert(&ca, &["bad name!"], Duration::from_secs(60)).is_err());
        let issued = issue_server_cert(&ca, &["127.0.0.1", "localhost"], Duration::from_secs(60)).unwrap();
        assert!(issued.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(!format!("{issued:?}").contains("PRIVATE"));
    }

    #[test]
    fn a_p256_ca_names_its_common_name_and_issues_p256_leaves() {
        let ca = CertificateAuthority::generate_p256("cms autoscaler CA").unwrap();
        assert_eq!(ca.algorithm().unwrap(), KeyAlgorithm::EcdsaP256);
        let (_, pem) = x509_parser::pem::parse_x509_pem(ca.cert_pem().as_bytes()).unwrap();
        let cert = pem.parse_x509().unwrap();
        let names: Vec<_> = cert.subject().iter_common_name().map(|cn| cn.as_str().unwrap()).collect();
        assert_eq!(names, ["cms autoscaler CA"]);
        assert!(cert.is_ca());
        let leaf = issue_client_cert(&ca, Some("acme"), &["o"], Duration::from_secs(60)).unwrap();
        assert!(secrecy::ExposeSecret::expose_secret(&leaf.key_pem).contains(keys::EC_LABEL));
    }
}

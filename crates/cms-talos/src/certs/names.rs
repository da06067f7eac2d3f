//! Client certificates whose subject repeats O, one attribute per group.
//!
//! Kubernetes reads a client certificate's groups from every O attribute of
//! its subject. rcgen's names keep one value per attribute type, so a
//! certificate with several groups is built with `x509-cert` instead, signed
//! by the CA's P-256 key (the Kubernetes CA's type).

use std::time::{Duration, SystemTime};

use p256::ecdsa::{DerSignature, SigningKey};
use p256::pkcs8::DecodePrivateKey;
use rcgen::PublicKeyData;
use x509_cert::Certificate;
use x509_cert::attr::AttributeTypeAndValue;
use x509_cert::builder::{Builder, CertificateBuilder, Profile};
use x509_cert::der::asn1::{SetOfVec, Utf8StringRef};
use x509_cert::der::oid::db::{rfc4519, rfc5280};
use x509_cert::der::pem::LineEnding;
use x509_cert::der::{Any, DecodePem, EncodePem};
use x509_cert::ext::pkix::ExtendedKeyUsage;
use x509_cert::name::{Name, RdnSequence, RelativeDistinguishedName};
use x509_cert::serial_number::SerialNumber;
use x509_cert::spki::SubjectPublicKeyInfoOwned;
use x509_cert::time::{Time, Validity};

use super::{CertificateAuthority, IssuedCertificate, LEAF_BACKDATE, serial_bytes};
use crate::error::{Result, TalosError};
use crate::keys::{self, KeyAlgorithm};

/// Issues a client certificate with `common_name` and each organization in
/// an O attribute of its own, in order, under a P-256 CA.
pub(super) fn issue(
    ca: &CertificateAuthority,
    common_name: Option<&str>,
    organizations: &[&str],
    ttl: Duration,
) -> Result<IssuedCertificate> {
    let (ca_pair, algorithm) = keys::load(ca.key_pem())?;
    if algorithm != KeyAlgorithm::EcdsaP256 {
        return Err(TalosError::InvalidInput("several organizations need a P-256 CA".into()));
    }
    let signer = SigningKey::from_pkcs8_der(ca_pair.serialized_der()).map_err(TalosError::crypto)?;
    let ca_cert = Certificate::from_pem(ca.cert_pem()).map_err(TalosError::crypto)?;
    let leaf = keys::generate(KeyAlgorithm::EcdsaP256)?;
    let spki = SubjectPublicKeyInfoOwned::try_from(leaf.pair.subject_public_key_info().as_slice())
        .map_err(TalosError::crypto)?;
    let now = SystemTime::now();
    let validity = Validity {
        not_before: Time::try_from(now - LEAF_BACKDATE).map_err(TalosError::crypto)?,
        not_after: Time::try_from(now + ttl).map_err(TalosError::crypto)?,
    };
    let profile = Profile::Leaf {
        issuer: ca_cert.tbs_certificate.subject.clone(),
        enable_key_agreement: false,
        enable_key_encipherment: false,
    };
    let serial = SerialNumber::new(&serial_bytes()?).map_err(TalosError::crypto)?;
    let subject = subject(common_name, organizations)?;
    let mut builder = CertificateBuilder::new(profile, serial, validity, subject, spki, &signer)
        .map_err(TalosError::crypto)?;
    builder.add_extension(&ExtendedKeyUsage(vec![rfc5280::ID_KP_CLIENT_AUTH])).map_err(TalosError::crypto)?;
    let cert = builder.build::<DerSignature>().map_err(TalosError::crypto)?;
    let cert_pem = cert.to_pem(LineEnding::LF).map_err(TalosError::crypto)?;
    Ok(IssuedCertificate { cert_pem, key_pem: leaf.pem })
}

/// One RDN per organization, then the common name, as rcgen orders them.
fn subject(common_name: Option<&str>, organizations: &[&str]) -> Result<Name> {
    let attribute = |oid, value: &str| -> Result<RelativeDistinguishedName> {
        let value = Any::from(Utf8StringRef::new(value).map_err(TalosError::crypto)?);
        let set =
            SetOfVec::try_from(vec![AttributeTypeAndValue { oid, value }]).map_err(TalosError::crypto)?;
        Ok(RelativeDistinguishedName::from(set))
    };
    let mut rdns = organizations.iter().map(|o| attribute(rfc4519::O, o)).collect::<Result<Vec<_>>>()?;
    if let Some(common_name) = common_name {
        rdns.push(attribute(rfc4519::CN, common_name)?);
    }
    Ok(RdnSequence(rdns))
}

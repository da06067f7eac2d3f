//! Reading certificates back: a summary of what the tests check, and chain verification.

use x509_parser::certificate::X509Certificate;
use x509_parser::pem::parse_x509_pem;

/// The object identifier of Ed25519 keys.
pub(crate) const ED25519: &str = "1.3.101.112";
/// The object identifier of elliptic-curve public keys.
pub(crate) const EC_PUBLIC_KEY: &str = "1.2.840.10045.2.1";
/// The object identifier of the P-256 curve.
pub(crate) const P256: &str = "1.2.840.10045.3.1.7";

/// What a certificate says, in owned values.
#[derive(Debug)]
pub(crate) struct Summary {
    pub(crate) organizations: Vec<String>,
    pub(crate) common_names: Vec<String>,
    pub(crate) is_ca: bool,
    pub(crate) key_cert_sign: bool,
    pub(crate) digital_signature: bool,
    pub(crate) server_auth: bool,
    pub(crate) client_auth: bool,
    pub(crate) not_before: i64,
    pub(crate) not_after: i64,
    pub(crate) key_algorithm: String,
    pub(crate) curve: Option<String>,
}

/// The DER of the first certificate in PEM text.
pub(crate) fn der(pem: &str) -> Vec<u8> {
    let (_, pem) = parse_x509_pem(pem.as_bytes()).expect("PEM certificate");
    assert_eq!(pem.label, "CERTIFICATE");
    pem.contents
}

fn with_cert<R>(der: &[u8], f: impl FnOnce(&X509Certificate<'_>) -> R) -> R {
    let (_, cert) = x509_parser::parse_x509_certificate(der).expect("X.509 certificate");
    f(&cert)
}

/// Summarizes a PEM certificate.
pub(crate) fn summary(pem: &str) -> Summary {
    with_cert(&der(pem), |cert| {
        let texts = |iter: &mut dyn Iterator<Item = &x509_parser::x509::AttributeTypeAndValue<'_>>| {
            iter.map(|a| a.as_str().expect("UTF-8 name").to_string()).collect::<Vec<_>>()
        };
        let usage = cert.key_usage().expect("key usage parses").map(|ext| *ext.value);
        let extended = cert.extended_key_usage().expect("extended key usage parses");
        let algorithm = &cert.public_key().algorithm;
        Summary {
            organizations: texts(&mut cert.subject().iter_organization()),
            common_names: texts(&mut cert.subject().iter_common_name()),
            is_ca: cert.is_ca(),
            key_cert_sign: usage.is_some_and(|u| u.key_cert_sign()),
            digital_signature: usage.is_some_and(|u| u.digital_signature()),
            server_auth: extended.as_ref().is_some_and(|e| e.value.server_auth),
            client_auth: extended.as_ref().is_some_and(|e| e.value.client_auth),
            not_before: cert.validity().not_before.timestamp(),
            not_after: cert.validity().not_after.timestamp(),
            key_algorithm: algorithm.algorithm.to_id_string(),
            curve: algorithm.parameters.as_ref().and_then(|p| p.as_oid().ok()).map(|oid| oid.to_id_string()),
        }
    })
}

/// Whether `leaf_pem` is signed by the key of `ca_pem` and names it as issuer.
pub(crate) fn signed_by(leaf_pem: &str, ca_pem: &str) -> bool {
    let ca_der = der(ca_pem);
    with_cert(&ca_der, |ca| {
        with_cert(&der(leaf_pem), |leaf| {
            leaf.issuer() == ca.subject() && leaf.verify_signature(Some(ca.public_key())).is_ok()
        })
    })
}

/// The current time in seconds since the epoch.
pub(crate) fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock after 1970").as_secs()
        as i64
}

//! TLS for the node API, with rustls on ring.
//!
//! A tenant's nodes are trusted through its OS CA alone, never the system
//! roots, and cms presents a client certificate that CA signs, carrying a
//! Talos role. Maintenance mode, for a metal host that has no config yet,
//! presents no certificate and accepts any server certificate: that is how
//! Talos's maintenance API works, and only `ApplyConfiguration` uses it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use cms_model::UserRole;
use cms_talos::{SecretsBundle, talos_client_cert};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms, ring};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use secrecy::{ExposeSecret, SecretString};

use crate::error::NodeApiError;

/// How cms authenticates to a node, and how it checks the node.
#[derive(Clone)]
pub struct NodeCredentials {
    config: Arc<ClientConfig>,
    maintenance: bool,
}

impl fmt::Debug for NodeCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeCredentials").field("maintenance", &self.maintenance).finish_non_exhaustive()
    }
}

impl NodeCredentials {
    /// mTLS as `role` of the tenant whose bundle this is: the OS CA is the
    /// only root, and a fresh client certificate from it lives `ttl`.
    pub fn for_tenant(
        bundle: &SecretsBundle,
        role: UserRole,
        ttl: Duration,
    ) -> Result<NodeCredentials, NodeApiError> {
        let cert = talos_client_cert(bundle, role, ttl).map_err(NodeApiError::Certificate)?;
        // Both CAs while a rotation has nodes serve from either.
        let trusted = cms_talos::trusted_pem(bundle, cms_talos::Authority::Os);
        NodeCredentials::from_pem(&trusted, &cert.cert_pem, &cert.key_pem)
    }

    /// mTLS with PEM texts: the CA that signs the nodes' certificates, and
    /// the client certificate and key (PKCS#8, SEC1, or Talos's
    /// `ED25519 PRIVATE KEY`).
    pub fn from_pem(
        ca_pem: &str,
        cert_pem: &str,
        key_pem: &SecretString,
    ) -> Result<NodeCredentials, NodeApiError> {
        let mut roots = RootCertStore::empty();
        for ca in load_certificates(ca_pem)? {
            roots.add(ca).map_err(|err| NodeApiError::Credentials(format!("the CA certificate: {err}")))?;
        }
        let key = load_private_key(key_pem)?;
        let config = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|err| NodeApiError::Credentials(err.to_string()))?
            .with_root_certificates(roots)
            .with_client_auth_cert(load_certificates(cert_pem)?, key)
            .map_err(|err| NodeApiError::Credentials(format!("the client certificate: {err}")))?;
        Ok(NodeCredentials { config: with_h2(config), maintenance: false })
    }

    /// Talos maintenance mode: no client certificate, any server certificate.
    pub fn maintenance() -> NodeCredentials {
        let provider = provider();
        let verifier = AcceptAnyServer { algorithms: provider.signature_verification_algorithms };
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions")
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        NodeCredentials { config: with_h2(config), maintenance: true }
    }

    /// Whether these are the insecure maintenance-mode credentials.
    pub fn is_maintenance(&self) -> bool {
        self.maintenance
    }

    pub(crate) fn client_config(&self) -> Arc<ClientConfig> {
        self.config.clone()
    }
}

/// The ring crypto provider, which every TLS user in cms shares.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(ring::default_provider())
}

/// gRPC needs HTTP/2, and Talos's gRPC server insists on ALPN `h2`.
fn with_h2(mut config: ClientConfig) -> Arc<ClientConfig> {
    config.alpn_protocols = vec![b"h2".to_vec()];
    Arc::new(config)
}

/// Every certificate in a PEM text; an error when it holds none.
pub fn load_certificates(pem_text: &str) -> Result<Vec<CertificateDer<'static>>, NodeApiError> {
    let blocks = pem::parse_many(pem_text).map_err(|err| NodeApiError::Credentials(err.to_string()))?;
    let certs: Vec<_> = blocks
        .into_iter()
        .filter(|block| block.tag() == "CERTIFICATE")
        .map(|block| CertificateDer::from(block.into_contents()))
        .collect();
    if certs.is_empty() {
        return Err(NodeApiError::Credentials("no certificate in the PEM text".into()));
    }
    Ok(certs)
}

/// Loads a private key from PEM: `PRIVATE KEY` and Talos's
/// `ED25519 PRIVATE KEY` (both PKCS#8), `EC PRIVATE KEY` (SEC1) or
/// `RSA PRIVATE KEY` (PKCS#1).
pub fn load_private_key(key_pem: &SecretString) -> Result<PrivateKeyDer<'static>, NodeApiError> {
    let block = pem::parse(key_pem.expose_secret())
        .map_err(|_| NodeApiError::Credentials("the private key is not PEM".into()))?;
    let der = block.contents().to_vec();
    match block.tag() {
        "PRIVATE KEY" | "ED25519 PRIVATE KEY" => Ok(PrivateKeyDer::Pkcs8(der.into())),
        "EC PRIVATE KEY" => Ok(PrivateKeyDer::Sec1(der.into())),
        "RSA PRIVATE KEY" => Ok(PrivateKeyDer::Pkcs1(der.into())),
        other => Err(NodeApiError::Credentials(format!("unknown private key label {other:?}"))),
    }
}

/// Accepts any server certificate, but still checks that the server holds
/// its key. Only for maintenance mode.
#[derive(Debug)]
struct AcceptAnyServer {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for AcceptAnyServer {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

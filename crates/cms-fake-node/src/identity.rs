//! The fake node's TLS identity: the certificate it serves and the client
//! certificates it takes, which follow its mode and config as Talos's do.
//!
//! - In maintenance mode Talos makes a CA of its own (`MaintenanceRootController`
//!   in `internal/app/machined/pkg/controllers/secrets/maintenance_root.go`),
//!   issues the maintenance service's certificate from it
//!   (`MaintenanceController`, `maintenance.go` there) and asks clients for
//!   no certificate (`ServerOnly`, as in `genTLSConfig` of
//!   `internal/app/maintenance/main.go`): the client trusts it blindly, or
//!   by its fingerprint. The fake does the same; a node reset into
//!   maintenance mode makes a new CA.
//! - Once configured, apid serves a certificate from the config's OS CA and
//!   takes only client certificates from the CAs it accepts
//!   (`RootOSController` in `secrets/root.go` reads `machine.ca` and
//!   `machine.acceptedCAs`; `APIController` in `secrets/api.go` issues):
//!   a control plane's config carries the CA's key and the node issues its
//!   own certificate; a worker's carries only the CA's certificate, and
//!   trustd on a control plane signs the worker's. The fake's trustd is
//!   any CA with that certificate known in the process: one given to a
//!   fake node ([`crate::FakeNodeOptions::new`]) or carried by a config a
//!   fake node took. The accepted CAs are `machine.ca.crt` and
//!   `machine.acceptedCAs`.
//! - A node out of maintenance mode that has no config, or one whose
//!   config names no OS CA (not one Talos would take), serves a certificate
//!   from the CA it was given and takes client certificates from it.
//!   [`crate::FakeNodeOptions::client_ca`], when set, names the CA of the
//!   client certificates in every mode but maintenance, the config's
//!   accepted CAs included.
//!
//! New connections get the identity of the moment; connections made before
//! keep theirs until they close.

use std::sync::{Arc, Mutex, PoisonError, RwLock};

use cms_talos::CertificateAuthority;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
use rustls::server::ServerConfig;
use secrecy::SecretString;
use tokio_rustls::TlsAcceptor;

use crate::config::MachineConfig;
use crate::node::FakeNodeError;
use crate::tls::{Clients, issue, serving_config};

/// The application protocol apid offers: gRPC's HTTP/2.
const ALPN: &[u8] = b"h2";
/// How many CAs the fake trustd of the process remembers.
const KNOWN_CAS: usize = 256;

/// The CAs, with their keys, that the fake nodes of the process were given
/// or took in a config: the fake trustd, which signs a worker's certificate.
static KNOWN: Mutex<Vec<CertificateAuthority>> = Mutex::new(Vec::new());

/// What a node serves as.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Serving<'a> {
    /// With a certificate from the CA it was given.
    Given,
    /// In maintenance mode, with a certificate from a CA it makes itself.
    Maintenance,
    /// As the machine config (YAML) names it.
    Config(&'a str),
}

/// A node's identity: where it comes from, and what it is now.
pub(crate) struct Identity {
    /// The CA given to the node's options.
    given: CertificateAuthority,
    /// The CA of the client certificates, when the options name one.
    client_ca: Option<CertificateAuthority>,
    /// The serving certificate's names: the loopback and listen addresses.
    sans: Vec<String>,
    current: RwLock<Current>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity").field("sans", &self.sans).finish_non_exhaustive()
    }
}

/// The identity new connections get.
#[derive(Clone)]
struct Current {
    config: Arc<ServerConfig>,
    /// The certificate (PEM) of the CA that issued the serving one.
    issuer_pem: String,
}

impl Identity {
    /// A node's identity, serving as `serving` to begin with.
    pub(crate) fn new(
        given: CertificateAuthority,
        client_ca: Option<CertificateAuthority>,
        sans: Vec<String>,
        serving: Serving<'_>,
    ) -> Result<Identity, FakeNodeError> {
        remember(&given);
        let current = make(&given, client_ca.as_ref(), &sans, serving)?;
        Ok(Identity { given, client_ca, sans, current: RwLock::new(current) })
    }

    /// Serves as `serving` from now on. A config whose identity cannot be
    /// made (a CA that does not load) leaves the node with the CA it was
    /// given.
    pub(crate) fn serve(&self, serving: Serving<'_>) {
        let made = make(&self.given, self.client_ca.as_ref(), &self.sans, serving)
            .or_else(|_| make(&self.given, self.client_ca.as_ref(), &self.sans, Serving::Given));
        if let Ok(current) = made {
            *self.current.write().unwrap_or_else(PoisonError::into_inner) = current;
        }
    }

    /// The acceptor for a new connection.
    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.current.read().unwrap_or_else(PoisonError::into_inner).config.clone())
    }

    /// The certificate (PEM) of the CA that issued the serving certificate.
    pub(crate) fn issuer_pem(&self) -> String {
        self.current.read().unwrap_or_else(PoisonError::into_inner).issuer_pem.clone()
    }
}

/// The identity `serving` names.
fn make(
    given: &CertificateAuthority,
    client_ca: Option<&CertificateAuthority>,
    sans: &[String],
    serving: Serving<'_>,
) -> Result<Current, FakeNodeError> {
    let issued_by = |issuer: &CertificateAuthority, accepted: Vec<String>| {
        let accepted = match client_ca {
            Some(ca) => vec![ca.cert_pem().to_string()],
            None => accepted,
        };
        let config =
            serving_config(&issue(issuer, sans)?, issuer.cert_pem(), Clients::SignedBy(&accepted), ALPN)?;
        Ok(Current { config, issuer_pem: issuer.cert_pem().to_string() })
    };
    let os_ca = match serving {
        Serving::Given => None,
        Serving::Maintenance => {
            let ca = self_signed_ca()?;
            let config = serving_config(&issue(&ca, sans)?, ca.cert_pem(), Clients::Any, ALPN)?;
            return Ok(Current { config, issuer_pem: ca.cert_pem().to_string() });
        }
        Serving::Config(text) => MachineConfig::parse(text).ok().and_then(|config| config.os_ca()),
    };
    let Some(os_ca) = os_ca else {
        return issued_by(given, vec![given.cert_pem().to_string()]);
    };
    let issuer = match (&os_ca.cert_pem, &os_ca.key_pem) {
        (Some(cert_pem), Some(key_pem)) => {
            let ca = CertificateAuthority::from_pem(cert_pem.clone(), SecretString::from(key_pem.clone()))?;
            remember(&ca);
            ca
        }
        (Some(cert_pem), None) => known(cert_pem).unwrap_or_else(|| given.clone()),
        (None, _) => given.clone(),
    };
    let accepted = os_ca.cert_pem.into_iter().chain(os_ca.accepted).collect();
    issued_by(&issuer, accepted)
}

/// A CA the node makes itself for maintenance mode: P-256, self-signed.
fn self_signed_ca() -> Result<CertificateAuthority, FakeNodeError> {
    let failed = |err: rcgen::Error| FakeNodeError::Tls(format!("the maintenance CA: {err}"));
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(failed)?;
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, "maintenance");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let cert = params.self_signed(&key).map_err(failed)?;
    Ok(CertificateAuthority::from_pem(cert.pem(), SecretString::from(key.serialize_pem()))?)
}

/// The DER bytes of a certificate's PEM text, which tell two CAs apart.
fn der(cert_pem: &str) -> Option<Vec<u8>> {
    pem::parse(cert_pem).ok().map(pem::Pem::into_contents)
}

/// Remembers a CA for the fake trustd.
fn remember(ca: &CertificateAuthority) {
    let Some(cert) = der(ca.cert_pem()) else { return };
    let mut known = KNOWN.lock().unwrap_or_else(PoisonError::into_inner);
    known.retain(|other| der(other.cert_pem()).as_ref() != Some(&cert));
    if known.len() >= KNOWN_CAS {
        known.remove(0);
    }
    known.push(ca.clone());
}

/// The CA with this certificate, if the fake trustd knows it.
fn known(cert_pem: &str) -> Option<CertificateAuthority> {
    let cert = der(cert_pem)?;
    let known = KNOWN.lock().unwrap_or_else(PoisonError::into_inner);
    known.iter().rev().find(|ca| der(ca.cert_pem()).as_ref() == Some(&cert)).cloned()
}

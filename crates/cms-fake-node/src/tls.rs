//! The fake servers' TLS: server configs from a serving certificate and the
//! CAs whose client certificates they take (or none asked for), and the
//! accepted connections handed to tonic with what the handshake learnt.
//! Which certificate a fake node serves is `identity.rs`'s.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use cms_talos::{CertificateAuthority, IssuedCertificate};
use rustls::RootCertStore;
use rustls::crypto::ring;
use rustls::pki_types::CertificateDer;
use rustls::server::{ServerConfig, WebPkiClientVerifier};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tonic::transport::server::Connected;

use crate::node::FakeNodeError;

/// How long a client may take over its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a serving certificate lives.
const SERVING_CERT_TTL: Duration = Duration::from_secs(24 * 3600);

/// What tonic learns about a connection, in each request's extensions.
#[derive(Debug, Clone)]
pub(crate) struct PeerInfo {
    pub(crate) client_certificate: bool,
}

/// An accepted TLS connection.
#[derive(Debug)]
pub(crate) struct TlsConnection(TlsStream<TcpStream>);

impl Connected for TlsConnection {
    type ConnectInfo = PeerInfo;

    fn connect_info(&self) -> PeerInfo {
        PeerInfo { client_certificate: self.0.get_ref().1.peer_certificates().is_some_and(|c| !c.is_empty()) }
    }
}

impl AsyncRead for TlsConnection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsConnection {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// Whose client certificates a server takes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Clients<'a> {
    /// It asks for none, and serves every client (Talos's maintenance
    /// service).
    Any,
    /// It requires one that a CA of these PEM texts signed.
    SignedBy(&'a [String]),
}

/// The server's TLS config: serves a certificate from `ca` for `sans`, and
/// requires a client certificate from `client_ca`; it offers the one
/// application protocol `alpn` (such as `h2`).
pub(crate) fn server_config(
    ca: &CertificateAuthority,
    client_ca: &CertificateAuthority,
    sans: &[String],
    alpn: &[u8],
) -> Result<Arc<ServerConfig>, FakeNodeError> {
    let serving = issue(ca, sans)?;
    serving_config(&serving, ca.cert_pem(), Clients::SignedBy(&[client_ca.cert_pem().to_string()]), alpn)
}

/// A serving certificate from `ca` for `sans` (IP addresses or DNS names).
pub(crate) fn issue(ca: &CertificateAuthority, sans: &[String]) -> Result<IssuedCertificate, FakeNodeError> {
    let sans: Vec<&str> = sans.iter().map(String::as_str).collect();
    Ok(cms_talos::issue_server_cert(ca, &sans, SERVING_CERT_TTL)?)
}

/// The server's TLS config: serves `serving` with the certificate of the
/// CA that issued it (`issuer_pem`), takes `clients`, and offers the one
/// application protocol `alpn`.
pub(crate) fn serving_config(
    serving: &IssuedCertificate,
    issuer_pem: &str,
    clients: Clients<'_>,
    alpn: &[u8],
) -> Result<Arc<ServerConfig>, FakeNodeError> {
    let provider = Arc::new(ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(tls_error)?;
    let builder = match clients {
        Clients::Any => builder.with_no_client_auth(),
        Clients::SignedBy(cas) => {
            let mut roots = RootCertStore::empty();
            for ca in cas {
                for cert in certificates(ca)? {
                    roots.add(cert).map_err(tls_error)?;
                }
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|err| FakeNodeError::Tls(err.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let key =
        cms_nodeapi::load_private_key(&serving.key_pem).map_err(|err| FakeNodeError::Tls(err.to_string()))?;
    let mut chain = certificates(&serving.cert_pem)?;
    chain.extend(certificates(issuer_pem)?);
    let mut config = builder.with_single_cert(chain, key).map_err(tls_error)?;
    config.alpn_protocols = vec![alpn.to_vec()];
    Ok(Arc::new(config))
}

fn tls_error(err: rustls::Error) -> FakeNodeError {
    FakeNodeError::Tls(err.to_string())
}

/// Every certificate of a PEM text.
fn certificates(pem_text: &str) -> Result<Vec<CertificateDer<'static>>, FakeNodeError> {
    let blocks =
        pem::parse_many(pem_text).map_err(|err| FakeNodeError::Tls(format!("a certificate: {err}")))?;
    let certs: Vec<_> = blocks
        .into_iter()
        .filter(|block| block.tag() == "CERTIFICATE")
        .map(|block| CertificateDer::from(block.into_contents()))
        .collect();
    match certs.is_empty() {
        true => Err(FakeNodeError::Tls("no certificate in a PEM text".into())),
        false => Ok(certs),
    }
}

/// Accepts connections until the receiver goes, handshaking each on its own
/// task with the acceptor of the moment; failed handshakes (a client from
/// another CA) are dropped.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    acceptor: impl Fn() -> TlsAcceptor + Send + 'static,
    connections: mpsc::Sender<Result<TlsConnection, io::Error>>,
) {
    loop {
        let Ok((tcp, _peer)): io::Result<(TcpStream, SocketAddr)> = listener.accept().await else {
            continue;
        };
        let (acceptor, sender) = (acceptor(), connections.clone());
        tokio::spawn(async move {
            let _ = tcp.set_nodelay(true);
            if let Ok(Ok(tls)) = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                let _ = sender.send(Ok(TlsConnection(tls))).await;
            }
        });
        if connections.is_closed() {
            return;
        }
    }
}

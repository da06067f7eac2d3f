//! The fake node's TLS: a serving certificate from the node's CA, client
//! certificates checked against the client CA, and the accepted connections
//! handed to tonic with what the handshake learnt.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use cms_talos::CertificateAuthority;
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
/// How long the serving certificate lives.
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

/// The server's TLS config: serves a certificate from `ca` for `sans`, and
/// requires (or, in maintenance mode, allows) a client certificate from
/// `client_ca`; it offers the one application protocol `alpn` (such as
/// `h2`).
pub(crate) fn server_config(
    ca: &CertificateAuthority,
    client_ca: &CertificateAuthority,
    sans: &[String],
    maintenance: bool,
    alpn: &[u8],
) -> Result<Arc<ServerConfig>, FakeNodeError> {
    let sans: Vec<&str> = sans.iter().map(String::as_str).collect();
    let serving = cms_talos::issue_server_cert(ca, &sans, SERVING_CERT_TTL)?;
    let provider = Arc::new(ring::default_provider());
    let mut roots = RootCertStore::empty();
    roots.add(der(client_ca.cert_pem())?).map_err(tls_error)?;
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
    let verifier = match maintenance {
        true => verifier.allow_unauthenticated().build(),
        false => verifier.build(),
    }
    .map_err(|err| FakeNodeError::Tls(err.to_string()))?;
    let key =
        cms_nodeapi::load_private_key(&serving.key_pem).map_err(|err| FakeNodeError::Tls(err.to_string()))?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(tls_error)?
        .with_client_cert_verifier(verifier)
        .with_single_cert(vec![der(&serving.cert_pem)?, der(ca.cert_pem())?], key)
        .map_err(tls_error)?;
    config.alpn_protocols = vec![alpn.to_vec()];
    Ok(Arc::new(config))
}

fn tls_error(err: rustls::Error) -> FakeNodeError {
    FakeNodeError::Tls(err.to_string())
}

fn der(pem_text: &str) -> Result<CertificateDer<'static>, FakeNodeError> {
    let block = pem::parse(pem_text).map_err(|err| FakeNodeError::Tls(format!("a certificate: {err}")))?;
    Ok(CertificateDer::from(block.into_contents()))
}

/// Accepts connections until the receiver goes, handshaking each on its own
/// task; failed handshakes (a client from another CA) are dropped.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    connections: mpsc::Sender<Result<TlsConnection, io::Error>>,
) {
    loop {
        let Ok((tcp, _peer)): io::Result<(TcpStream, SocketAddr)> = listener.accept().await else {
            continue;
        };
        let (acceptor, sender) = (acceptor.clone(), connections.clone());
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

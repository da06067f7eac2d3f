//! The service's TLS: a serving certificate issued from the autoscaler CA,
//! client certificates required from the same CA, and the accepted
//! connections handed to tonic with the identity their certificate names.

use std::io;
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
use tokio_util::sync::CancellationToken;
use tonic::transport::server::Connected;

use crate::error::AutoscalerError;
use crate::identity::Identity;

/// How long a client may take over its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How many TLS handshakes may be under way at once.
const HANDSHAKES: usize = 64;
/// How long the serving certificate lives; the server issues it anew at
/// every start.
const SERVING_CERT_TTL: Duration = Duration::from_secs(365 * 24 * 3600);

/// What tonic learns about a connection, in each request's extensions: the
/// identity of the client certificate, or why it names none.
#[derive(Debug, Clone)]
pub(crate) struct PeerInfo {
    pub(crate) identity: Result<Identity, String>,
}

/// An accepted TLS connection.
#[derive(Debug)]
pub(crate) struct TlsConnection(TlsStream<TcpStream>);

impl Connected for TlsConnection {
    type ConnectInfo = PeerInfo;

    fn connect_info(&self) -> PeerInfo {
        let certificate = self.0.get_ref().1.peer_certificates().and_then(|chain| chain.first());
        let identity = match certificate {
            Some(certificate) => Identity::of_certificate(certificate.as_ref()),
            None => Err("no client certificate".to_string()),
        };
        PeerInfo { identity }
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

/// The server's TLS config: serves a certificate issued from `ca` for
/// `names` (DNS names or IP addresses, the first also the common name),
/// requires a client certificate that `ca` signed, and offers HTTP/2.
pub fn server_config(
    ca: &CertificateAuthority,
    names: &[&str],
) -> Result<Arc<ServerConfig>, AutoscalerError> {
    let serving = cms_talos::issue_server_cert(ca, names, SERVING_CERT_TTL)
        .map_err(|err| AutoscalerError::Tls(format!("the serving certificate: {err}")))?;
    let provider = Arc::new(ring::default_provider());
    let mut roots = RootCertStore::empty();
    for cert in certificates(ca.cert_pem())? {
        roots.add(cert).map_err(tls_error)?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|err| AutoscalerError::Tls(err.to_string()))?;
    let key = cms_nodeapi::load_private_key(&serving.key_pem)
        .map_err(|err| AutoscalerError::Tls(format!("the serving key: {err}")))?;
    let mut chain = certificates(&serving.cert_pem)?;
    chain.extend(certificates(ca.cert_pem())?);
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(tls_error)?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(tls_error)?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

fn tls_error(err: rustls::Error) -> AutoscalerError {
    AutoscalerError::Tls(err.to_string())
}

/// Every certificate of a PEM text.
fn certificates(pem_text: &str) -> Result<Vec<CertificateDer<'static>>, AutoscalerError> {
    cms_nodeapi::load_certificates(pem_text)
        .map_err(|err| AutoscalerError::Tls(format!("a certificate: {err}")))
}

/// Accepts connections until `shutdown`, handshaking each on its own task;
/// a failed handshake (no certificate, or one from another CA) is dropped.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    connections: mpsc::Sender<Result<TlsConnection, io::Error>>,
    shutdown: CancellationToken,
) {
    let handshakes = Arc::new(tokio::sync::Semaphore::new(HANDSHAKES));
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = shutdown.cancelled() => return,
        };
        let Ok((tcp, peer)) = accepted else {
            // Out of descriptors, say: wait a moment rather than spin.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        // At most so many handshakes at once: a flood of connections that
        // never finish theirs waits here rather than holding tasks.
        let Ok(permit) = handshakes.clone().acquire_owned().await else { return };
        let (acceptor, sender) = (acceptor.clone(), connections.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let _ = tcp.set_nodelay(true);
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => {
                    let _ = sender.send(Ok(TlsConnection(tls))).await;
                }
                Ok(Err(err)) => {
                    tracing::debug!(%peer, "an autoscaler connection failed its handshake: {err}")
                }
                Err(_) => tracing::debug!(%peer, "an autoscaler connection timed out in its handshake"),
            }
        });
        if connections.is_closed() {
            return;
        }
    }
}

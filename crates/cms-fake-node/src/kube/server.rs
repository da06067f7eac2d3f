//! The fake Kubernetes API on the network: TLS that requires a client
//! certificate from the cluster's Kubernetes CA, then HTTP/1.1 by hyper.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::kube::routes;
use crate::kube::state::Store;

/// How long a client may take over its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Accepts and serves connections until aborted; aborting it also ends the
/// connections it serves. Failed handshakes (no client certificate, or one
/// from another CA) are dropped.
/// A connection ends when `restarts` changes: the API server restarted.
pub(crate) async fn serve(
    listener: TcpListener,
    acceptor: impl Fn() -> TlsAcceptor,
    store: Arc<Store>,
    restarts: watch::Receiver<u64>,
) {
    let mut connections = JoinSet::new();
    loop {
        let Ok((tcp, _peer)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        while connections.try_join_next().is_some() {}
        let (acceptor, store, mut restarts) = (acceptor(), store.clone(), restarts.clone());
        restarts.mark_unchanged();
        connections.spawn(async move {
            let _ = tcp.set_nodelay(true);
            let Ok(Ok(tls)) = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await else {
                return;
            };
            let client = client_name(&tls);
            let service = service_fn(move |request| {
                let (store, client) = (store.clone(), client.clone());
                async move { Ok::<_, Infallible>(routes::answer(&store, client, request).await) }
            });
            let connection =
                http1::Builder::new().timer(TokioTimer::new()).serve_connection(TokioIo::new(tls), service);
            tokio::select! {
                _ = connection => {}
                _ = restarts.changed() => {}
            }
        });
    }
}

/// The common name of the client's certificate.
fn client_name(tls: &TlsStream<TcpStream>) -> Option<String> {
    let certificate = tls.get_ref().1.peer_certificates()?.first()?;
    let (_, parsed) = x509_parser::parse_x509_certificate(certificate.as_ref()).ok()?;
    let name = parsed.subject().iter_common_name().next()?.as_str().ok()?.to_string();
    Some(name)
}

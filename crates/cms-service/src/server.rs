//! Running the application as an HTTP server, so that the binary needs no
//! web framework of its own: bind, run, and stop gracefully.

use std::any::Any;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use actix_web::HttpServer;
use actix_web::dev::ServerHandle;

use crate::state::AppState;

/// Runs `future` to completion on the runtime the HTTP server needs.
pub fn block_on<F: Future>(future: F) -> F::Output {
    actix_web::rt::System::new().block_on(future)
}

/// Has the kernel close a TCP connection whose sent data stays
/// unacknowledged, or whose peer's receive window stays shut, for `timeout`
/// (`TCP_USER_TIMEOUT`, which also bounds the zero-window probes). A client
/// that stops reading, such as a stalled watcher, is cut off this way even
/// though nothing polls its response while the socket is full; the
/// connection then ends, and everything it held is dropped.
fn limit_unread_sends(connection: &dyn Any, timeout: Duration) {
    let Some(stream) = connection.downcast_ref::<actix_web::rt::net::TcpStream>() else { return };
    if let Err(err) = socket2::SockRef::from(stream).set_tcp_user_timeout(Some(timeout)) {
        tracing::warn!(error = %err, "could not bound the connection's unread sends");
    }
}

/// A server bound to its addresses, serving [`crate::app`] on one worker per
/// core, that ignores signals: the caller decides when to stop it.
pub struct HttpService {
    addrs: Vec<SocketAddr>,
    handle: ServerHandle,
    task: tokio::task::JoinHandle<io::Result<()>>,
}

impl std::fmt::Debug for HttpService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpService").field("addrs", &self.addrs).finish_non_exhaustive()
    }
}

impl HttpService {
    /// Binds `listen` and starts serving `state`. In-flight requests get
    /// `drain` to finish once [`HttpService::stop`] is called. Must run
    /// inside [`block_on`].
    pub fn start(listen: &str, state: AppState, drain: Duration) -> io::Result<HttpService> {
        let send_timeout = state.options.send_timeout;
        let server = HttpServer::new(move || crate::app(state.clone()))
            .on_connect(move |connection, _| limit_unread_sends(connection, send_timeout))
            .workers(crate::worker_count())
            .disable_signals()
            .shutdown_timeout(drain.as_secs())
            .bind(listen)?;
        let addrs = server.addrs();
        let server = server.run();
        let handle = server.handle();
        let task = actix_web::rt::spawn(server);
        Ok(HttpService { addrs, handle, task })
    }

    /// The addresses the server listens on, with port 0 resolved.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Waits until the server stops by itself, which only a failure causes.
    pub async fn stopped(&mut self) -> io::Result<()> {
        (&mut self.task).await.map_err(io::Error::other)?
    }

    /// Stops accepting connections and waits for in-flight requests.
    pub async fn stop(self) -> io::Result<()> {
        self.handle.stop(true).await;
        self.task.await.map_err(io::Error::other)?
    }
}

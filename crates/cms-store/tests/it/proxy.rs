//! A TCP proxy in front of the PostgreSQL server, which a test can cut and
//! restore: a network partition of one replica, while the others go on.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

pub(crate) struct Proxy {
    address: SocketAddr,
    state: Arc<Mutex<State>>,
    accept: JoinHandle<()>,
}

#[derive(Default)]
struct State {
    cut: bool,
    links: Vec<JoinHandle<()>>,
}

impl Proxy {
    /// Forwards a loopback port to `target`.
    pub(crate) async fn start(target: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy port");
        let address = listener.local_addr().expect("proxy address");
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let accept = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let mut state = shared.lock().unwrap();
                if state.cut {
                    // Dropping the socket refuses the connection.
                    continue;
                }
                state.links.push(tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(("127.0.0.1", target)).await else { return };
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }));
            }
        });
        Proxy { address, state, accept }
    }

    /// `url` with its port replaced by the proxy's.
    pub(crate) fn url(&self, url: &str, port: u16) -> String {
        url.replace(&format!(":{port}/"), &format!(":{}/", self.address.port()))
    }

    /// Drops every connection through the proxy and refuses new ones.
    pub(crate) fn cut(&self) {
        let mut state = self.state.lock().unwrap();
        state.cut = true;
        for link in state.links.drain(..) {
            link.abort();
        }
    }

    /// Lets connections through again.
    pub(crate) fn restore(&self) {
        self.state.lock().unwrap().cut = false;
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

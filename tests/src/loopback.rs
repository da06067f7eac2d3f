//! A test server installed from PyPI by a `.ci/` script and named by an
//! environment variable (moto's S3 API, the OpenID Connect provider), run on
//! a free loopback port with `-H 127.0.0.1 -p PORT` until dropped.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long such a server may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running server process, killed when dropped.
#[derive(Debug)]
pub(crate) struct LoopbackServer {
    child: Child,
    addr: SocketAddr,
}

impl LoopbackServer {
    /// Starts the executable named by `$variable` (installed by `script`,
    /// `what` for messages) and waits until it accepts connections. Fails
    /// the test, never skips it, when the variable is unset.
    #[allow(clippy::disallowed_methods)] // The tests run the servers they talk to as processes.
    pub(crate) async fn start(variable: &str, script: &str, what: &str) -> LoopbackServer {
        let binary = std::env::var_os(variable).unwrap_or_else(|| {
            panic!(
                "this test needs {what}: run `{script}` and set {variable} to the path it prints \
                 (`cargo xtask e2e` and `.ci/run` do both)"
            )
        });
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let child = Command::new(&binary)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start {}: {err}", binary.to_string_lossy()));
        let mut server = LoopbackServer { child, addr };
        let began = Instant::now();
        while TcpStream::connect(addr).is_err() {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("{what} exited before answering: {status}");
            }
            assert!(began.elapsed() < START_TIMEOUT, "{what} did not answer on {addr} in {START_TIMEOUT:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        server
    }

    /// `http://127.0.0.1:<port>`.
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for LoopbackServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

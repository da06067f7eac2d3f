//! The server under soak, as the clients see it: where it listens now,
//! which process (epoch) that is, and when each killed process was reaped.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cms_check::linearizability::NEVER;
use cms_e2e::Api;

/// Where clients send requests while a server is up.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    pub(crate) addr: SocketAddr,
    pub(crate) token: Option<String>,
    /// Which server process this is: 0 for the first, one more per restart.
    pub(crate) epoch: usize,
}

impl Endpoint {
    /// A client of its own, so that its connections close when it is dropped.
    pub(crate) fn api(&self) -> Api {
        Api::new(self.addr).with_token(self.token.clone())
    }
}

#[derive(Debug, Default)]
struct State {
    current: Option<Endpoint>,
    /// For each epoch, when its process was reaped after `kill -9`, and its address.
    reaped: Vec<(u64, SocketAddr)>,
}

/// The shared view of the server, and the clock every history uses.
#[derive(Debug)]
pub(crate) struct Cluster {
    state: Mutex<State>,
    started: Instant,
}

impl Cluster {
    pub(crate) fn new() -> Cluster {
        Cluster { state: Mutex::new(State::default()), started: Instant::now() }
    }

    /// Nanoseconds since the soak began: the clock of every history.
    pub(crate) fn now(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(NEVER - 1)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The server clients should talk to, waiting while it is down.
    pub(crate) async fn endpoint(&self) -> Endpoint {
        loop {
            if let Some(endpoint) = self.lock().current.clone() {
                return endpoint;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Whether `epoch` is still the server clients should use.
    pub(crate) fn is_current(&self, epoch: usize) -> bool {
        self.lock().current.as_ref().is_some_and(|endpoint| endpoint.epoch == epoch)
    }

    /// Makes a started server the one clients use.
    pub(crate) fn publish(&self, endpoint: Endpoint) {
        self.lock().current = Some(endpoint);
    }

    /// Stops handing out the current server, before it is killed.
    pub(crate) fn withdraw(&self) -> Option<Endpoint> {
        self.lock().current.take()
    }

    /// Records that the process of `endpoint` was reaped now.
    pub(crate) fn reaped(&self, endpoint: &Endpoint) {
        let now = self.now();
        let mut state = self.lock();
        while state.reaped.len() <= endpoint.epoch {
            state.reaped.push((NEVER, endpoint.addr));
        }
        state.reaped[endpoint.epoch] = (now, endpoint.addr);
    }

    /// The latest time an operation sent to `epoch` at `invoked` could have
    /// taken effect: when its process was reaped, since a dead process
    /// applies nothing, unless a later server took over its address.
    pub(crate) fn bound(&self, epoch: usize, invoked: u64) -> u64 {
        let state = self.lock();
        let Some(&(reaped, addr)) = state.reaped.get(epoch) else { return NEVER };
        let reused = state.reaped.iter().skip(epoch + 1).any(|(_, later)| *later == addr)
            || state.current.as_ref().is_some_and(|current| current.addr == addr);
        if reused { NEVER } else { reaped.max(invoked) }
    }
}

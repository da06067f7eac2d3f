//! What every handler shares: the store, the authenticator, tenant secrets,
//! the health prober, the service's options and the shutdown signal.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use cms_auth::Authenticator;
use cms_nodeapi::{NodeApi, TalosNodeClient};
use cms_prober::{Clock, Prober, ProberOptions, SystemClock};
use cms_store::{Audit, Store};

use crate::health::SealedCredentials;
use crate::reservations::Reservations;
use tokio_util::sync::CancellationToken;

use crate::secrets::Secrets;

/// Tunable limits of the HTTP API, passed explicitly by the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceOptions {
    /// The largest request body accepted, in bytes; larger ones get 413.
    pub body_limit: usize,
    /// How often a watch stream sends a `: heartbeat` comment.
    pub watch_heartbeat: Duration,
    /// How long a connection's sent data may stay unacknowledged, or its
    /// peer's window shut, before the connection is closed: a watcher that
    /// stops reading is cut off, and its buffers are freed.
    pub send_timeout: Duration,
    /// Serves every route to anyone, as admin. Only for benchmarks and
    /// handler tests; the server allows it on loopback addresses only.
    pub insecure_disable_auth: bool,
}

impl ServiceOptions {
    /// 1 MiB.
    pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;
    /// 15 seconds.
    pub const DEFAULT_WATCH_HEARTBEAT: Duration = Duration::from_secs(15);
    /// 60 seconds.
    pub const DEFAULT_SEND_TIMEOUT: Duration = Duration::from_secs(60);
}

impl Default for ServiceOptions {
    fn default() -> ServiceOptions {
        ServiceOptions {
            body_limit: ServiceOptions::DEFAULT_BODY_LIMIT,
            watch_heartbeat: ServiceOptions::DEFAULT_WATCH_HEARTBEAT,
            send_timeout: ServiceOptions::DEFAULT_SEND_TIMEOUT,
            insecure_disable_auth: false,
        }
    }
}

/// The state shared by every worker and handler. Cloning is cheap.
#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub auth: Arc<Authenticator>,
    /// Where every mutating request is recorded, and read back.
    pub audit: Arc<dyn Audit>,
    /// Seals new tenants' bundles and opens them for downloads.
    pub secrets: Arc<Secrets>,
    /// Probes tenants' nodes for `/health`, on request, with a cache.
    pub prober: Arc<Prober>,
    pub options: ServiceOptions,
    /// Cancelled when the server shuts down; open watch streams then end.
    pub shutdown: CancellationToken,
    /// Tenant names whose create is under way.
    pub(crate) creating: Reservations,
}

impl AppState {
    /// State over `store`, `auth`, `audit` and `secrets` with a fresh
    /// shutdown signal, and a prober that uses the real node API client and
    /// clock.
    pub fn new(
        store: Arc<dyn Store>,
        auth: Arc<Authenticator>,
        audit: Arc<dyn Audit>,
        secrets: Arc<Secrets>,
        options: ServiceOptions,
    ) -> AppState {
        let defaults = ProberOptions::default();
        let client = Arc::new(TalosNodeClient::new(defaults.per_machine));
        let prober = prober(&store, &secrets, client, Arc::new(SystemClock), defaults);
        AppState {
            store,
            auth,
            audit,
            secrets,
            prober,
            options,
            shutdown: CancellationToken::new(),
            creating: Reservations::default(),
        }
    }

    /// Replaces the prober with one over `client` and `clock`, using this
    /// state's store and tenant secrets.
    pub fn with_prober(
        mut self,
        client: Arc<dyn NodeApi>,
        clock: Arc<dyn Clock>,
        options: ProberOptions,
    ) -> AppState {
        self.prober = prober(&self.store, &self.secrets, client, clock, options);
        self
    }
}

fn prober(
    store: &Arc<dyn Store>,
    secrets: &Arc<Secrets>,
    client: Arc<dyn NodeApi>,
    clock: Arc<dyn Clock>,
    options: ProberOptions,
) -> Arc<Prober> {
    let credentials = Arc::new(SealedCredentials { store: store.clone(), secrets: secrets.clone() });
    Arc::new(Prober::new(store.clone(), credentials, client, clock, options))
}

impl fmt::Debug for AppState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AppState")
            .field("secrets", &self.secrets)
            .field("options", &self.options)
            .field("shutdown", &self.shutdown.is_cancelled())
            .finish_non_exhaustive()
    }
}

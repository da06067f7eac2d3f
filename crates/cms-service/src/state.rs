//! What every handler shares: the store, the authenticator, tenant secrets,
//! the service's options and the shutdown signal.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use cms_auth::Authenticator;
use cms_store::Store;

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
    /// Serves every route to anyone, as admin. Only for benchmarks and
    /// handler tests; the server allows it on loopback addresses only.
    pub insecure_disable_auth: bool,
}

impl ServiceOptions {
    /// 1 MiB.
    pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;
    /// 15 seconds.
    pub const DEFAULT_WATCH_HEARTBEAT: Duration = Duration::from_secs(15);
}

impl Default for ServiceOptions {
    fn default() -> ServiceOptions {
        ServiceOptions {
            body_limit: ServiceOptions::DEFAULT_BODY_LIMIT,
            watch_heartbeat: ServiceOptions::DEFAULT_WATCH_HEARTBEAT,
            insecure_disable_auth: false,
        }
    }
}

/// The state shared by every worker and handler. Cloning is cheap.
#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub auth: Arc<Authenticator>,
    /// Seals new tenants' bundles and opens them for downloads.
    pub secrets: Arc<Secrets>,
    pub options: ServiceOptions,
    /// Cancelled when the server shuts down; open watch streams then end.
    pub shutdown: CancellationToken,
    /// Tenant names whose create is under way.
    pub(crate) creating: Reservations,
}

impl AppState {
    /// State over `store`, `auth` and `secrets` with a fresh shutdown signal.
    pub fn new(
        store: Arc<dyn Store>,
        auth: Arc<Authenticator>,
        secrets: Arc<Secrets>,
        options: ServiceOptions,
    ) -> AppState {
        AppState {
            store,
            auth,
            secrets,
            options,
            shutdown: CancellationToken::new(),
            creating: Reservations::default(),
        }
    }
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

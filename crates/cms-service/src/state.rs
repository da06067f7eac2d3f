//! What every handler shares: the store, the application layer, the
//! authenticator, the audit log, the health prober, the service's options,
//! the shutdown signal and the web console built over them. The server
//! builds them; this crate only uses them.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use cms_auth::Authenticator;
use cms_backup::Backups;
use cms_console::{Console, ConsoleOptions};
use cms_prober::Prober;
use cms_store::{Audit, Store};
use cms_tenancy::Tenancy;
use tokio_util::sync::CancellationToken;

use crate::audit::FailedLoginRecords;

/// Tunable limits of the HTTP API, passed explicitly by the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceOptions {
    /// The largest request body accepted, in bytes; larger ones get 413.
    pub body_limit: usize,
    /// How often a watch stream sends a `: heartbeat` comment.
    pub watch_heartbeat: Duration,
    /// How often a watch that asked for bookmarks (`allowWatchBookmarks`)
    /// gets one at least.
    pub watch_bookmark_interval: Duration,
    /// How long a connection's sent data may stay unacknowledged, or its
    /// peer's window shut, before the connection is closed: a watcher that
    /// stops reading is cut off, and its buffers are freed.
    pub send_timeout: Duration,
    /// Serves every route to anyone, as admin. Only for benchmarks and
    /// handler tests; the server allows it on loopback addresses only. The
    /// web console ignores it: its pages always need a session.
    pub insecure_disable_auth: bool,
    /// Marks the web console's session cookie `Secure`, for a server behind
    /// a proxy that terminates TLS. Off by default: the server itself speaks
    /// plain HTTP, and browsers drop `Secure` cookies sent over it.
    pub secure_cookies: bool,
    /// The URL browsers reach the server at; the console's sign-in at the
    /// identity provider returns under it. The request's `Host` when unset.
    pub public_url: Option<String>,
    /// Serves the `/metrics` series that carry tenant names (a `tenant`
    /// label) to anonymous callers too. Off by default: they are served to
    /// callers with a valid bearer token only.
    pub metrics_tenant_labels: bool,
    /// Opens a root span for every request (`tracing-actix-web`'s, with the
    /// caller's `traceparent` as its parent). On when traces are exported or
    /// the log filter shows debug lines; off, a request costs no span, and
    /// the lines it logs name its request id themselves.
    pub request_spans: bool,
}

impl ServiceOptions {
    /// 1 MiB.
    pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;
    /// 15 seconds.
    pub const DEFAULT_WATCH_HEARTBEAT: Duration = Duration::from_secs(15);
    /// 60 seconds, as the Kubernetes API server.
    pub const DEFAULT_WATCH_BOOKMARK_INTERVAL: Duration = Duration::from_secs(60);
    /// 60 seconds.
    pub const DEFAULT_SEND_TIMEOUT: Duration = Duration::from_secs(60);
}

impl Default for ServiceOptions {
    fn default() -> ServiceOptions {
        ServiceOptions {
            body_limit: ServiceOptions::DEFAULT_BODY_LIMIT,
            watch_heartbeat: ServiceOptions::DEFAULT_WATCH_HEARTBEAT,
            watch_bookmark_interval: ServiceOptions::DEFAULT_WATCH_BOOKMARK_INTERVAL,
            send_timeout: ServiceOptions::DEFAULT_SEND_TIMEOUT,
            insecure_disable_auth: false,
            secure_cookies: false,
            public_url: None,
            metrics_tenant_labels: false,
            request_spans: true,
        }
    }
}

/// The state shared by every worker and handler. Cloning is cheap.
#[derive(Clone)]
pub struct AppState {
    /// What tenant operations mean: every write of a tenant, node group or
    /// config patch, and the documents built from a tenant's secrets.
    pub tenancy: Tenancy,
    pub auth: Arc<Authenticator>,
    /// Where every mutating request is recorded, and read back.
    pub audit: Arc<dyn Audit>,
    /// The failed logins the audit log kept per user this minute, which
    /// it keeps a few of only.
    pub failed_logins: FailedLoginRecords,
    /// Probes tenants' nodes for `/health`, on request, with a cache.
    pub prober: Arc<Prober>,
    pub options: ServiceOptions,
    /// Cancelled when the server shuts down; open watch streams then end.
    pub shutdown: CancellationToken,
    /// The web console, over the same tenancy, authenticator and shutdown.
    pub console: Console,
    /// Tenants' etcd backups; `None` until [`AppState::with_backups`], when
    /// the backup routes answer 503.
    pub backups: Option<Backups>,
    /// Whether a tool state lock's holder is alive; `None` until
    /// [`AppState::with_state_locks`], when the release answers 503.
    pub state_locks: Option<Arc<dyn cms_store::StateLocks>>,
    /// The tenants' Kubernetes APIs, for support bundles; `None` until
    /// [`AppState::with_kube`], when bundles say they have no cluster part.
    pub kube: Option<Arc<dyn cms_tenancy::KubeClient>>,
    /// The tenants' nodes, for machines' logs (and support bundles); `None`
    /// until [`AppState::with_nodes`], when the log routes answer 503.
    pub nodes: Option<Arc<dyn cms_tenancy::NodeClient>>,
    /// The autoscaler CA and the address tenants' autoscalers dial; `None`
    /// until [`AppState::with_autoscaler`], when identity downloads answer 503.
    pub autoscaler: Option<Arc<AutoscalerAccess>>,
    /// Begins rotations of tenants' CAs; `None` until
    /// [`AppState::with_rotations`], when rotation requests answer 503.
    pub rotations: Option<Arc<dyn cms_tenancy::CaRotations>>,
}

/// What a tenant's cluster autoscaler needs from the service: the CA that
/// issues its identity and the `host:port` of the autoscaler port.
#[derive(Debug, Clone)]
pub struct AutoscalerAccess {
    pub ca: cms_talos::CertificateAuthority,
    pub address: String,
}

impl AppState {
    /// State over `tenancy` (and its store), `auth`, `audit` and `prober`,
    /// with a fresh shutdown signal and the web console over them.
    pub fn new(
        tenancy: Tenancy,
        auth: Arc<Authenticator>,
        audit: Arc<dyn Audit>,
        prober: Arc<Prober>,
        options: ServiceOptions,
    ) -> AppState {
        let shutdown = CancellationToken::new();
        let console_options = ConsoleOptions {
            public_url: options.public_url.clone(),
            secure_cookies: options.secure_cookies,
            heartbeat: options.watch_heartbeat,
        };
        let console = Console::new(
            tenancy.clone(),
            auth.clone(),
            audit.clone(),
            prober.clone(),
            console_options,
            shutdown.clone(),
        );
        let failed_logins = FailedLoginRecords::default();
        AppState {
            tenancy,
            auth,
            audit,
            failed_logins,
            prober,
            options,
            shutdown,
            console,
            backups: None,
            state_locks: None,
            kube: None,
            nodes: None,
            autoscaler: None,
            rotations: None,
        }
    }

    /// The tenancy's store, for reads and watches.
    pub fn store(&self) -> &Arc<dyn Store> {
        self.tenancy.store()
    }

    /// Serves tenants' etcd backups from `backups`, the API's and the
    /// console's.
    pub fn with_backups(mut self, backups: Backups) -> AppState {
        self.console = self.console.with_backups(backups.clone());
        self.backups = Some(backups);
        self
    }

    /// Answers releases of tools' state locks, asking `locks` whether a
    /// holder is alive.
    pub fn with_state_locks(mut self, locks: Arc<dyn cms_store::StateLocks>) -> AppState {
        self.state_locks = Some(locks);
        self
    }

    /// Reads tenants' Kubernetes Nodes and events for support bundles with `kube`.
    pub fn with_kube(mut self, kube: Arc<dyn cms_tenancy::KubeClient>) -> AppState {
        self.kube = Some(kube);
        self
    }

    /// Reads machines' logs over the node API with `nodes`, the API's and
    /// the console's logs panel's.
    pub fn with_nodes(mut self, nodes: Arc<dyn cms_tenancy::NodeClient>) -> AppState {
        self.console = self.console.with_nodes(nodes.clone());
        self.nodes = Some(nodes);
        self
    }

    /// Serves tenants' autoscaler identities, issued by `access.ca`, for
    /// the autoscaler port at `access.address`, the API's and the console's.
    pub fn with_autoscaler(mut self, access: AutoscalerAccess) -> AppState {
        self.console = self.console.with_autoscaler(access.ca.clone(), access.address.clone());
        self.autoscaler = Some(Arc::new(access));
        self
    }

    /// Begins rotations of tenants' CAs with `rotations`, the API's and the
    /// console's.
    pub fn with_rotations(mut self, rotations: Arc<dyn cms_tenancy::CaRotations>) -> AppState {
        self.console = self.console.with_rotations(rotations.clone());
        self.rotations = Some(rotations);
        self
    }

    /// Replaces the prober, the API's and the console's.
    pub fn with_prober(mut self, prober: Arc<Prober>) -> AppState {
        self.console = self.console.with_prober(prober.clone());
        self.prober = prober;
        self
    }
}

impl fmt::Debug for AppState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AppState")
            .field("tenancy", &self.tenancy)
            .field("options", &self.options)
            .field("shutdown", &self.shutdown.is_cancelled())
            .finish_non_exhaustive()
    }
}

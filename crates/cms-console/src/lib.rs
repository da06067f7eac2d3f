//! The web console of `cms`: pages rendered on the server with `maud`, one
//! small hand-written script for live updates over server-sent events, and
//! one stylesheet, both embedded in the binary (`docs/console.md`).
//!
//! The console knows HTTP through the `http` crate's types only: a request
//! comes in as an [`http::Request`] with its whole body, and
//! [`Console::handle`] answers an [`http::Response`] whose [`Body`] is whole
//! or a stream. `cms-service`, the one crate that knows actix-web, mounts it
//! at the paths of [`PATHS`]. Every action goes through the same permission
//! table (`cms_auth::Permission`) and the same `cms_tenancy::Tenancy` and
//! store calls as the API's handlers.
//!
//! Where things are: `routes.rs`, the paths and the dispatch; `session.rs`,
//! the session cookie and who is signed in; `csrf.rs`, the form token
//! derived from the session; `security.rs`, the headers every answer
//! carries; `reply.rs`, responses; `failure.rs`, failures as statuses and
//! messages; `form.rs`, form and query parsing; `assets.rs`, the embedded
//! script and stylesheet under content-hashed names; `layout.rs`, the page
//! frame. The pages: `login.rs`, `tenants.rs` (with `filters.rs` and
//! `summary.rs`, shared with the event stream), `tenant.rs` (with
//! `actions.rs`: scale and delete; `upgrade.rs`: the rolling procedures
//! and resuming a paused one; `machines.rs`: the machines, those that need
//! an operator, and confirming a replaced host; `probe.rs`: the health
//! line; `projected.rs`: the projected state), `machine.rs` (one machine,
//! with its logs panel; `logs.rs`, with `logs/`: a machine's log streamed
//! from its node), `create.rs`, `downloads.rs`, `autoscaler.rs` (a
//! tenant's autoscaler identity, for admins), `rotate_ca.rs` (the rotation
//! of a tenant's CAs: its status and, for admins, the form that asks for
//! one), and `events.rs`, the live
//! updates. `backups.rs` (with `backups/`): a
//! tenant's etcd backups, taken, downloaded, restored and deleted through
//! `cms_backup::Backups`, as the API's backup routes do. The account pages: `audit.rs`, the
//! audit log; `users.rs`; `grants.rs`, the grants; `tokens.rs`, one's own API tokens; with
//! `field.rs`, their labelled form fields and refusals. Editing:
//! `patches.rs` (with `patches/`), the tenant page's config patches and
//! their forms; `editor.rs`, a tenant as YAML, to edit or create; `yaml.rs`,
//! YAML read and written with `serde-saphyr`.

mod actions;
mod assets;
mod audit;
mod autoscaler;
mod backups;
mod create;
mod csrf;
mod downloads;
mod editor;
mod events;
mod failure;
mod field;
mod filters;
mod form;
mod grants;
mod layout;
mod login;
mod logs;
mod machine;
mod machines;
mod patches;
mod probe;
mod projected;
mod reply;
mod rotate_ca;
mod routes;
mod security;
mod session;
mod sso;
mod summary;
mod tenant;
mod tenants;
mod tokens;
mod upgrade;
mod users;
mod yaml;

#[cfg(test)]
mod tests;

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use cms_auth::Authenticator;
use cms_backup::Backups;
use cms_prober::Prober;
use cms_store::Audit;
use cms_tenancy::{NodeClient, Tenancy};
use futures_util::Stream;
use tokio_util::sync::CancellationToken;

/// The HTTP types the console speaks, for the server that mounts it.
pub use http;
pub use routes::PATHS;
pub use session::COOKIE;

/// A request to the console, with its whole body.
pub type Request = http::Request<Bytes>;

/// The console's answer.
pub type Response = http::Response<Body>;

/// The body of an answer: whole, or a stream of chunks (the live updates).
pub enum Body {
    /// The whole body.
    Full(Bytes),
    /// Chunks sent as they come, until the stream ends.
    Stream(Pin<Box<dyn Stream<Item = Bytes> + Send>>),
    /// Chunks of a download that may fail midway (a backup found altered):
    /// the mounting server cuts the transfer off at the error, so that no
    /// client takes a broken file for a whole one.
    Fallible(Pin<Box<dyn Stream<Item = Result<Bytes, std::io::Error>> + Send>>),
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Body::Full(bytes) => f.debug_tuple("Full").field(&bytes.len()).finish(),
            Body::Stream(_) => f.write_str("Stream"),
            Body::Fallible(_) => f.write_str("Fallible"),
        }
    }
}

/// What an answer's extensions say for the audit record, beside the
/// `cms_auth::Caller` that acted, when one did: the user name a sign-in
/// attempted (never the password).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginAttempt(pub String);

/// In an answer's extensions, beside [`LoginAttempt`]: the sign-in's
/// password was checked (it succeeded, or the password was wrong). A
/// failed sign-in without it (password login off, throttled, too many at
/// once) cost its sender nothing, and the audit log does not keep it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PasswordChecked;

/// In a request's extensions: the address of the client, as the connection's
/// peer. A sign-in's failures are counted by it; without it, every
/// sign-in counts as from one unknown address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(pub std::net::IpAddr);

/// In an answer's extensions: this answer to a `GET` is recorded on the
/// audit log as a mutation is. It marks the end of a sign-in at the
/// identity provider, which is a navigation and so a `GET`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recorded;

/// In an answer's extensions: the name of the tenant, user or API token a
/// create made or tried to make, which the path does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedName(pub String);

/// How the console is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleOptions {
    /// The URL browsers reach the server at, such as
    /// `https://cms.example.com`: a sign-in at the identity provider returns
    /// to `<public_url>/sso/callback`. When unset, the request's `Host`.
    pub public_url: Option<String>,
    /// Marks the session cookie `Secure`, so that browsers send it over
    /// HTTPS only. The server speaks plain HTTP; set this when a proxy in
    /// front of it terminates TLS.
    pub secure_cookies: bool,
    /// How often the live-update stream sends a comment, and checks that
    /// its session is still valid.
    pub heartbeat: Duration,
}

impl Default for ConsoleOptions {
    fn default() -> ConsoleOptions {
        ConsoleOptions { public_url: None, secure_cookies: false, heartbeat: Duration::from_secs(15) }
    }
}

/// The console: what its pages read and write through, and its options.
/// Cloning is cheap.
#[derive(Clone)]
pub struct Console {
    tenancy: Tenancy,
    auth: Arc<Authenticator>,
    /// The audit log, read by the audit page as `GET /api/v1/audit` reads it.
    audit: Arc<dyn Audit>,
    /// The health prober, for the tenant page's last probe and "probe now".
    prober: Arc<Prober>,
    options: ConsoleOptions,
    /// Cancelled when the server shuts down; open event streams then end.
    shutdown: CancellationToken,
    /// Tenants' etcd backups, the API's; `None` until
    /// [`Console::with_backups`], when the backup pages answer 503.
    backups: Option<Backups>,
    /// The backups and restores started from this console and running.
    running: backups::Running,
    /// The machines' node API, for their logs; `None` until
    /// [`Console::with_nodes`], when the logs panel says it is not there.
    nodes: Option<Arc<dyn NodeClient>>,
    /// The autoscaler CA and the address tenants' autoscalers dial; `None`
    /// until [`Console::with_autoscaler`], when the server serves no
    /// autoscaler port and the tenant page offers no autoscaler identity.
    autoscaler: Option<Arc<autoscaler::Access>>,
    /// Begins rotations of tenants' CAs, the API's; `None` until
    /// [`Console::with_rotations`], when the rotate form answers 503.
    rotations: Option<Arc<dyn cms_tenancy::CaRotations>>,
}

impl fmt::Debug for Console {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Console").field("options", &self.options).finish_non_exhaustive()
    }
}

impl Console {
    /// A console over `tenancy` (and its store), `auth`, `audit` and the
    /// health `prober`, whose event streams end when `shutdown` is
    /// cancelled.
    pub fn new(
        tenancy: Tenancy,
        auth: Arc<Authenticator>,
        audit: Arc<dyn Audit>,
        prober: Arc<Prober>,
        options: ConsoleOptions,
        shutdown: CancellationToken,
    ) -> Console {
        Console {
            tenancy,
            auth,
            audit,
            prober,
            options,
            shutdown,
            backups: None,
            running: Default::default(),
            nodes: None,
            autoscaler: None,
            rotations: None,
        }
    }

    /// The same console, serving tenants' etcd backups from `backups`.
    pub fn with_backups(self, backups: Backups) -> Console {
        Console { backups: Some(backups), ..self }
    }

    /// The same console, reading machines' logs through `nodes`.
    pub fn with_nodes(self, nodes: Arc<dyn NodeClient>) -> Console {
        Console { nodes: Some(nodes), ..self }
    }

    /// The same console, offering admins tenants' autoscaler identities
    /// issued by `ca` for the autoscaler port at `address` (`host:port`).
    pub fn with_autoscaler(self, ca: cms_talos::CertificateAuthority, address: String) -> Console {
        Console { autoscaler: Some(Arc::new(autoscaler::Access { ca, address })), ..self }
    }

    /// The same console, beginning rotations of tenants' CAs with `rotations`.
    pub fn with_rotations(self, rotations: Arc<dyn cms_tenancy::CaRotations>) -> Console {
        Console { rotations: Some(rotations), ..self }
    }

    /// The same console with another health prober.
    pub fn with_prober(self, prober: Arc<Prober>) -> Console {
        Console { prober, ..self }
    }

    /// Answers one request. Every answer carries the console's security
    /// headers (`security.rs`).
    pub async fn handle(&self, request: Request) -> Response {
        let mut response = routes::dispatch(self, &request).await;
        security::protect(response.headers_mut());
        response
    }

    /// The answer to a request whose body is over `limit` bytes, which the
    /// mounting server refuses before reading it whole.
    pub fn payload_too_large(&self, limit: usize) -> Response {
        let message = format!("The form is larger than the limit of {limit} bytes.");
        refusal(http::StatusCode::PAYLOAD_TOO_LARGE, message)
    }

    /// The answer to a request that the mounting server could not read or
    /// translate, such as one whose body broke off.
    pub fn bad_request(&self) -> Response {
        refusal(http::StatusCode::BAD_REQUEST, "The request could not be read.".to_string())
    }

    fn store(&self) -> &Arc<dyn cms_store::Store> {
        self.tenancy.store()
    }
}

/// A failure page with the security headers, for requests no page took.
fn refusal(status: http::StatusCode, message: String) -> Response {
    let mut response = failure::Failure::new(status, message).page(None);
    security::protect(response.headers_mut());
    response
}

//! The HTTP API of `cms`: routes, handlers, the mapping of failures to
//! `{"error", "code", "status"}` bodies, and the tenant watch stream.
//!
//! This is the only crate that knows actix-web. The server binary and the
//! tests build the same application with [`app`]: one module per resource,
//! each registering its routes with a `config` function, under `/api/v1`;
//! the operational endpoints (`/healthz`, `/readyz`, `/version`) and the
//! API's OpenAPI document (`/openapi.json`, with a page at `/docs`) sit at
//! the root, and so does the web console (`cms_console`, at `/`, mounted by
//! `console.rs`), which is not part of the API or its document. Handlers
//! answer with the JSON bytes the store serialized once.
//!
//! Where things are: `routes.rs`, the route table with each route's
//! permission, enforced by `auth.rs`; `visibility.rs` narrows what a
//! caller with grants sees to its tenants. One module per resource: `tenants.rs`,
//! `children.rs` (node groups and config patches), `machines.rs`,
//! `machine_config.rs`, `machine_logs.rs` (a machine's logs from its node), `downloads.rs`, `autoscaler_identity.rs` (the Secret a tenant's cluster autoscaler mounts), `backups.rs` (etcd backups), `support.rs` (support bundles), `projected.rs`, `health.rs`,
//! `users.rs`, `tokens.rs`, `grants.rs`, `login.rs`, `audit_log.rs`, and `ops.rs` for
//! `/healthz`, `/readyz`, `/version`; `console.rs` hands the console's paths
//! to it. Handlers parse (`body.rs`, `query.rs`),
//! call `cms_tenancy` or the store, and reply (`reply.rs`); `error.rs` is the
//! one place where failures become statuses and `{error, code, status}`
//! bodies. `watch.rs`: the SSE stream. `audit.rs`: the middleware that records
//! every mutation before the answer leaves. `request_id.rs`, `metrics.rs`:
//! request ids and Prometheus metrics. `fallback.rs`: 404 and 405.
//! `server.rs`: [`HttpService`], which sets `TCP_USER_TIMEOUT` on every
//! connection so that a watcher that stops reading is cut off. `openapi/`: the
//! OpenAPI document built from the route table, with a snapshot.
//! `examples/hello.rs`: the bare actix-web baseline of the benchmark;
//! `examples/durable_insert.rs`: the write bench's, a durable sqlx insert;
//! `examples/broadcaster.rs`: the watch fan-out bench's, one tokio
//! broadcast channel forwarded to every SSE client.

mod audit;
mod audit_log;
mod auth;
mod autoscaler_identity;
mod backups;
mod body;
mod children;
mod console;
mod downloads;
mod error;
mod fallback;
mod grants;
mod health;
mod login;
mod lookup;
mod machine_config;
mod machine_logs;
mod machines;
mod metrics;
mod openapi;
mod ops;
mod projected;
mod query;
mod reply;
mod request_id;
mod rotate_ca;
mod routes;
mod server;
mod spans;
mod state;
mod state_lock;
mod support;
mod tenants;
mod tokens;
mod users;
mod visibility;
mod watch;

#[cfg(test)]
mod tests;

use actix_web::body::BoxBody;
use actix_web::dev::{ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::middleware::{Condition, from_fn};
use actix_web::{App, web};

pub use audit::FailedLoginRecords;
pub use auth::Access;
pub use error::{ApiError, INTERNAL_MESSAGE};
pub use metrics::handle as metrics_handle;
pub use openapi::document as openapi_document;
pub use ops::{BUILD_INFO, BuildInfo};
pub use request_id::{REQUEST_ID_HEADER, RequestId};
pub use routes::{ROUTES, RouteInfo};
pub use server::{HttpService, block_on};
pub use state::{AppState, AutoscalerAccess, ServiceOptions};

/// The prefix of every resource route.
pub const API_PREFIX: &str = "/api/v1";

/// The whole application over `state`: routes, error shaping, request ids,
/// request spans when [`ServiceOptions::request_spans`] asks for them, and
/// the audit log of mutations. The server calls it once per worker; tests call it to run the same app.
pub fn app(
    state: AppState,
) -> App<
    impl ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<BoxBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    let spans = state.options.request_spans;
    App::new()
        .configure(|cfg| configure(cfg, state))
        .wrap(from_fn(audit::record))
        .wrap(from_fn(request_id::assign))
        .wrap(Condition::new(spans, tracing_actix_web::TracingLogger::<spans::RootSpans>::new()))
        .wrap(from_fn(metrics::record))
}

/// Registers the state, the routes of [`ROUTES`], the web console's paths
/// and the fallbacks for unknown paths.
/// [`app`] adds the request-id middleware, which also gives the framework's
/// own errors the API's shape; prefer it over calling this directly.
pub fn configure(cfg: &mut web::ServiceConfig, state: AppState) {
    cfg.app_data(web::Data::new(state)).configure(fallback::extractor_errors).configure(routes::root);
    // The API first: its prefix is one string comparison, where the
    // console's paths with parameters are a pattern match each, and the
    // router tries them in order.
    cfg.service(web::scope(API_PREFIX).configure(routes::api));
    cfg.configure(console::mount);
    cfg.default_service(web::to(fallback::not_found));
}

/// How many workers to run: one per available core.
pub fn worker_count() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

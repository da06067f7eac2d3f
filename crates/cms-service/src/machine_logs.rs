//! `GET /api/v1/tenants/{tenant}/machines/{id}/logs` and `/dmesg`: a
//! machine's service log and kernel log, read from its node over the node
//! API (`cms_tenancy::NodeClient`, with the tenant's credentials) and sent
//! on as `text/plain` as the node sends it, chunk by chunk, never whole in
//! memory but for a kernel log's last `tail` lines.
//!
//! - `service` (logs only, required): a Talos service id such as
//!   `machined`, `etcd` or `kubelet` (`^[a-z0-9][a-z0-9._-]{0,62}$`);
//!   `follow`: `true` keeps the response open and sends what the node
//!   writes next; `tail`: the last lines only, 1 to [`MAX_TAIL`],
//!   [`DEFAULT_TAIL`] unless given. A bad value is 400.
//! - A machine that does not exist is 404, one with no address yet 503; a
//!   node that cannot be reached is 503 and one that answers with an
//!   error 502, each with the node's one-line reason (never a secret); a
//!   service the node keeps no log of is 404.
//! - A followed log holds one of its caller's watch slots, as a watch
//!   stream does (429 past the caller's limit); at every watch heartbeat
//!   it authenticates the request's credential again and checks again
//!   that it may read the tenant's logs, and a revoked token, a deleted
//!   user or a removed grant cuts it short. It ends when the node ends
//!   it, the client goes away
//!   (dropping the node's stream, which resets the call) or the server
//!   shuts down; the connection's send timeout cuts off a client that
//!   stops reading. An error after the first byte cuts the response short.
//! - Every read is on the audit log, with the tenant and machine (its
//!   path) and the service read (as the recorded path's query).
//! - The node's dmesg has no tail: for the last lines the service reads
//!   the kernel log once to count its lines, then follows it (or reads it
//!   again) from that many lines before its end.

use actix_web::http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use actix_web::{HttpRequest, HttpResponse, web};
use cms_tenancy::{LogChunks, LogsRequest, NodeClient, NodeError, NodeRef, machine_node};
use follow::Follow;
use futures_util::StreamExt;
use serde::Deserialize;

use crate::audit::note_recorded_read_of;
use crate::auth::caller;
use crate::error::ApiError;
use crate::state::AppState;

/// The most lines `tail` may ask for.
pub(crate) const MAX_TAIL: u32 = 10_000;

/// The lines sent unless `tail` says otherwise.
pub(crate) const DEFAULT_TAIL: u32 = 100;

/// The query of a log read, as sent.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LogQuery {
    service: Option<String>,
    follow: Option<String>,
    tail: Option<String>,
}

/// A parsed log query.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Parsed {
    follow: bool,
    tail: u32,
}

impl LogQuery {
    fn parse(&self) -> Result<Parsed, ApiError> {
        let follow = match self.follow.as_deref() {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(ApiError::BadRequest(format!(
                    "follow must be true or false, not {:?}",
                    clip(other)
                )));
            }
        };
        let tail = match self.tail.as_deref() {
            None => DEFAULT_TAIL,
            Some(text) => match text.parse::<u32>() {
                Ok(tail @ 1..=MAX_TAIL) => tail,
                _ => {
                    return Err(ApiError::BadRequest(format!(
                        "tail must be a number of lines from 1 to {MAX_TAIL}, not {:?}",
                        clip(text)
                    )));
                }
            },
        };
        Ok(Parsed { follow, tail })
    }

    /// The service asked for: a Talos service id.
    fn service(&self) -> Result<&str, ApiError> {
        let Some(service) = self.service.as_deref() else {
            return Err(ApiError::BadRequest("service is required, such as service=machined".into()));
        };
        if !is_service_id(service) {
            return Err(ApiError::BadRequest(format!(
                "service {:?} is not a service id: 1 to 63 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit",
                clip(service)
            )));
        }
        Ok(service)
    }
}

/// `^[a-z0-9][a-z0-9._-]{0,62}$`.
fn is_service_id(id: &str) -> bool {
    let mut bytes = id.bytes();
    let first = bytes.next().is_some_and(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit());
    let rest =
        |byte: u8| byte.is_ascii_lowercase() || byte.is_ascii_digit() || matches!(byte, b'.' | b'_' | b'-');
    first && id.len() <= 63 && bytes.all(rest)
}

/// At most 64 characters of a hostile value, for an error message.
fn clip(text: &str) -> String {
    text.chars().take(64).collect()
}

/// `GET /tenants/{tenant}/machines/{id}/logs`.
pub(crate) async fn logs(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    query: web::Query<LogQuery>,
) -> Result<HttpResponse, ApiError> {
    let caller = caller(&req)?;
    let (tenant, machine) = path.into_inner();
    let (service, parsed) = (query.service()?, query.parse()?);
    note_recorded_read_of(&req, &format!("service={service}"));
    let (nodes, node) = node(&state, &tenant, &machine)?;
    let slot = slot(&req, &state, parsed.follow)?;
    let request =
        LogsRequest { service: service.to_string(), follow: parsed.follow, tail_lines: Some(parsed.tail) };
    let chunks = nodes.logs(&node, request).await.map_err(|err| node_error(&node, Some(service), err))?;
    tracing::info!(user = %caller.user, tenant, machine, service, follow = parsed.follow, "reading a machine's log");
    Ok(respond(&state, chunks, slot))
}

/// `GET /tenants/{tenant}/machines/{id}/dmesg`.
pub(crate) async fn dmesg(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    query: web::Query<LogQuery>,
) -> Result<HttpResponse, ApiError> {
    let caller = caller(&req)?;
    let (tenant, machine) = path.into_inner();
    if query.service.is_some() {
        return Err(ApiError::BadRequest("service is not a parameter of dmesg, the kernel's log".into()));
    }
    let parsed = query.parse()?;
    note_recorded_read_of(&req, "service=kernel");
    let (nodes, node) = node(&state, &tenant, &machine)?;
    let slot = slot(&req, &state, parsed.follow)?;
    let failed = |err| node_error(&node, None, err);
    // How many lines the kernel log holds now, to start `tail` before its end.
    let held = count_lines(nodes.dmesg(&node, false).await.map_err(failed)?).await.map_err(failed)?;
    let chunks = nodes.dmesg(&node, parsed.follow).await.map_err(failed)?;
    let chunks = skip_lines(chunks, held.saturating_sub(u64::from(parsed.tail)));
    tracing::info!(user = %caller.user, tenant, machine, follow = parsed.follow, "reading a machine's kernel log");
    Ok(respond(&state, chunks, slot))
}

/// The node client and the machine's node.
fn node(
    state: &AppState,
    tenant: &str,
    machine: &str,
) -> Result<(std::sync::Arc<dyn NodeClient>, NodeRef), ApiError> {
    let node = machine_node(state.store().as_ref(), tenant, machine)?;
    let nodes = state.nodes.clone().ok_or_else(|| {
        ApiError::Unavailable("machines' logs are not available: this server has no node API client".into())
    })?;
    Ok((nodes, node))
}

/// A watch slot of the caller's for a followed log, and what checking the
/// caller again at each heartbeat takes.
fn slot(req: &HttpRequest, state: &AppState, follow: bool) -> Result<Option<Follow>, ApiError> {
    match follow {
        true => Follow::open(req, state).map(Some),
        false => Ok(None),
    }
}

/// A node's failure as the client sees it: one line, never a secret.
fn node_error(node: &NodeRef, service: Option<&str>, err: NodeError) -> ApiError {
    let machine = &node.machine;
    match err {
        NodeError::Api(api) if api.is_unknown_log() => ApiError::NotFound(format!(
            "the node of machine {machine:?} keeps no log of service {:?}",
            service.unwrap_or("kernel")
        )),
        NodeError::Credentials(err) => err.into(),
        err if err.is_unreachable() => ApiError::Unavailable(format!(
            "the node of machine {machine:?} did not answer: {}",
            err.summary()
        )),
        NodeError::Unsupported(_) => {
            ApiError::Unavailable(format!("the node of machine {machine:?} cannot be read"))
        }
        err => ApiError::BadGateway(format!("the node of machine {machine:?} failed: {}", err.summary())),
    }
}

/// The response: the chunks as they come, until the node ends them, the
/// client goes, the server shuts down or a followed log's caller may no
/// longer read it (`follow.rs`); the stream holds `follow`.
fn respond(state: &AppState, chunks: LogChunks, follow: Option<Follow>) -> HttpResponse {
    let body = follow::body(state.shutdown.clone(), chunks, follow);
    HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8")))
        .insert_header((CACHE_CONTROL, HeaderValue::from_static("no-store")))
        .insert_header(("x-accel-buffering", HeaderValue::from_static("no")))
        .insert_header(("x-content-type-options", HeaderValue::from_static("nosniff")))
        .streaming(body)
}

/// How many lines (newlines) a log read to its end holds.
async fn count_lines(mut chunks: LogChunks) -> Result<u64, NodeError> {
    let mut lines = 0;
    while let Some(chunk) = chunks.next().await {
        lines += chunk?.iter().filter(|byte| **byte == b'\n').count() as u64;
    }
    Ok(lines)
}

/// The chunks without their first `skip` lines.
fn skip_lines(chunks: LogChunks, skip: u64) -> LogChunks {
    let mut left = skip;
    Box::pin(chunks.filter_map(move |chunk| {
        let chunk = match chunk {
            Ok(bytes) if left > 0 => {
                let mut start = bytes.len();
                for (at, _) in bytes.iter().enumerate().filter(|(_, byte)| **byte == b'\n') {
                    left -= 1;
                    if left == 0 {
                        start = at + 1;
                        break;
                    }
                }
                let rest = bytes[start..].to_vec();
                (!rest.is_empty()).then_some(Ok(rest))
            }
            other => Some(other),
        };
        std::future::ready(chunk)
    }))
}

mod follow;
#[cfg(test)]
mod tests;

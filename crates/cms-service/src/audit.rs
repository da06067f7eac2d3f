//! The audit middleware: every mutating request (POST, PUT, PATCH, DELETE),
//! whether it succeeded, was denied or failed, becomes one audit record
//! before its answer leaves, so an acknowledged change is always on record.
//! So does a read whose handler asks for it ([`note_recorded_read`]): a
//! backup's download, a machine's log (with the service read as the
//! recorded path's query, [`note_recorded_read_of`]).
//!
//! A record says who asked (the caller the route's guard or the web console
//! identified, the user name a login attempted, or `anonymous`), what
//! (method, route pattern, path and the resource they name), when, and the
//! status. It is
//! built from the request line and what handlers note in the request's
//! extensions, never from a body, so no password, token or secret can reach
//! it. A failure to write it is logged and does not fail the request.
//!
//! The log keeps a bounded number of records, so requests anyone can send
//! in any number must not push out the records that matter: a record of
//! nobody ([`Kept::Anonymous`]: no valid credential and no known user name,
//! such as an unauthenticated call, a path no route serves, a login as a
//! user that does not exist, or a login whose password was not checked:
//! password login off, throttled, too many at once) is counted by
//! [`ANONYMOUS_REQUESTS`] and not written. A failed login whose password was
//! checked against a real account is kept, at most
//! [`failed_logins::KEPT_PER_USER`] per user a minute
//! ([`FailedLoginRecords`]); the rest are counted by
//! [`FAILED_LOGINS_NOT_KEPT`].

use std::time::Instant;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{Extensions, ServiceRequest, ServiceResponse};
use actix_web::http::Method;
use actix_web::middleware::Next;
use actix_web::{HttpMessage, HttpRequest, web};
use chrono::{DateTime, Utc};
use cms_auth::{Caller, Credential, Source};
use cms_model::{ANONYMOUS, AuditEntry, AuditOutcome, AuditTarget};
use metrics::counter;

use crate::API_PREFIX;
use crate::request_id::RequestId;
use crate::state::AppState;

pub(crate) mod failed_logins;

pub use failed_logins::FailedLoginRecords;

/// The counter of the records not kept because they name nobody, by status.
pub(crate) const ANONYMOUS_REQUESTS: &str = "cms_audit_anonymous_total";

/// The counter of the failed logins against a real account not kept because
/// the user's bound for the minute was reached.
pub(crate) const FAILED_LOGINS_NOT_KEPT: &str = "cms_audit_failed_logins_not_kept_total";

/// The longest name recorded, in bytes; names are at most 63, but a
/// failed create or login may carry anything.
const MAX_NAME: usize = 64;

/// The name of the resource a create made, which its path does not hold;
/// noted by the create handlers.
#[derive(Debug, Clone)]
struct CreatedName(String);

/// The user name a login attempted.
#[derive(Debug, Clone)]
struct LoginAttempt(String);

/// Notes, for the audit record, the name of the resource a create is making.
pub(crate) fn note_created(req: &HttpRequest, name: &str) {
    req.extensions_mut().insert(CreatedName(clipped(name)));
}

/// Marks a read to be recorded as a mutation is.
#[derive(Debug, Clone, Copy)]
struct RecordedRead;

/// Has this read (a GET) recorded too: a download of a tenant's etcd
/// backup, which holds every Secret of its cluster, or the console's end of
/// a sign-in at the identity provider.
pub(crate) fn note_recorded_read(req: &HttpRequest) {
    req.extensions_mut().insert(RecordedRead);
}

/// What a recorded read asked beyond its path, such as a log's
/// `service=etcd`: validated by the handler, kept as the path's query.
#[derive(Debug, Clone)]
struct ReadQuery(String);

/// Has this read recorded (as [`note_recorded_read`]) with `query`, which
/// the handler validated (it must hold no secret), as the recorded path's
/// query: a machine's log, with the service read.
pub(crate) fn note_recorded_read_of(req: &HttpRequest, query: &str) {
    note_recorded_read(req);
    req.extensions_mut().insert(ReadQuery(clipped(query)));
}

/// Notes, for the audit record, the user name a login attempts (never the
/// password).
pub(crate) fn note_login(req: &HttpRequest, user: &str) {
    req.extensions_mut().insert(LoginAttempt(clipped(user)));
}

/// Marks a login whose password was checked: it succeeded, or the
/// password was wrong. Only such a failure is kept on the log.
#[derive(Debug, Clone, Copy)]
struct PasswordChecked;

/// Notes, for the audit record, that the login's password was checked (it
/// was not when password login is off, or the login was throttled or
/// waited too long for its turn).
pub(crate) fn note_password_checked(req: &HttpRequest) {
    req.extensions_mut().insert(PasswordChecked);
}

/// Notes, for the audit record, who a sign-in at the identity provider
/// signed in: the caller it becomes.
pub(crate) fn note_sso_login(req: &HttpRequest, login: &cms_auth::SsoLogin) {
    req.extensions_mut().insert(login.caller.clone());
}

/// At most [`MAX_NAME`] bytes of `name`.
fn clipped(name: &str) -> String {
    let mut end = name.len().min(MAX_NAME);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name[..end].to_string()
}

/// Whether requests with `method` are recorded.
fn mutating(method: &Method) -> bool {
    matches!(*method, Method::POST | Method::PUT | Method::PATCH | Method::DELETE)
}

/// Runs the request and records it when it is a mutation.
pub(crate) async fn record(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let state = req.app_data::<web::Data<AppState>>().cloned();
    if !mutating(req.method()) {
        let result = next.call(req).await.map(ServiceResponse::map_into_boxed_body);
        if let Ok(response) = &result {
            let request = response.request();
            if request.extensions().contains::<RecordedRead>() {
                let mut line = RequestLine::of(request);
                line.route = request.match_pattern();
                let status = response.status().as_u16();
                let record = entry(line, Some(&request.extensions()), status, Utc::now());
                write(state, record, false).await;
            }
        }
        return result;
    }
    // Routing needs the request to itself, so what the record takes from it
    // is copied now, and the route (cheap once routed), the notes of the
    // guard and handlers read after.
    let mut line = RequestLine::of(req.request());
    let result = next.call(req).await.map(ServiceResponse::map_into_boxed_body);
    let (entry, checked) = match &result {
        Ok(response) => {
            line.route = response.request().match_pattern();
            let extensions = response.request().extensions();
            let checked = extensions.contains::<PasswordChecked>();
            (entry(line, Some(&extensions), response.status().as_u16(), Utc::now()), checked)
        }
        // No inner service answered, so nothing noted who asked.
        Err(err) => (entry(line, None, err.as_response_error().status_code().as_u16(), Utc::now()), false),
    };
    write(state, entry, checked).await;
    result
}

/// Writes `entry` to the audit log when it is kept, else counts it; a
/// failure to write is logged only. `checked`: a login's password was
/// checked.
async fn write(state: Option<web::Data<AppState>>, entry: AuditEntry, checked: bool) {
    let Some(state) = state else {
        tracing::warn!(path = entry.path, "no audit log in the application state: request not recorded");
        return;
    };
    match kept(&state, &entry, checked).await {
        Kept::Named => {}
        Kept::Anonymous => {
            counter!(ANONYMOUS_REQUESTS, "status" => entry.status.to_string()).increment(1);
            return;
        }
        Kept::OverBound => {
            counter!(FAILED_LOGINS_NOT_KEPT).increment(1);
            return;
        }
    }
    let request_id = entry.request_id.clone();
    if let Err(err) = state.audit.record(entry).await {
        tracing::warn!(request_id, error = %err, "could not write the audit record");
    }
}

/// Whether a record goes on the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kept {
    /// It names a caller, or a login of a user that exists: on the log.
    Named,
    /// It names nobody anyone could not make up: counted only.
    Anonymous,
    /// A failed login against a real account past its user's bound for the
    /// minute: counted only.
    OverBound,
}

/// Whether `entry` is kept: an authenticated caller's record always (its
/// requests count against its own rate); a login attempt's when it
/// succeeded, or when a password was checked (`checked`) for a user of this
/// server and failed, at most [`failed_logins::KEPT_PER_USER`] a minute per
/// user; nothing else. A login whose password was not checked (password
/// login off, throttled, busy) costs its sender nothing, so anyone could
/// send it in any number.
async fn kept(state: &AppState, entry: &AuditEntry, checked: bool) -> Kept {
    match who(entry) {
        Who::Caller => Kept::Named,
        Who::Anonymous => Kept::Anonymous,
        Who::Login { .. } if entry.status < 400 => Kept::Named,
        Who::Login { .. } if !checked => Kept::Anonymous,
        Who::Login { user } => match state.auth.accounts().user(user.to_string()).await {
            Ok(None) => Kept::Anonymous,
            // Unsure whether the user exists, the record is kept, within the bound.
            Ok(Some(_)) | Err(_) if state.failed_logins.admit(user, Instant::now()) => Kept::Named,
            Ok(Some(_)) | Err(_) => Kept::OverBound,
        },
    }
}

/// Whom a record names.
#[derive(Debug, PartialEq, Eq)]
enum Who<'a> {
    /// The caller the guard or the console identified.
    Caller,
    /// The user name a login attempted, unauthenticated.
    Login { user: &'a str },
    /// Nobody.
    Anonymous,
}

/// Whom `entry` names: a caller has a role; a login attempt names a local
/// user without one; anonymous records have no identity at all.
fn who(entry: &AuditEntry) -> Who<'_> {
    match (entry.actor_role, entry.actor_source.as_deref()) {
        (Some(_), _) => Who::Caller,
        (None, Some(_)) => Who::Login { user: &entry.actor },
        (None, None) => Who::Anonymous,
    }
}

/// What a record takes from the request line and the route.
#[derive(Debug)]
struct RequestLine {
    method: String,
    path: String,
    route: Option<String>,
    request_id: String,
}

impl RequestLine {
    /// The request line of `req`, without its route.
    fn of(req: &HttpRequest) -> RequestLine {
        RequestLine {
            method: req.method().as_str().to_string(),
            path: req.path().to_string(),
            route: None,
            request_id: req.extensions().get::<RequestId>().map(ToString::to_string).unwrap_or_default(),
        }
    }
}

/// The record of the request `line`, answered with `status` at `time`, with
/// what the guard and the handler noted in the request's `extensions`.
fn entry(line: RequestLine, extensions: Option<&Extensions>, status: u16, time: DateTime<Utc>) -> AuditEntry {
    let caller = extensions.and_then(Extensions::get::<Caller>);
    let attempt = extensions.and_then(Extensions::get::<LoginAttempt>);
    let (actor, actor_role, actor_token) = match (caller, attempt) {
        (Some(caller), _) => {
            let token = match &caller.credential {
                Credential::ApiToken { id } => Some(id.clone()),
                Credential::Login | Credential::Workload => None,
            };
            (caller.user.clone(), caller.role, token)
        }
        (None, Some(LoginAttempt(user))) => (user.clone(), None, None),
        (None, None) => (ANONYMOUS.to_string(), None, None),
    };
    let identity = caller.map(|caller| &caller.source).or(attempt.map(|LoginAttempt(_)| &Source::Local));
    let (actor_source, actor_issuer, actor_subject) = match identity {
        None => (None, None, None),
        Some(source) => (
            Some(source.kind().to_string()),
            source.issuer().map(str::to_string),
            Some(source.subject().map_or_else(|| clipped(&actor), clipped)),
        ),
    };
    let created = extensions.and_then(Extensions::get::<CreatedName>).map(|CreatedName(name)| name.as_str());
    let target = line.route.as_deref().and_then(|route| target(route, &line.path, created));
    let path = match extensions.and_then(Extensions::get::<ReadQuery>) {
        Some(ReadQuery(query)) => format!("{}?{query}", line.path),
        None => line.path,
    };
    AuditEntry {
        time,
        actor,
        actor_role,
        actor_token,
        actor_source,
        actor_issuer,
        actor_subject,
        method: line.method,
        route: line.route,
        path,
        target,
        status,
        outcome: AuditOutcome::of_status(status),
        request_id: line.request_id,
    }
}

/// The resource that `path`, served by the route `pattern`, names: the
/// kind of its last collection, that collection's item (or, for a create,
/// the name the handler noted) and the tenant it lives in.
fn target(pattern: &str, path: &str, created: Option<&str>) -> Option<AuditTarget> {
    // The web console's forms post to paths at the root of the same shape.
    let pattern = pattern.strip_prefix(API_PREFIX).unwrap_or(pattern);
    let path = path.strip_prefix(API_PREFIX).unwrap_or(path);
    let pairs: Vec<(&str, &str)> = pattern.split('/').zip(path.split('/')).skip(1).collect();
    let mut tenant = None;
    let mut kind = None;
    let mut name = None;
    for (index, (segment, _)) in pairs.iter().enumerate() {
        let Some(collection) = kind_of(segment) else { continue };
        let item =
            pairs.get(index + 1).filter(|(segment, _)| segment.starts_with('{')).map(|(_, value)| *value);
        if collection == "Tenant" {
            tenant = item;
        }
        kind = Some(collection);
        name = item;
    }
    let kind = kind?;
    let name = name.or(created).map(str::to_string);
    let tenant = match kind {
        "Tenant" => name.clone(),
        "NodeGroup" | "ConfigPatch" | "Machine" | "Backup" => tenant.map(str::to_string),
        _ => None,
    };
    Some(AuditTarget { kind: kind.to_string(), tenant, name })
}

/// The kind of the items of a collection segment of a route.
fn kind_of(segment: &str) -> Option<&'static str> {
    match segment {
        "tenants" => Some("Tenant"),
        "node-groups" => Some("NodeGroup"),
        "configpatches" => Some("ConfigPatch"),
        "machines" => Some("Machine"),
        "users" => Some("User"),
        "tokens" => Some("ApiToken"),
        "backups" => Some("Backup"),
        "grants" => Some("Grant"),
        _ => None,
    }
}

#[cfg(test)]
mod tests;

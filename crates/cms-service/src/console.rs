//! The web console (`cms_console`), mounted at the root beside the API: each
//! of its paths is registered as a resource whose every method is handed to
//! [`cms_console::Console::handle`], with the request translated to the
//! `http` crate's types and the answer back. The console checks sessions,
//! form tokens and permissions itself, with the same permission table and
//! `Tenancy` as the API's routes; its answers are its own HTML pages,
//! which the error shaping of `request_id.rs` leaves as they are.
//!
//! What the console notes in its answer's extensions (the caller, a sign-in
//! attempt's user name and whether its password was checked, a created
//! tenant's name) goes to the request's, so
//! that the audit record of a console form names who posted it.

use std::convert::Infallible;

use actix_web::http::StatusCode;
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::{HttpMessage, HttpRequest, HttpResponse, web};
use cms_auth::Caller;
use cms_console::{Body, CreatedName, LoginAttempt, PasswordChecked, PeerAddr, Recorded, http};
use futures_util::StreamExt;

use crate::state::AppState;

/// Marks a response as the console's, whose error pages keep their shape.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConsoleAnswer;

/// Registers every path of the console.
pub(crate) fn mount(cfg: &mut web::ServiceConfig) {
    for path in cms_console::PATHS {
        cfg.service(web::resource(path).default_service(web::to(forward)));
    }
}

/// Hands one request to the console and its answer back.
async fn forward(req: HttpRequest, payload: web::Payload, state: web::Data<AppState>) -> HttpResponse {
    let limit = state.options.body_limit;
    let body = match payload.to_bytes_limited(limit).await {
        Ok(Ok(body)) => body,
        Ok(Err(err)) => {
            tracing::debug!(error = %err, "could not read a console request's body");
            return answer(&req, state.console.bad_request());
        }
        Err(_) => return answer(&req, state.console.payload_too_large(limit)),
    };
    let Some(request) = translate(&req, body) else {
        return answer(&req, state.console.bad_request());
    };
    let response = state.console.handle(request).await;
    answer(&req, response)
}

/// The request in the `http` crate's types, with the connection's peer
/// address, which sign-ins count their failures by.
fn translate(req: &HttpRequest, body: web::Bytes) -> Option<cms_console::Request> {
    let mut request = http::Request::new(body);
    *request.method_mut() = http::Method::from_bytes(req.method().as_str().as_bytes()).ok()?;
    *request.uri_mut() = http::Uri::try_from(req.uri().to_string()).ok()?;
    let headers = request.headers_mut();
    for (name, value) in req.headers() {
        let name = http::HeaderName::from_bytes(name.as_str().as_bytes()).ok()?;
        headers.append(name, http::HeaderValue::from_bytes(value.as_bytes()).ok()?);
    }
    if let Some(peer) = req.peer_addr() {
        request.extensions_mut().insert(PeerAddr(peer.ip()));
    }
    Some(request)
}

/// The console's answer as the framework's, with its notes for the audit
/// record moved to the request.
fn answer(req: &HttpRequest, response: cms_console::Response) -> HttpResponse {
    let (parts, body) = response.into_parts();
    if let Some(caller) = parts.extensions.get::<Caller>() {
        req.extensions_mut().insert(caller.clone());
    }
    if let Some(LoginAttempt(user)) = parts.extensions.get::<LoginAttempt>() {
        crate::audit::note_login(req, user);
    }
    if parts.extensions.get::<PasswordChecked>().is_some() {
        crate::audit::note_password_checked(req);
    }
    if let Some(CreatedName(name)) = parts.extensions.get::<CreatedName>() {
        crate::audit::note_created(req, name);
    }
    if parts.extensions.get::<Recorded>().is_some() {
        crate::audit::note_recorded_read(req);
    }
    let status = StatusCode::from_u16(parts.status.as_u16()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = match body {
        Body::Full(bytes) => HttpResponse::build(status).body(bytes),
        Body::Stream(stream) => HttpResponse::build(status).streaming(stream.map(Ok::<_, Infallible>)),
        // An error cuts the transfer off: the client sees a broken download.
        Body::Fallible(stream) => HttpResponse::build(status).streaming(stream),
    };
    // The console's headers replace the framework's defaults, such as the
    // content type of a stream.
    let headers = response.headers_mut();
    for name in parts.headers.keys() {
        if let Ok(name) = HeaderName::from_bytes(name.as_str().as_bytes()) {
            headers.remove(name);
        }
    }
    for (name, value) in &parts.headers {
        let Ok(name) = HeaderName::from_bytes(name.as_str().as_bytes()) else { continue };
        let Ok(value) = HeaderValue::from_bytes(value.as_bytes()) else { continue };
        headers.append(name, value);
    }
    response.extensions_mut().insert(ConsoleAnswer);
    response
}

//! Responses: pages, redirects and plain text. A page or action returns an
//! [`Outcome`], so that a step that refuses (no session, a wrong form token,
//! a missing permission) ends it with `?` and its own answer.

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, LOCATION};
use http::{HeaderValue, StatusCode};
use maud::Markup;

use crate::{Body, Response};

/// What a page or action answers: `Err` holds the answer of a step that
/// refused, which is sent as it is.
pub(crate) type Outcome = Result<Response, Refused>;

/// The answer of a step that refused, boxed, as it travels up with `?`.
pub(crate) type Refused = Box<Response>;

/// `outcome`, whether it went through or was refused, with the name a
/// create made or tried to make in its extensions, for the audit record.
pub(crate) fn noting_created(outcome: Outcome, name: String) -> Outcome {
    let mut outcome = outcome;
    let response = match &mut outcome {
        Ok(response) => response,
        Err(refused) => refused.as_mut(),
    };
    response.extensions_mut().insert(crate::CreatedName(name));
    outcome
}

/// A response with `status` and a whole body.
pub(crate) fn bytes(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response {
    let mut response = Response::new(Body::Full(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// An HTML page. Pages show who is signed in and what they may see, so no
/// cache keeps them.
pub(crate) fn html(status: StatusCode, markup: Markup) -> Response {
    let mut response = bytes(status, "text/html; charset=utf-8", markup.into_string());
    response.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Plain text, for answers that no person reads as a page.
pub(crate) fn text(status: StatusCode, message: &'static str) -> Response {
    bytes(status, "text/plain; charset=utf-8", message)
}

/// `303 See Other` to `location`, a path on this site. A location that
/// cannot be a header goes to the tenants page instead.
pub(crate) fn redirect(location: &str) -> Response {
    let mut response = Response::new(Body::Full(Bytes::new()));
    *response.status_mut() = StatusCode::SEE_OTHER;
    let value = HeaderValue::from_str(location).unwrap_or_else(|_| HeaderValue::from_static("/"));
    response.headers_mut().insert(LOCATION, value);
    response.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

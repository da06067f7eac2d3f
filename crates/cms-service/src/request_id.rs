//! The outermost middleware: gives every request an id (the `x-request-id`
//! response header), logs internal errors with it, and makes sure that every
//! error response, the framework's included, has the API's error shape;
//! the web console's pages are left as they are.

use std::fmt;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::StatusCode;
use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};
use actix_web::middleware::Next;
use actix_web::{HttpMessage, HttpResponse, ResponseError};
use tracing::Instrument;
use uuid::Uuid;

use crate::console::ConsoleAnswer;
use crate::error::{ApiError, ErrorBody, INTERNAL_MESSAGE};

/// The response header that carries the request id.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// The id of one request, kept in the request's extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestId(pub Uuid);

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

impl RequestId {
    fn insert_into(self, headers: &mut HeaderMap) {
        let mut buffer = Uuid::encode_buffer();
        let text = self.0.hyphenated().encode_lower(&mut buffer);
        if let Ok(value) = HeaderValue::from_str(text) {
            headers.insert(HeaderName::from_static(REQUEST_ID_HEADER), value);
        }
    }
}

/// Tags the request with its id and shapes the error responses. The id is
/// the one of the request's root span (`tracing-actix-web`), so that log
/// lines, traces, the `x-request-id` header and error bodies agree; without
/// root spans ([`crate::ServiceOptions::request_spans`]) it is a new one, in
/// a span of its own.
pub(crate) async fn assign(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let span_id = req.extensions().get::<tracing_actix_web::RequestId>().map(|id| **id);
    let id = RequestId(span_id.unwrap_or_else(Uuid::new_v4));
    req.extensions_mut().insert(id);
    // Without the root span, a small one names the request id on every
    // line logged while the request is served.
    let served = match span_id {
        Some(_) => next.call(req).await,
        None => next.call(req).instrument(tracing::info_span!("request", request_id = %id)).await,
    };
    let mut response = match served {
        Ok(response) => response.map_into_boxed_body(),
        // An error that no inner service turned into a response; the
        // dispatcher will render the shaped one.
        Err(err) => {
            let status = err.as_response_error().status_code();
            let body = shape(status, Some(&err), id)
                .or_else(|| err.as_error::<ApiError>().map(ErrorBody::from))
                .unwrap_or_else(|| ErrorBody::for_status(status, INTERNAL_MESSAGE.to_string()));
            return Err(Shaped { body, id }.into());
        }
    };
    // The web console's answers are pages of its own, error pages included.
    let console = response.response().extensions().contains::<ConsoleAnswer>();
    if !console && let Some(body) = shape(response.status(), response.response().error(), id) {
        response = response.into_response(body.into_response());
    }
    tracing::debug!(
        request_id = %id,
        method = %response.request().method(),
        path = response.request().path(),
        status = response.status().as_u16(),
        "request served"
    );
    id.insert_into(response.headers_mut());
    Ok(response)
}

/// The body that replaces an error response, when it needs replacing: 500s
/// get the request id, and errors not raised as [`ApiError`] get its shape.
fn shape(status: StatusCode, error: Option<&actix_web::Error>, id: RequestId) -> Option<ErrorBody> {
    if !status.is_client_error() && !status.is_server_error() {
        return None;
    }
    let mut body = match error.and_then(|err| err.as_error::<ApiError>()) {
        Some(api) if api.code() == "Internal" => {
            tracing::error!(request_id = %id, error = %api, "request failed");
            ErrorBody::from(api)
        }
        Some(_) => return None,
        None if status.is_server_error() => {
            let detail = error.map(ToString::to_string).unwrap_or_default();
            tracing::error!(request_id = %id, error = %detail, status = status.as_u16(), "request failed");
            ErrorBody::for_status(status, INTERNAL_MESSAGE.to_string())
        }
        None => {
            let message = match error {
                Some(err) => err.to_string(),
                None => status.canonical_reason().unwrap_or("request failed").to_lowercase(),
            };
            ErrorBody::for_status(status, message)
        }
    };
    if body.code == "Internal" {
        body.request_id = Some(id.to_string());
    }
    Some(body)
}

/// An error already in the API's shape, for the dispatcher to render.
#[derive(Debug)]
struct Shaped {
    body: ErrorBody,
    id: RequestId,
}

impl fmt::Display for Shaped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.body.error)
    }
}

impl ResponseError for Shaped {
    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.body.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> HttpResponse {
        let body = ErrorBody {
            error: self.body.error.clone(),
            code: self.body.code,
            status: self.body.status,
            request_id: self.body.request_id.clone(),
        };
        let mut response = body.into_response();
        self.id.insert_into(response.headers_mut());
        response
    }
}

//! The API's error type and the one place where failures become HTTP
//! statuses and `{"error", "code", "status"}` bodies.

use std::error::Error as StdError;
use std::fmt::Write as _;

use actix_web::http::StatusCode;
use actix_web::http::header::{ALLOW, CONTENT_TYPE, HeaderValue, RETRY_AFTER, WWW_AUTHENTICATE};
use actix_web::{HttpResponse, ResponseError};
use cms_auth::AuthError;
use cms_model::{FieldError, ParseError};
use cms_store::StoreError;
use cms_talos::TalosError;
use cms_tenancy::TenancyError;
use serde::Serialize;

/// The message that a 500 body carries in place of the details, which are
/// logged with the request id instead.
pub const INTERNAL_MESSAGE: &str = "internal server error";

/// A failed request, by the class of failure the client sees.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Malformed JSON, a bad query parameter, a path that disagrees with the body.
    #[error("{0}")]
    BadRequest(String),
    /// A missing, malformed, expired or revoked token, or a failed login.
    #[error("{0}")]
    Unauthorized(String),
    /// The caller's role may not do this.
    #[error("{0}")]
    Forbidden(String),
    /// Too many failed logins, requests or open watch streams; retry after
    /// this many seconds.
    #[error("{message}")]
    TooManyRequests { message: String, retry_after: u64 },
    /// No such resource, parent tenant or route.
    #[error("{0}")]
    NotFound(String),
    /// The path exists but does not serve this method; `allow` lists the
    /// methods it serves, for the `Allow` header.
    #[error("method {method} is not allowed on this path")]
    MethodNotAllowed { method: String, allow: &'static str },
    /// A stale `resourceVersion`, a duplicate name or a refused write.
    #[error("{0}")]
    Conflict(String),
    /// A watch asked to resume from a revision the event log no longer holds.
    #[error("{0}")]
    Gone(String),
    /// The body is over the configured limit.
    #[error("request body is larger than the limit of {limit} bytes")]
    PayloadTooLarge { limit: usize },
    /// The body is not `application/json`.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// The body parses but breaks a rule; the message names the field.
    #[error("{0}")]
    Invalid(String),
    /// A dependency is not ready, such as the projection before any apply.
    #[error("{0}")]
    Unavailable(String),
    /// Anything unexpected. The message is logged, never sent.
    #[error("{0}")]
    Internal(String),
    /// A machine's node answered with an error (one line, never a secret).
    #[error("{0}")]
    BadGateway(String),
}

impl ApiError {
    /// An internal error that keeps the whole chain of `err` for the log.
    pub fn internal(err: &(dyn StdError + 'static)) -> ApiError {
        let mut message = err.to_string();
        let mut source = err.source();
        while let Some(cause) = source {
            let _ = write!(message, ": {cause}");
            source = cause.source();
        }
        ApiError::Internal(message)
    }

    /// The error class name sent as `code`.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::BadRequest(_) => "BadRequest",
            ApiError::Unauthorized(_) => "Unauthorized",
            ApiError::Forbidden(_) => "Forbidden",
            ApiError::TooManyRequests { .. } => "TooManyRequests",
            ApiError::NotFound(_) => "NotFound",
            ApiError::MethodNotAllowed { .. } => "MethodNotAllowed",
            ApiError::Conflict(_) => "Conflict",
            ApiError::Gone(_) => "Gone",
            ApiError::PayloadTooLarge { .. } => "PayloadTooLarge",
            ApiError::UnsupportedMediaType(_) => "UnsupportedMediaType",
            ApiError::Invalid(_) => "Invalid",
            ApiError::Unavailable(_) => "Unavailable",
            ApiError::Internal(_) => "Internal",
            ApiError::BadGateway(_) => "BadGateway",
        }
    }

    /// The message sent as `error`: the display text, except for internal
    /// errors, whose details stay in the log.
    pub fn public_message(&self) -> String {
        match self {
            ApiError::Internal(_) => INTERNAL_MESSAGE.to_string(),
            other => other.to_string(),
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::Gone(_) => StatusCode::GONE,
            ApiError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::BadGateway(_) => StatusCode::BAD_GATEWAY,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = ErrorBody::from(self).into_response();
        let headers = response.headers_mut();
        match self {
            ApiError::Unauthorized(_) => {
                headers.insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            ApiError::TooManyRequests { retry_after, .. } => {
                headers.insert(RETRY_AFTER, HeaderValue::from(*retry_after));
            }
            ApiError::MethodNotAllowed { allow, .. } => {
                headers.insert(ALLOW, HeaderValue::from_static(allow));
            }
            _ => {}
        }
        response
    }
}

/// Maps every store failure to its status. Internal failures keep their
/// cause for the log; the response shows only a generic message.
impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> ApiError {
        match err {
            StoreError::NotFound(_) => ApiError::NotFound(err.to_string()),
            StoreError::AlreadyExists(_)
            | StoreError::Conflict { .. }
            | StoreError::Refused(_)
            | StoreError::LeaseLost { .. } => ApiError::Conflict(err.to_string()),
            StoreError::Gone { .. } => ApiError::Gone(err.to_string()),
            StoreError::Future { .. } => ApiError::BadRequest(err.to_string()),
            StoreError::Invalid { .. } => ApiError::Invalid(err.to_string()),
            StoreError::Unavailable(_) => ApiError::Unavailable(err.to_string()),
            StoreError::Corrupt(_) | StoreError::Database(_) => ApiError::internal(&err),
        }
    }
}

/// Maps every authentication failure to its status.
impl From<AuthError> for ApiError {
    fn from(err: AuthError) -> ApiError {
        match err {
            AuthError::Unauthorized(message) => ApiError::Unauthorized(message.to_string()),
            AuthError::Rejected(message) => ApiError::Unauthorized(message),
            AuthError::Forbidden { .. } | AuthError::NotAllowed(_) => ApiError::Forbidden(err.to_string()),
            AuthError::SsoNotConfigured => ApiError::NotFound(err.to_string()),
            AuthError::ProviderUnavailable(_) => ApiError::Unavailable(err.to_string()),
            AuthError::TooManyAttempts { retry_after }
            | AuthError::LoginsBusy { retry_after }
            | AuthError::TooManyRequests { retry_after, .. }
            | AuthError::TooManyWatches { retry_after, .. } => {
                ApiError::TooManyRequests { message: err.to_string(), retry_after }
            }
            AuthError::TooManyTokens { .. } | AuthError::TooManyGrants { .. } => {
                ApiError::Conflict(err.to_string())
            }
            AuthError::TenantNotFound { .. } => ApiError::NotFound(err.to_string()),
            AuthError::NotGrantable(message) => ApiError::BadRequest(message),
            AuthError::Invalid(field) => field.into(),
            AuthError::Store(store) => store.into(),
            AuthError::Crypto(_) => ApiError::internal(&err),
        }
    }
}

/// Maps every Talos failure to its status. Rendering inputs and patches
/// come from stored resources, so a failure there is a conflict with the
/// tenant's state (409); sealing, keys and encodings are internal.
impl From<TalosError> for ApiError {
    fn from(err: TalosError) -> ApiError {
        match err {
            TalosError::UnsupportedVersion { .. } => ApiError::Invalid(err.to_string()),
            TalosError::InvalidInput(_) | TalosError::Patch { .. } => ApiError::Conflict(err.to_string()),
            TalosError::Crypto(_)
            | TalosError::Corrupt(_)
            | TalosError::UnknownKey { .. }
            | TalosError::Unseal { .. }
            | TalosError::WrongKey { .. }
            | TalosError::InvalidKey(_)
            | TalosError::KeyFile { .. }
            | TalosError::Encode(_) => ApiError::internal(&err),
        }
    }
}

/// Maps every failure of a tenant operation to its status.
impl From<TenancyError> for ApiError {
    fn from(err: TenancyError) -> ApiError {
        match err {
            TenancyError::Invalid(field) => field.into(),
            TenancyError::NotFound(_) => ApiError::NotFound(err.to_string()),
            TenancyError::Conflict(_) | TenancyError::NoSecrets(_) => ApiError::Conflict(err.to_string()),
            TenancyError::NotReady(_) => ApiError::Unavailable(err.to_string()),
            TenancyError::Store(store) => store.into(),
            TenancyError::Talos(talos) => talos.into(),
            TenancyError::Corrupt { .. } | TenancyError::Credentials(_) | TenancyError::Task(_) => {
                ApiError::internal(&err)
            }
        }
    }
}

impl From<ParseError> for ApiError {
    fn from(err: ParseError) -> ApiError {
        match err {
            ParseError::Malformed(message) => ApiError::BadRequest(format!("malformed JSON: {message}")),
            ParseError::Invalid(field) => field.into(),
        }
    }
}

impl From<FieldError> for ApiError {
    fn from(err: FieldError) -> ApiError {
        ApiError::Invalid(err.to_string())
    }
}

/// The wire shape of every error.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Error, example = json!({"error": "tenant \"demo\" not found", "code": "NotFound", "status": 404}))]
pub(crate) struct ErrorBody {
    /// What went wrong, for people; never internals.
    pub(crate) error: String,
    /// The error class.
    #[schema(value_type = String, pattern = "^[A-Za-z]+$", example = "NotFound")]
    pub(crate) code: &'static str,
    /// The HTTP status, repeated.
    #[schema(minimum = 400, maximum = 599)]
    pub(crate) status: u16,
    /// On 500 only: the id under which the details are logged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) request_id: Option<String>,
}

impl From<&ApiError> for ErrorBody {
    fn from(err: &ApiError) -> ErrorBody {
        ErrorBody {
            error: err.public_message(),
            code: err.code(),
            status: err.status_code().as_u16(),
            request_id: None,
        }
    }
}

impl ErrorBody {
    /// The body for a status raised outside the handlers, named after the
    /// closest error class.
    pub(crate) fn for_status(status: StatusCode, message: String) -> ErrorBody {
        let code = match status.as_u16() {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            405 => "MethodNotAllowed",
            409 => "Conflict",
            410 => "Gone",
            413 => "PayloadTooLarge",
            415 => "UnsupportedMediaType",
            422 => "Invalid",
            429 => "TooManyRequests",
            503 => "Unavailable",
            500..=599 => "Internal",
            _ => "BadRequest",
        };
        ErrorBody { error: message, code, status: status.as_u16(), request_id: None }
    }

    pub(crate) fn into_response(self) -> HttpResponse {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        // Serializing strings and integers cannot fail; the fallback keeps
        // the shape should it ever.
        let bytes = serde_json::to_vec(&self).unwrap_or_else(|_| {
            format!(r#"{{"error":"{INTERNAL_MESSAGE}","code":"Internal","status":500}}"#).into_bytes()
        });
        HttpResponse::build(status)
            .insert_header((CONTENT_TYPE, HeaderValue::from_static("application/json")))
            .body(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::body::to_bytes;

    fn check(err: StoreError, status: u16, code: &str) {
        let api = ApiError::from(err);
        assert_eq!(api.status_code().as_u16(), status, "{api}");
        assert_eq!(api.code(), code, "{api}");
    }

    #[test]
    fn store_errors_map_to_statuses() {
        check(StoreError::NotFound("tenant \"a\"".into()), 404, "NotFound");
        check(StoreError::AlreadyExists("tenant \"a\"".into()), 409, "Conflict");
        check(StoreError::Conflict { what: "tenant".into(), expected: 1, current: 2 }, 409, "Conflict");
        check(StoreError::Refused("tenant is being deleted".into()), 409, "Conflict");
        check(StoreError::LeaseLost { name: "tenant/a".into(), epoch: 2 }, 409, "Conflict");
        check(StoreError::Gone { requested: 1, compacted: 5 }, 410, "Gone");
        check(StoreError::Future { requested: 9, current: 5 }, 400, "BadRequest");
        let over = StoreError::Invalid { field: "spec.count".into(), message: "over the limit".into() };
        check(over, 422, "Invalid");
        check(StoreError::Corrupt("row 3".into()), 500, "Internal");
    }

    #[test]
    fn talos_errors_map_to_statuses() {
        let check = |err: TalosError, status: u16| {
            let api = ApiError::from(err);
            assert_eq!(api.status_code().as_u16(), status, "{api}");
        };
        check(TalosError::UnsupportedVersion { version: "1.7.0".into(), reason: "old" }, 422);
        check(TalosError::Patch { patch: "p".into(), message: "no such path".into() }, 409);
        check(TalosError::InvalidInput("no endpoint".into()), 409);
        check(TalosError::Unseal { key_id: "k1".into() }, 500);
        check(TalosError::WrongKey { key_id: "k1".into() }, 500);
    }

    #[actix_web::test]
    async fn internal_bodies_hide_details() {
        let err = ApiError::from(StoreError::Corrupt("select * from secret_table".into()));
        assert!(err.to_string().contains("secret_table"), "the log keeps the details");
        let response = err.error_response();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = to_bytes(response.into_body()).await.unwrap_or_default();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        assert_eq!(body["error"], INTERNAL_MESSAGE);
        assert_eq!(body["code"], "Internal");
        assert_eq!(body["status"], 500);
    }

    #[test]
    fn parse_errors_split_into_400_and_422() {
        let malformed = ApiError::from(ParseError::Malformed("eof".into()));
        assert_eq!(malformed.status_code(), StatusCode::BAD_REQUEST);
        let invalid =
            ApiError::from(ParseError::Invalid(FieldError::new("spec.count", "must be at least 1")));
        assert_eq!(invalid.status_code(), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(invalid.to_string(), "spec.count: must be at least 1");
    }
}

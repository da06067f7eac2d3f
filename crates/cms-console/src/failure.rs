//! Failures as the console shows them: a status and a message for people.
//! Failures of the application layer, the store and authentication get the
//! statuses the API gives them (`cms-service`'s `error.rs`); internal ones
//! are logged with their causes and shown as a generic message.

use std::error::Error as StdError;
use std::fmt::Write as _;

use cms_auth::AuthError;
use cms_backup::BackupError;
use cms_store::StoreError;
use cms_talos::TalosError;
use cms_tenancy::TenancyError;
use http::StatusCode;
use maud::html;

use crate::Response;
use crate::layout;
use crate::session::Session;

/// The message shown for an internal failure, whose details are logged.
pub(crate) const INTERNAL_MESSAGE: &str = "Something went wrong on the server. The details are in its log.";

/// A failed page or action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Failure {
        Failure { status, message: message.into() }
    }

    /// An internal failure: the chain of `err` goes to the log only.
    pub(crate) fn internal(err: &(dyn StdError + 'static)) -> Failure {
        let mut detail = err.to_string();
        let mut source = err.source();
        while let Some(cause) = source {
            let _ = write!(detail, ": {cause}");
            source = cause.source();
        }
        tracing::error!(error = %detail, "console request failed");
        Failure::new(StatusCode::INTERNAL_SERVER_ERROR, INTERNAL_MESSAGE)
    }

    /// The failure as a page, with the navigation when someone is signed in.
    pub(crate) fn page(&self, session: Option<&Session>) -> Response {
        let title = self.status.canonical_reason().unwrap_or("Error");
        let body = html! {
            h1 { (title) }
            p #failure .failure { (self.message) }
            p { a href="/" { "Back to the tenants" } }
        };
        layout::respond(self.status, title, session, body)
    }
}

impl From<TenancyError> for Failure {
    fn from(err: TenancyError) -> Failure {
        match err {
            TenancyError::Invalid(field) => Failure::new(StatusCode::UNPROCESSABLE_ENTITY, field.to_string()),
            TenancyError::NotFound(_) => Failure::new(StatusCode::NOT_FOUND, err.to_string()),
            TenancyError::Conflict(_) | TenancyError::NoSecrets(_) => {
                Failure::new(StatusCode::CONFLICT, err.to_string())
            }
            TenancyError::NotReady(_) => Failure::new(StatusCode::SERVICE_UNAVAILABLE, err.to_string()),
            TenancyError::Store(store) => store.into(),
            TenancyError::Talos(talos) => talos.into(),
            TenancyError::Corrupt { .. } | TenancyError::Credentials(_) | TenancyError::Task(_) => {
                Failure::internal(&err)
            }
        }
    }
}

impl From<StoreError> for Failure {
    fn from(err: StoreError) -> Failure {
        match err {
            StoreError::NotFound(_) => Failure::new(StatusCode::NOT_FOUND, err.to_string()),
            StoreError::AlreadyExists(_)
            | StoreError::Conflict { .. }
            | StoreError::Refused(_)
            | StoreError::LeaseLost { .. } => Failure::new(StatusCode::CONFLICT, err.to_string()),
            StoreError::Gone { .. } => Failure::new(StatusCode::GONE, err.to_string()),
            StoreError::Future { .. } => Failure::new(StatusCode::BAD_REQUEST, err.to_string()),
            StoreError::Invalid { .. } => Failure::new(StatusCode::UNPROCESSABLE_ENTITY, err.to_string()),
            StoreError::Unavailable(_) => Failure::new(StatusCode::SERVICE_UNAVAILABLE, err.to_string()),
            StoreError::Corrupt(_) | StoreError::Database(_) => Failure::internal(&err),
        }
    }
}

impl From<TalosError> for Failure {
    fn from(err: TalosError) -> Failure {
        match err {
            TalosError::UnsupportedVersion { .. } => {
                Failure::new(StatusCode::UNPROCESSABLE_ENTITY, err.to_string())
            }
            TalosError::InvalidInput(_) | TalosError::Patch { .. } => {
                Failure::new(StatusCode::CONFLICT, err.to_string())
            }
            TalosError::Crypto(_)
            | TalosError::Corrupt(_)
            | TalosError::UnknownKey { .. }
            | TalosError::Unseal { .. }
            | TalosError::WrongKey { .. }
            | TalosError::InvalidKey(_)
            | TalosError::KeyFile { .. }
            | TalosError::Encode(_) => Failure::internal(&err),
        }
    }
}

impl From<BackupError> for Failure {
    /// The statuses of the API's backup routes (`cms-service`'s `backups.rs`).
    fn from(err: BackupError) -> Failure {
        match err {
            BackupError::TenantNotFound(_)
            | BackupError::BackupNotFound { .. }
            | BackupError::NotFound(_) => Failure::new(StatusCode::NOT_FOUND, err.to_string()),
            BackupError::Busy(_)
            | BackupError::NoControlPlane { .. }
            | BackupError::Node { .. }
            | BackupError::Tampered
            | BackupError::Checksum
            | BackupError::Malformed(_) => Failure::new(StatusCode::CONFLICT, err.to_string()),
            BackupError::InvalidKey(_) | BackupError::Io(_) | BackupError::Key(_) => Failure::internal(&err),
        }
    }
}

impl From<AuthError> for Failure {
    fn from(err: AuthError) -> Failure {
        match err {
            AuthError::Unauthorized(message) => Failure::new(StatusCode::UNAUTHORIZED, message),
            AuthError::Rejected(message) => Failure::new(StatusCode::UNAUTHORIZED, message),
            AuthError::Forbidden { .. } | AuthError::NotAllowed(_) => {
                Failure::new(StatusCode::FORBIDDEN, err.to_string())
            }
            AuthError::SsoNotConfigured => Failure::new(StatusCode::NOT_FOUND, err.to_string()),
            AuthError::ProviderUnavailable(_) => {
                Failure::new(StatusCode::SERVICE_UNAVAILABLE, err.to_string())
            }
            AuthError::TooManyAttempts { .. }
            | AuthError::LoginsBusy { .. }
            | AuthError::TooManyRequests { .. }
            | AuthError::TooManyWatches { .. } => {
                Failure::new(StatusCode::TOO_MANY_REQUESTS, err.to_string())
            }
            AuthError::TooManyTokens { .. } | AuthError::TooManyGrants { .. } => {
                Failure::new(StatusCode::CONFLICT, err.to_string())
            }
            AuthError::TenantNotFound { .. } => Failure::new(StatusCode::NOT_FOUND, err.to_string()),
            AuthError::NotGrantable(message) => Failure::new(StatusCode::BAD_REQUEST, message),
            AuthError::Invalid(field) => Failure::new(StatusCode::UNPROCESSABLE_ENTITY, field.to_string()),
            AuthError::Store(store) => store.into(),
            AuthError::Crypto(_) => Failure::internal(&err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_take_the_api_s_statuses() {
        let check =
            |failure: Failure, status: u16| assert_eq!(failure.status.as_u16(), status, "{failure:?}");
        check(TenancyError::NotFound("tenant \"a\"".into()).into(), 404);
        check(TenancyError::Store(StoreError::AlreadyExists("tenant \"a\"".into())).into(), 409);
        check(TenancyError::NotReady("no endpoint".into()).into(), 503);
        check(AuthError::Forbidden { role: "view", action: "delete tenants" }.into(), 403);
        check(AuthError::TooManyAttempts { retry_after: 9 }.into(), 429);
        check(AuthError::LoginsBusy { retry_after: 1 }.into(), 429);
        check(AuthError::TooManyTokens { user: "a".into(), cap: 100 }.into(), 409);
        check(BackupError::BackupNotFound { tenant: "a".into(), id: "b".into() }.into(), 404);
        check(BackupError::Busy("a".into()).into(), 409);
        check(BackupError::Tampered.into(), 409);
        check(BackupError::Io(std::io::Error::other("disk")).into(), 500);
        let internal = Failure::from(StoreError::Corrupt("select * from secrets".into()));
        assert_eq!(internal.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(!internal.message.contains("secrets"), "internals stay in the log");
    }
}

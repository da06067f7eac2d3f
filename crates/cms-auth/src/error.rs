//! The errors of authentication and authorization.

use cms_model::FieldError;
use cms_store::StoreError;

/// Why a caller was turned away, or a user or token write failed.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// No credential, or one that is malformed, expired, revoked or wrong.
    /// The message never says which user exists.
    #[error("{0}")]
    Unauthorized(&'static str),
    /// The caller's role may not do this.
    #[error("role {role} may not {action}")]
    Forbidden { role: &'static str, action: &'static str },
    /// Too many failed logins for this user; retry after this many seconds.
    #[error("too many failed logins; retry in {retry_after} s")]
    TooManyAttempts { retry_after: u64 },
    /// A field breaks a rule.
    #[error(transparent)]
    Invalid(#[from] FieldError),
    /// The store failed or refused.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Hashing or signing failed.
    #[error("credential processing failed: {0}")]
    Crypto(String),
}

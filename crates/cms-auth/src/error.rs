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
    /// A token from an identity provider or a trusted issuer that does not
    /// verify, or whose holder has no role; the message says which check
    /// failed and never echoes the token.
    #[error("{0}")]
    Rejected(String),
    /// Not allowed here, whatever the role: password login turned off, an
    /// API token for a user who is not local.
    #[error("{0}")]
    NotAllowed(String),
    /// Single sign-on is not configured on this server.
    #[error("single sign-on is not configured")]
    SsoNotConfigured,
    /// The identity provider or trusted issuer cannot be reached.
    #[error("{0}")]
    ProviderUnavailable(String),
    /// The caller has no access to this tenant at all: it is answered as
    /// a tenant that does not exist, with the same message.
    #[error("tenant {tenant:?} not found")]
    TenantNotFound { tenant: String },
    /// The caller's role may not do this.
    #[error("role {role} may not {action}")]
    Forbidden { role: &'static str, action: &'static str },
    /// Too many failed logins for this user from this address, or from this
    /// address altogether; retry after this many seconds.
    #[error("too many failed logins; retry in {retry_after} s")]
    TooManyAttempts { retry_after: u64 },
    /// As many password checks run as the server allows at once, and none
    /// freed up within a short wait; retry after this many seconds.
    #[error("too many logins in progress; retry in {retry_after} s")]
    LoginsBusy { retry_after: u64 },
    /// The user holds as many API tokens as one user may.
    #[error("user {user:?} has {cap} API tokens, the most one user may hold; revoke one first")]
    TooManyTokens { user: String, cap: usize },
    /// There are as many grants as there may be.
    #[error("there are {cap} grants, the most this server keeps; delete one first")]
    TooManyGrants { cap: usize },
    /// A role that grants may not give: `admin` stays global.
    #[error("{0}")]
    NotGrantable(String),
    /// An identity is over its request rate; retry after this many seconds.
    #[error(
        "too many requests: at most {rate} per second per identity, in bursts of {burst}; retry in {retry_after} s"
    )]
    TooManyRequests { rate: u32, burst: u32, retry_after: u64 },
    /// An identity holds as many watch streams open as it may.
    #[error("too many open watch streams: at most {bound} per identity; close one and retry")]
    TooManyWatches { bound: usize, retry_after: u64 },
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

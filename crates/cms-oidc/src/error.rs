//! [`OidcError`]: what went wrong talking to an issuer or checking its token.

/// A failure of discovery, key fetching, the code exchange or a token check.
#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    /// The issuer could not be reached, or answered with an HTTP error.
    #[error("the identity provider {issuer} is unavailable: {reason}")]
    Unavailable { issuer: String, reason: String },
    /// The issuer answered with something that is not OpenID Connect.
    #[error("the identity provider {issuer} answered badly: {reason}")]
    Provider { issuer: String, reason: String },
    /// The token does not verify; the reason names the check that failed.
    #[error("{0}")]
    Rejected(String),
    /// The token's `exp` has passed.
    #[error("token expired")]
    Expired,
    /// The token endpoint refused the authorization code.
    #[error("the identity provider refused the authorization code: {0}")]
    CodeRefused(String),
    /// A URL or setting is not usable.
    #[error("invalid OpenID Connect configuration: {0}")]
    Config(String),
}

impl OidcError {
    /// Whether the issuer itself failed (a retry may help), rather than the
    /// token or the code.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, OidcError::Unavailable { .. } | OidcError::Provider { .. })
    }
}

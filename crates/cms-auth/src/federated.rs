//! Identities from elsewhere: the sign-in at the OpenID Connect provider
//! (begun and finished on any replica, its state signed), the login token
//! of a signed-in user whose role follows its groups on every request, and
//! the tokens of trusted workload issuers.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use cms_oidc::{AuthorizationRequest, CodeFlow, Expected, Issuer, OidcError, Transport};
use secrecy::SecretString;
use serde::Deserialize;

use crate::authenticator::Authenticator;
use crate::error::AuthError;
use crate::identity::{Caller, Credential, Source};
use crate::jwt::{ISSUER, SsoClaims};
use crate::sso::{SsoOptions, WorkloadTrust};

/// The longest user name taken from an identity provider, in bytes.
const MAX_USER_NAME: usize = 256;

/// Single sign-on as configured, with its provider's client.
pub(crate) struct SsoSetup {
    options: SsoOptions,
    flow: CodeFlow,
}

impl SsoSetup {
    pub(crate) fn new(options: SsoOptions, transport: Arc<dyn Transport>) -> SsoSetup {
        let issuer = Arc::new(Issuer::new(&options.issuer, transport));
        let flow = CodeFlow::new(issuer, &options.client_id, options.client_secret.clone(), &options.scopes);
        SsoSetup { options, flow }
    }
}

/// One trusted workload issuer.
pub(crate) struct Workload {
    trust: WorkloadTrust,
    issuer: Issuer,
}

impl Workload {
    pub(crate) fn new(trust: WorkloadTrust, transport: Arc<dyn Transport>) -> Workload {
        let mut issuer = Issuer::new(&trust.issuer, transport);
        if let Some(url) = &trust.jwks_url {
            issuer = issuer.with_jwks_url(url);
        }
        Workload { trust, issuer }
    }
}

/// A finished sign-in: this server's login token for the user.
#[derive(Debug, Clone)]
pub struct SsoLogin {
    pub token: String,
    pub expires_at: DateTime<Utc>,
    /// Who signed in, as the token's requests will be seen.
    pub caller: Caller,
}

/// The `iss` of a JWT, when it is not this server's: unverified, only to
/// choose who verifies it.
pub(crate) fn foreign_issuer(bearer: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Peek {
        iss: Option<String>,
    }
    let peek = jsonwebtoken::dangerous::insecure_decode_claims::<Peek>(bearer).ok()?;
    peek.iss.filter(|iss| iss != ISSUER)
}

fn provider_error(err: OidcError) -> AuthError {
    match err {
        OidcError::Expired => AuthError::Unauthorized("token expired"),
        OidcError::Rejected(reason) | OidcError::CodeRefused(reason) => AuthError::Rejected(reason),
        err @ (OidcError::Unavailable { .. } | OidcError::Provider { .. }) => {
            tracing::warn!(error = %err, "an identity provider failed");
            AuthError::ProviderUnavailable(err.to_string())
        }
        OidcError::Config(reason) => AuthError::Rejected(reason),
    }
}

impl Authenticator {
    /// Whether single sign-on is configured.
    pub fn sso_enabled(&self) -> bool {
        self.sso.is_some()
    }

    /// The provider's issuer URL, when single sign-on is configured.
    pub fn sso_issuer(&self) -> Option<&str> {
        self.sso.as_ref().map(|sso| sso.options.issuer.as_str())
    }

    /// Begins a sign-in that returns to `redirect_uri` and will present the
    /// PKCE verifier of `code_challenge`: the provider's URL to send the
    /// browser to. The state in it is signed and lives 10 minutes.
    pub async fn sso_begin(&self, redirect_uri: &str, code_challenge: &str) -> Result<String, AuthError> {
        let sso = self.sso.as_ref().ok_or(AuthError::SsoNotConfigured)?;
        let valid = (43..=128).contains(&code_challenge.len())
            && code_challenge.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !valid {
            return Err(cms_model::FieldError::new(
                "codeChallenge",
                "must be a PKCE S256 challenge: 43 to 128 base64url characters",
            )
            .into());
        }
        let nonce = hex::encode(crate::random::bytes::<16>()?);
        let state = self.tokens.issue_state(&nonce, redirect_uri, code_challenge)?;
        let request = AuthorizationRequest {
            redirect_uri: redirect_uri.to_string(),
            state,
            nonce,
            code_challenge: code_challenge.to_string(),
        };
        sso.flow.authorization_url(&request).await.map_err(provider_error)
    }

    /// Finishes a sign-in: `state` must be one this server signed for the
    /// same `redirect_uri`, `verifier` must match its challenge, and the
    /// provider's ID token must verify with its nonce. The user's groups
    /// must grant a role, or a grant must name one of them. Returns this
    /// server's login token for the user.
    pub async fn sso_finish(
        &self,
        code: &str,
        state: &str,
        verifier: &SecretString,
        redirect_uri: &str,
    ) -> Result<SsoLogin, AuthError> {
        let sso = self.sso.as_ref().ok_or(AuthError::SsoNotConfigured)?;
        let state = self.tokens.verify_state(state)?;
        if state.redirect_uri != redirect_uri {
            return Err(AuthError::Unauthorized(
                "the sign-in came back to another address than it began with",
            ));
        }
        if cms_oidc::pkce_challenge(verifier) != state.challenge {
            return Err(AuthError::Unauthorized("the PKCE verifier does not match the sign-in"));
        }
        let claims =
            sso.flow.sign_in(code, verifier, redirect_uri, &state.nonce).await.map_err(provider_error)?;
        let options = &sso.options;
        let user = claims
            .string(&options.username_claim)
            .filter(|name| {
                !name.is_empty() && name.len() <= MAX_USER_NAME && !name.chars().any(char::is_control)
            })
            .ok_or_else(|| {
                AuthError::Rejected(format!(
                    "the ID token has no usable {:?} claim to name the user",
                    options.username_claim
                ))
            })?
            .to_string();
        let groups = claims.strings(&options.groups_claim);
        let sso_claims = SsoClaims { iss: options.issuer.clone(), sub: claims.subject().to_string(), groups };
        let caller = Caller {
            role: options.roles.role_of(&sso_claims.groups),
            source: Source::Sso { issuer: sso_claims.iss.clone(), subject: sso_claims.sub.clone() },
            groups: sso_claims.groups.clone(),
            ..Caller::local(&user, None, Credential::Login)
        };
        let caller = self.with_grants(caller).await.map_err(|err| match err {
            AuthError::Rejected(_) => AuthError::NotAllowed(format!(
                "{user} signed in, but none of their groups grants a role on this server or is named by a grant"
            )),
            err => err,
        })?;
        let (token, expires_at) = self.tokens.issue_with(&user, Some(sso_claims))?;
        tracing::info!(
            user,
            role = caller.role_name(),
            grants = caller.grants.iter().count(),
            "signed in at the identity provider"
        );
        Ok(SsoLogin { token, expires_at, caller })
    }

    /// The caller of a login token from a sign-in: its role follows its
    /// groups under the current mapping, so a mapping removed applies at
    /// once. `None` when no group grants one; then it needs a grant
    /// ([`Authenticator::with_grants`]).
    pub(crate) fn sso_caller(&self, user: String, claims: SsoClaims) -> Result<Caller, AuthError> {
        let sso = self
            .sso
            .as_ref()
            .filter(|sso| sso.options.issuer == claims.iss)
            .ok_or(AuthError::Unauthorized("invalid token"))?;
        let role = sso.options.roles.role_of(&claims.groups);
        Ok(Caller {
            user,
            role,
            credential: Credential::Login,
            source: Source::Sso { issuer: claims.iss, subject: claims.sub },
            groups: claims.groups,
            grants: Default::default(),
        })
    }

    /// The caller of a workload token from `issuer`: the issuer must be
    /// trusted and the token verify against its keys with the trusted
    /// audience; its role is the highest its subject patterns give, `None`
    /// when none matches (then it needs a grant).
    pub(crate) async fn authenticate_workload(
        &self,
        issuer: &str,
        bearer: &str,
    ) -> Result<Caller, AuthError> {
        let workload = self
            .workloads
            .iter()
            .find(|workload| workload.trust.issuer == issuer)
            .ok_or(AuthError::Unauthorized("tokens of this issuer are not trusted"))?;
        let expected = Expected { audience: workload.trust.audience.clone(), nonce: None };
        let claims = workload.issuer.verify(bearer, &expected).await.map_err(provider_error)?;
        let subject = claims.subject().to_string();
        Ok(Caller {
            user: subject.clone(),
            role: workload.trust.role_of(&subject),
            credential: Credential::Workload,
            source: Source::Workload { issuer: issuer.to_string(), subject },
            groups: Vec::new(),
            grants: Default::default(),
        })
    }
}

//! [`CodeFlow`]: the authorization code flow with PKCE for a confidential
//! client, on the `oauth2` crate: the URL a browser is sent to, and the code
//! it comes back with exchanged for an ID token that is then verified.

use std::sync::Arc;

use oauth2::basic::{
    BasicErrorResponse, BasicRevocationErrorResponse, BasicTokenIntrospectionResponse, BasicTokenType,
};
use oauth2::{
    AuthType, AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, ExtraTokenFields,
    PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, RequestTokenError, Scope, StandardRevocableToken,
    StandardTokenResponse, TokenUrl,
};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use crate::claims::Claims;
use crate::error::OidcError;
use crate::issuer::{Expected, Issuer};

/// A fresh PKCE pair: the S256 challenge that goes into the authorization
/// URL, and the verifier that only the party exchanging the code holds.
pub fn pkce_pair() -> (String, SecretString) {
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    (challenge.as_str().to_string(), SecretString::from(verifier.secret().clone()))
}

/// The S256 challenge of a PKCE `verifier`.
pub fn pkce_challenge(verifier: &SecretString) -> String {
    let verifier = PkceCodeVerifier::new(verifier.expose_secret().to_string());
    PkceCodeChallenge::from_code_verifier_sha256(&verifier).as_str().to_string()
}

/// What one sign-in puts into its authorization URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizationRequest {
    /// Where the provider sends the browser back with the code.
    pub redirect_uri: String,
    /// Echoed back with the code; binds the answer to this sign-in.
    pub state: String,
    /// Echoed in the ID token; binds the token to this sign-in.
    pub nonce: String,
    /// The PKCE S256 challenge of the verifier the exchange will present.
    pub code_challenge: String,
}

/// The ID token of a token endpoint's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct IdToken {
    id_token: String,
}

impl ExtraTokenFields for IdToken {}

/// An `oauth2` client whose authorization and token endpoints are `A` and `T`.
type ClientWith<A, T> = oauth2::Client<
    BasicErrorResponse,
    StandardTokenResponse<IdToken, BasicTokenType>,
    BasicTokenIntrospectionResponse,
    StandardRevocableToken,
    BasicRevocationErrorResponse,
    A,
    oauth2::EndpointNotSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointNotSet,
    T,
>;
type Client = ClientWith<oauth2::EndpointSet, oauth2::EndpointSet>;

/// A transport failure, as `oauth2` wants it: an error type.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct SendError(String);

/// The sign-in of one confidential client at one issuer.
pub struct CodeFlow {
    issuer: Arc<Issuer>,
    client_id: String,
    client_secret: SecretString,
    scopes: Vec<String>,
}

impl std::fmt::Debug for CodeFlow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeFlow")
            .field("issuer", &self.issuer.url())
            .field("client_id", &self.client_id)
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

impl CodeFlow {
    /// The client `client_id` with `client_secret` at `issuer`, asking for
    /// `scopes` (`openid` is always asked for).
    pub fn new(
        issuer: Arc<Issuer>,
        client_id: &str,
        client_secret: SecretString,
        scopes: &[String],
    ) -> CodeFlow {
        let mut scopes: Vec<String> = scopes.to_vec();
        if !scopes.iter().any(|scope| scope == "openid") {
            scopes.insert(0, "openid".into());
        }
        CodeFlow { issuer, client_id: client_id.to_string(), client_secret, scopes }
    }

    /// The issuer signed in at.
    pub fn issuer(&self) -> &Arc<Issuer> {
        &self.issuer
    }

    async fn client(&self, redirect_uri: &str) -> Result<Client, OidcError> {
        let metadata = self.issuer.metadata().await?;
        let provider =
            |reason: &str| OidcError::Provider { issuer: self.issuer.url().into(), reason: reason.into() };
        let auth = metadata.authorization_endpoint.ok_or_else(|| provider("no authorization_endpoint"))?;
        let token = metadata.token_endpoint.ok_or_else(|| provider("no token_endpoint"))?;
        let auth = AuthUrl::new(auth).map_err(|err| provider(&format!("authorization_endpoint: {err}")))?;
        let token = TokenUrl::new(token).map_err(|err| provider(&format!("token_endpoint: {err}")))?;
        let redirect = RedirectUrl::new(redirect_uri.to_string())
            .map_err(|err| OidcError::Config(format!("redirect URI {redirect_uri:?}: {err}")))?;
        // client_secret_basic unless the provider only takes the secret in the body.
        let methods = metadata.token_endpoint_auth_methods_supported.unwrap_or_default();
        let post_only = !methods.is_empty()
            && !methods.iter().any(|m| m == "client_secret_basic")
            && methods.iter().any(|m| m == "client_secret_post");
        Ok(ClientWith::<oauth2::EndpointNotSet, oauth2::EndpointNotSet>::new(ClientId::new(
            self.client_id.clone(),
        ))
        .set_client_secret(ClientSecret::new(self.client_secret.expose_secret().to_string()))
        .set_auth_uri(auth)
        .set_token_uri(token)
        .set_redirect_uri(redirect)
        .set_auth_type(if post_only { AuthType::RequestBody } else { AuthType::BasicAuth }))
    }

    /// The provider's authorization URL for `request`.
    pub async fn authorization_url(&self, request: &AuthorizationRequest) -> Result<String, OidcError> {
        let client = self.client(&request.redirect_uri).await?;
        let state = request.state.clone();
        let (url, _) = client
            .authorize_url(move || CsrfToken::new(state))
            .add_scopes(self.scopes.iter().map(|scope| Scope::new(scope.clone())))
            .add_extra_param("nonce", &request.nonce)
            .add_extra_param("code_challenge", &request.code_challenge)
            .add_extra_param("code_challenge_method", "S256")
            .url();
        Ok(url.to_string())
    }

    /// Exchanges `code` (with the PKCE `verifier`, at the same
    /// `redirect_uri`) for an ID token, and verifies it: this client as its
    /// audience and `nonce` as its nonce.
    pub async fn sign_in(
        &self,
        code: &str,
        verifier: &SecretString,
        redirect_uri: &str,
        nonce: &str,
    ) -> Result<Claims, OidcError> {
        let client = self.client(redirect_uri).await?;
        let transport = self.issuer.transport().clone();
        let http = move |request: oauth2::HttpRequest| {
            let transport = transport.clone();
            async move { transport.send(request).await.map_err(SendError) }
        };
        let response = client
            .exchange_code(AuthorizationCode::new(code.to_string()))
            .set_pkce_verifier(PkceCodeVerifier::new(verifier.expose_secret().to_string()))
            .request_async(&http)
            .await
            .map_err(|err| self.exchange_error(err))?;
        let id_token = &response.extra_fields().id_token;
        let expected = Expected { audience: self.client_id.clone(), nonce: Some(nonce.to_string()) };
        self.issuer.verify(id_token, &expected).await
    }

    fn exchange_error(&self, err: RequestTokenError<SendError, BasicErrorResponse>) -> OidcError {
        let issuer = self.issuer.url().to_string();
        match err {
            RequestTokenError::ServerResponse(response) => {
                let mut reason = response.error().to_string();
                if let Some(description) = response.error_description() {
                    reason = format!("{reason}: {description}");
                }
                OidcError::CodeRefused(reason)
            }
            RequestTokenError::Request(err) => OidcError::Unavailable { issuer, reason: err.to_string() },
            RequestTokenError::Parse(err, _) => {
                OidcError::Provider { issuer, reason: format!("token endpoint answer: {err}") }
            }
            RequestTokenError::Other(reason) => OidcError::Provider { issuer, reason },
        }
    }
}

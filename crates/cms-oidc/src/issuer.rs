//! [`Issuer`]: a trusted issuer's discovery document and keys, cached, and
//! the verification of the tokens it signs.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Validation, decode, decode_header};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::claims::Claims;
use crate::error::OidcError;
use crate::keys::{ALLOWED, select};
use crate::transport::{Transport, get_json};

/// How long a discovery document is used before it is fetched again.
const METADATA_TTL: Duration = Duration::from_secs(3600);
/// How long a key set is used before it is fetched again.
const KEYS_TTL: Duration = Duration::from_secs(300);
/// The least time, by default, between two fetches of the key set prompted
/// by a token naming a key the set lacks, so that forged key ids cannot make
/// the server hammer the issuer.
const MIN_REFETCH: Duration = Duration::from_secs(5);
/// Clock skew tolerated on `exp`, `nbf` and `iat`.
const LEEWAY_SECONDS: u64 = 30;

/// The fields of an issuer's discovery document that are used.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Metadata {
    pub issuer: String,
    #[serde(default)]
    pub authorization_endpoint: Option<String>,
    #[serde(default)]
    pub token_endpoint: Option<String>,
    pub jwks_uri: String,
    #[serde(default)]
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
}

/// What a token must hold besides a good signature, `iss`, `exp` and `nbf`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    /// One of the token's `aud` must be exactly this.
    pub audience: String,
    /// When set, the token's `nonce` must be exactly this (ID tokens).
    pub nonce: Option<String>,
}

#[derive(Debug)]
struct Cached<T> {
    value: T,
    fetched: Instant,
}

/// One trusted issuer. Nothing is fetched until a token needs it, so a
/// server starts while its identity provider is down.
pub struct Issuer {
    url: String,
    jwks_url: Option<String>,
    transport: Arc<dyn Transport>,
    min_refetch: Duration,
    metadata: Mutex<Option<Cached<Metadata>>>,
    keys: Mutex<Option<Cached<JwkSet>>>,
    /// Held while the key set is fetched, so that concurrent misses fetch once.
    fetching: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Issuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issuer")
            .field("url", &self.url)
            .field("jwks_url", &self.jwks_url)
            .finish_non_exhaustive()
    }
}

impl Issuer {
    /// The issuer whose identifier (`iss`) is `url`; its discovery document
    /// is at `<url>/.well-known/openid-configuration`.
    pub fn new(url: &str, transport: Arc<dyn Transport>) -> Issuer {
        Issuer {
            url: url.to_string(),
            jwks_url: None,
            transport,
            min_refetch: MIN_REFETCH,
            metadata: Mutex::new(None),
            keys: Mutex::new(None),
            fetching: tokio::sync::Mutex::new(()),
        }
    }

    /// Takes the keys from `url` instead of the discovery document's
    /// `jwks_uri`, for issuers that publish no discovery document.
    pub fn with_jwks_url(mut self, url: &str) -> Issuer {
        self.jwks_url = Some(url.to_string());
        self
    }

    /// Lets a token naming an unknown key fetch the key set again once
    /// `interval` has passed since the last fetch (5 s by default).
    pub fn with_min_refetch(mut self, interval: Duration) -> Issuer {
        self.min_refetch = interval;
        self
    }

    /// The issuer's identifier.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub(crate) fn transport(&self) -> &Arc<dyn Transport> {
        &self.transport
    }

    /// The discovery document, fetched once an hour at most. Its `issuer`
    /// must be this issuer's identifier.
    pub async fn metadata(&self) -> Result<Metadata, OidcError> {
        if let Some(cached) = self.metadata.lock().unwrap_or_else(|p| p.into_inner()).as_ref()
            && cached.fetched.elapsed() < METADATA_TTL
        {
            return Ok(cached.value.clone());
        }
        let url = format!("{}/.well-known/openid-configuration", self.url.trim_end_matches('/'));
        let metadata: Metadata = get_json(self.transport.as_ref(), &self.url, &url).await?;
        if metadata.issuer.trim_end_matches('/') != self.url.trim_end_matches('/') {
            return Err(OidcError::Provider {
                issuer: self.url.clone(),
                reason: format!("the discovery document names the issuer {:?}", metadata.issuer),
            });
        }
        *self.metadata.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(Cached { value: metadata.clone(), fetched: Instant::now() });
        Ok(metadata)
    }

    /// Checks `token`: an allowed asymmetric algorithm, a signature by one of
    /// the issuer's current keys, `iss` exactly this issuer, `aud` holding
    /// the expected audience, `exp` and `nbf` (30 s of leeway), `sub`, and
    /// the nonce when one is expected.
    pub async fn verify(&self, token: &str, expected: &Expected) -> Result<Claims, OidcError> {
        let header = decode_header(token).map_err(|_| OidcError::Rejected("invalid token".into()))?;
        if !ALLOWED.contains(&header.alg) {
            return Err(OidcError::Rejected(format!("tokens signed with {:?} are not accepted", header.alg)));
        }
        let key = self.key(header.kid.as_deref(), header.alg).await?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.url]);
        validation.set_audience(&[&expected.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = LEEWAY_SECONDS;
        let data = decode::<Map<String, Value>>(token, &key, &validation).map_err(rejection)?;
        let claims = Claims(data.claims);
        if let Some(nonce) = &expected.nonce
            && claims.string("nonce") != Some(nonce.as_str())
        {
            return Err(OidcError::Rejected("the ID token's nonce does not match the sign-in".into()));
        }
        Ok(claims)
    }

    /// The key for `kid` and `alg`: from the cached set while it is fresh,
    /// else from a fetched one; a key the cached set lacks makes it fetch
    /// again, at most every `min_refetch`.
    async fn key(
        &self,
        kid: Option<&str>,
        alg: jsonwebtoken::Algorithm,
    ) -> Result<jsonwebtoken::DecodingKey, OidcError> {
        let cached = |max_age: Duration| {
            let keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
            keys.as_ref()
                .filter(|keys| keys.fetched.elapsed() < max_age)
                .map(|keys| select(&keys.value, kid, alg))
        };
        if let Some(Some(key)) = cached(KEYS_TTL) {
            return Ok(key);
        }
        let _fetching = self.fetching.lock().await;
        // Another request may have fetched while this one waited.
        match cached(self.min_refetch) {
            Some(Some(key)) => return Ok(key),
            Some(None) => return Err(unknown_key(kid)),
            None => {}
        }
        let url = match &self.jwks_url {
            Some(url) => url.clone(),
            None => self.metadata().await?.jwks_uri,
        };
        let set: JwkSet = get_json(self.transport.as_ref(), &self.url, &url).await?;
        let key = select(&set, kid, alg);
        *self.keys.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(Cached { value: set, fetched: Instant::now() });
        key.ok_or_else(|| unknown_key(kid))
    }
}

fn unknown_key(kid: Option<&str>) -> OidcError {
    match kid {
        Some(kid) => OidcError::Rejected(format!(
            "the token is signed with key {kid:?}, which the issuer does not publish"
        )),
        None => OidcError::Rejected("the token names no key and the issuer publishes no single one".into()),
    }
}

fn rejection(err: jsonwebtoken::errors::Error) -> OidcError {
    use jsonwebtoken::errors::ErrorKind;
    let reason = match err.kind() {
        ErrorKind::ExpiredSignature => return OidcError::Expired,
        ErrorKind::ImmatureSignature => "the token is not valid yet",
        ErrorKind::InvalidAudience => "the token is not meant for this audience",
        ErrorKind::InvalidIssuer => "the token's issuer does not match",
        ErrorKind::InvalidSignature => "the token's signature does not verify",
        ErrorKind::MissingRequiredClaim(_) => "the token lacks a required claim",
        _ => "invalid token",
    };
    OidcError::Rejected(reason.into())
}

#[cfg(test)]
mod tests;

//! Test support: signing keys whose JWKs an issuer can publish, and
//! [`FakeIssuer`], a [`Transport`] that serves one issuer's discovery
//! document and key set from memory, with keys that can be rotated.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

use crate::transport::Transport;

/// An ES256 signing key with its id.
#[derive(Clone)]
pub struct TestKey {
    kid: String,
    encoding: EncodingKey,
    jwk: Jwk,
}

impl std::fmt::Debug for TestKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestKey").field("kid", &self.kid).finish_non_exhaustive()
    }
}

impl TestKey {
    /// A fresh P-256 key named `kid`.
    pub fn generate(kid: &str) -> TestKey {
        let pair =
            rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("generate a P-256 key");
        let encoding = EncodingKey::from_ec_pem(pair.serialize_pem().as_bytes()).expect("read the key");
        let mut jwk = Jwk::from_encoding_key(&encoding, Algorithm::ES256).expect("the key's JWK");
        jwk.common.key_id = Some(kid.to_string());
        TestKey { kid: kid.to_string(), encoding, jwk }
    }

    /// The key's id.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The public key as a JWK.
    pub fn jwk(&self) -> &Jwk {
        &self.jwk
    }

    /// `claims` signed with this key, its id in the header.
    pub fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding).expect("sign")
    }
}

/// The claims of a token from `issuer` for `audience` about `subject`,
/// valid from a minute ago for `lifetime_seconds` (negative: expired).
pub fn claims(issuer: &str, audience: &str, subject: &str, lifetime_seconds: i64) -> Value {
    let now = jsonwebtoken::get_current_timestamp() as i64;
    json!({"iss": issuer, "aud": audience, "sub": subject, "iat": now - 60, "nbf": now - 60,
        "exp": now + lifetime_seconds})
}

/// An issuer's documents served from memory: the discovery document at
/// `<url>/.well-known/openid-configuration` and the key set at
/// `<url>/keys`. Anything else is a 404.
#[derive(Debug)]
pub struct FakeIssuer {
    url: String,
    keys: Mutex<Vec<TestKey>>,
    key_fetches: AtomicUsize,
}

impl FakeIssuer {
    /// The issuer `url` publishing `keys`.
    pub fn new(url: &str, keys: Vec<TestKey>) -> Arc<FakeIssuer> {
        Arc::new(FakeIssuer {
            url: url.to_string(),
            keys: Mutex::new(keys),
            key_fetches: AtomicUsize::new(0),
        })
    }

    /// The issuer's identifier.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Publishes `keys` instead of the current ones.
    pub fn publish(&self, keys: Vec<TestKey>) {
        *self.keys.lock().unwrap() = keys;
    }

    /// How many times the key set was fetched.
    pub fn key_fetches(&self) -> usize {
        self.key_fetches.load(Ordering::SeqCst)
    }

    /// The discovery document.
    pub fn discovery(&self) -> Value {
        json!({
            "issuer": self.url,
            "authorization_endpoint": format!("{}/authorize", self.url),
            "token_endpoint": format!("{}/token", self.url),
            "jwks_uri": format!("{}/keys", self.url),
        })
    }

    /// The published key set.
    pub fn key_set(&self) -> Value {
        let keys = self.keys.lock().unwrap();
        serde_json::to_value(JwkSet { keys: keys.iter().map(|key| key.jwk.clone()).collect() }).expect("JWKS")
    }
}

#[async_trait]
impl Transport for FakeIssuer {
    async fn send(&self, request: http::Request<Vec<u8>>) -> Result<http::Response<Vec<u8>>, String> {
        let url = request.uri().to_string();
        let body = if url == format!("{}/.well-known/openid-configuration", self.url) {
            Some(self.discovery())
        } else if url == format!("{}/keys", self.url) {
            self.key_fetches.fetch_add(1, Ordering::SeqCst);
            Some(self.key_set())
        } else {
            None
        };
        let (status, body) = match body {
            Some(body) => (200, serde_json::to_vec(&body).unwrap()),
            None => (404, Vec::new()),
        };
        http::Response::builder().status(status).body(body).map_err(|err| err.to_string())
    }
}

/// Several fake issuers behind one transport, each answering under its URL.
#[derive(Debug)]
pub struct FakeIssuers(pub Vec<Arc<FakeIssuer>>);

#[async_trait]
impl Transport for FakeIssuers {
    async fn send(&self, request: http::Request<Vec<u8>>) -> Result<http::Response<Vec<u8>>, String> {
        let url = request.uri().to_string();
        match self.0.iter().find(|issuer| url.starts_with(&format!("{}/", issuer.url))) {
            Some(issuer) => issuer.send(request).await,
            None => Err(format!("no fake issuer serves {url}")),
        }
    }
}

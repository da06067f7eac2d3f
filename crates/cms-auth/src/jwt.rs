//! Login tokens: HS256 JWTs with every registered claim checked and a type
//! claim, so that no other token can pass as one.

use std::time::Duration;

use chrono::{DateTime, Utc};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use secrecy::{ExposeSecret, SecretSlice};
use serde::{Deserialize, Serialize};

use crate::error::AuthError;

pub(crate) const ISSUER: &str = "cms";
const AUDIENCE: &str = "cms-api";
const TYPE: &str = "login";
/// Clock skew tolerated on `exp` and `iat`.
const LEEWAY_SECONDS: u64 = 30;

/// The claims of a login token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoginClaims {
    pub iss: String,
    pub aud: String,
    pub sub: String,
    pub iat: i64,
    pub exp: i64,
    pub jti: String,
    /// Always `login`.
    pub typ: String,
    /// Present when the user signed in at the identity provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sso: Option<SsoClaims>,
}

/// Who a signed-in user is at the identity provider, as the login token
/// carries it; the role follows from `groups` on every request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SsoClaims {
    /// The provider's issuer URL.
    pub iss: String,
    /// The user's `sub` there.
    pub sub: String,
    /// The user's groups there at sign-in.
    pub groups: Vec<String>,
}

/// The `state` of one sign-in at the identity provider: signed, short-lived
/// and holding what the return must match, so that any replica can finish
/// a sign-in that another began.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StateClaims {
    iss: String,
    aud: String,
    iat: i64,
    exp: i64,
    /// Always `sso-state`.
    typ: String,
    /// The nonce the ID token must carry.
    pub(crate) nonce: String,
    /// Where the provider sends the code; the exchange must name it again.
    pub(crate) redirect_uri: String,
    /// The PKCE S256 challenge: the exchange must present its verifier.
    pub(crate) challenge: String,
}

const STATE_AUDIENCE: &str = "cms-sso";
const STATE_TYPE: &str = "sso-state";
/// How long a sign-in at the identity provider may take.
const STATE_LIFETIME_SECONDS: i64 = 600;

/// Issues and checks login tokens.
pub struct LoginTokens {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
    state_validation: Validation,
    lifetime: Duration,
}

impl std::fmt::Debug for LoginTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginTokens").field("lifetime", &self.lifetime).finish_non_exhaustive()
    }
}

impl LoginTokens {
    /// The shortest signing key accepted, in bytes.
    pub const MIN_KEY_BYTES: usize = 32;

    /// Tokens signed with `key` that live for `lifetime`.
    pub fn new(key: &SecretSlice<u8>, lifetime: Duration) -> Result<LoginTokens, AuthError> {
        let key = key.expose_secret();
        if key.len() < Self::MIN_KEY_BYTES {
            return Err(AuthError::Crypto(format!(
                "the login signing key must be at least {} bytes",
                Self::MIN_KEY_BYTES
            )));
        }
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[ISSUER]);
        validation.set_audience(&[AUDIENCE]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.leeway = LEEWAY_SECONDS;
        let mut state_validation = validation.clone();
        state_validation.set_audience(&[STATE_AUDIENCE]);
        state_validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        Ok(LoginTokens {
            encoding: EncodingKey::from_secret(key),
            decoding: DecodingKey::from_secret(key),
            validation,
            state_validation,
            lifetime,
        })
    }

    /// A new login token for `user`, and when it expires.
    pub fn issue(&self, user: &str) -> Result<(String, DateTime<Utc>), AuthError> {
        self.issue_with(user, None)
    }

    /// A new login token for `user`, signed in at an identity provider as
    /// `sso` says when given, and when it expires.
    pub fn issue_with(
        &self,
        user: &str,
        sso: Option<SsoClaims>,
    ) -> Result<(String, DateTime<Utc>), AuthError> {
        let now = Utc::now();
        let lifetime =
            chrono::Duration::from_std(self.lifetime).map_err(|err| AuthError::Crypto(err.to_string()))?;
        let expires = now + lifetime;
        let claims = LoginClaims {
            iss: ISSUER.into(),
            aud: AUDIENCE.into(),
            sub: user.into(),
            iat: now.timestamp(),
            exp: expires.timestamp(),
            jti: hex::encode(crate::random::bytes::<16>()?),
            typ: TYPE.into(),
            sso,
        };
        let token = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .map_err(|err| AuthError::Crypto(err.to_string()))?;
        Ok((token, expires))
    }

    /// Checks a login token and returns its claims.
    pub fn verify(&self, token: &str) -> Result<LoginClaims, AuthError> {
        let data =
            jsonwebtoken::decode::<LoginClaims>(token, &self.decoding, &self.validation).map_err(|err| {
                match err.kind() {
                    jsonwebtoken::errors::ErrorKind::ExpiredSignature => {
                        AuthError::Unauthorized("token expired")
                    }
                    _ => AuthError::Unauthorized("invalid token"),
                }
            })?;
        let claims = data.claims;
        let issued_in_future = claims.iat > Utc::now().timestamp() + LEEWAY_SECONDS as i64;
        if claims.typ != TYPE || claims.jti.is_empty() || issued_in_future {
            return Err(AuthError::Unauthorized("invalid token"));
        }
        Ok(claims)
    }
}

impl LoginTokens {
    /// The signed `state` of a sign-in that returns to `redirect_uri` and
    /// will present the verifier of `challenge`.
    pub(crate) fn issue_state(
        &self,
        nonce: &str,
        redirect_uri: &str,
        challenge: &str,
    ) -> Result<String, AuthError> {
        let now = Utc::now().timestamp();
        let claims = StateClaims {
            iss: ISSUER.into(),
            aud: STATE_AUDIENCE.into(),
            iat: now,
            exp: now + STATE_LIFETIME_SECONDS,
            typ: STATE_TYPE.into(),
            nonce: nonce.into(),
            redirect_uri: redirect_uri.into(),
            challenge: challenge.into(),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .map_err(|err| AuthError::Crypto(err.to_string()))
    }

    /// The claims of a `state` this server signed, while it is fresh.
    pub(crate) fn verify_state(&self, state: &str) -> Result<StateClaims, AuthError> {
        let refused = || AuthError::Unauthorized("the sign-in is unknown or took too long; start again");
        let data = jsonwebtoken::decode::<StateClaims>(state, &self.decoding, &self.state_validation)
            .map_err(|_| refused())?;
        if data.claims.typ != STATE_TYPE {
            return Err(refused());
        }
        Ok(data.claims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(key: u8, lifetime: Duration) -> LoginTokens {
        LoginTokens::new(&SecretSlice::from(vec![key; 32]), lifetime).unwrap()
    }

    fn forge(claims: &LoginClaims, key: u8) -> String {
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), claims, &EncodingKey::from_secret(&[key; 32]))
            .unwrap()
    }

    fn claims() -> LoginClaims {
        let now = Utc::now().timestamp();
        LoginClaims {
            iss: ISSUER.into(),
            aud: AUDIENCE.into(),
            sub: "alice".into(),
            iat: now,
            exp: now + 600,
            jti: "j".into(),
            typ: TYPE.into(),
            sso: None,
        }
    }

    #[test]
    fn issued_tokens_verify() {
        let tokens = tokens(1, Duration::from_secs(3600));
        let (token, expires) = tokens.issue("alice").unwrap();
        let claims = tokens.verify(&token).unwrap();
        assert_eq!(claims.sub, "alice");
        assert_eq!(claims.exp, expires.timestamp());
    }

    #[test]
    fn every_claim_is_checked() {
        let tokens = tokens(1, Duration::from_secs(3600));
        assert!(tokens.verify(&forge(&claims(), 1)).is_ok());
        let mut expired = claims();
        expired.exp = Utc::now().timestamp() - 31;
        assert!(matches!(tokens.verify(&forge(&expired, 1)), Err(AuthError::Unauthorized("token expired"))));
        let mut within_leeway = claims();
        within_leeway.exp = Utc::now().timestamp() - 10;
        assert!(tokens.verify(&forge(&within_leeway, 1)).is_ok());
        let cases: [fn(&mut LoginClaims); 4] = [
            |c| c.aud = "other".into(),
            |c| c.iss = "other".into(),
            |c| c.typ = "api".into(),
            |c| c.iat += 3600,
        ];
        for change in cases {
            let mut bad = claims();
            change(&mut bad);
            assert!(tokens.verify(&forge(&bad, 1)).is_err(), "{bad:?}");
        }
        assert!(tokens.verify(&forge(&claims(), 2)).is_err(), "another key");
    }

    #[test]
    fn unsigned_and_other_algorithms_fail() {
        let tokens = tokens(1, Duration::from_secs(3600));
        let body = serde_json::to_vec(&claims()).unwrap();
        let encode = |bytes: &[u8]| {
            use base64::Engine;
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
        };
        let none = format!("{}.{}.", encode(br#"{"alg":"none","typ":"JWT"}"#), encode(&body));
        assert!(tokens.verify(&none).is_err());
        let hs512 = jsonwebtoken::encode(
            &Header::new(Algorithm::HS512),
            &claims(),
            &EncodingKey::from_secret(&[1; 32]),
        );
        assert!(tokens.verify(&hs512.unwrap()).is_err());
    }

    #[test]
    fn states_verify_only_as_states() {
        let tokens = tokens(1, Duration::from_secs(3600));
        let state = tokens.issue_state("n", "http://127.0.0.1:1/cb", "c").unwrap();
        let claims = tokens.verify_state(&state).unwrap();
        assert_eq!((claims.nonce.as_str(), claims.challenge.as_str()), ("n", "c"));
        assert!(tokens.verify(&state).is_err(), "a state is no login token");
        let (login, _) = tokens.issue("alice").unwrap();
        assert!(tokens.verify_state(&login).is_err(), "a login token is no state");
        assert!(self::tokens(2, Duration::from_secs(1)).verify_state(&state).is_err());
    }

    /// A state signed with this server's key `age` seconds ago, as
    /// `issue_state` would have made it then (there is no clock to move).
    fn state_issued_ago(age: i64) -> String {
        let iat = Utc::now().timestamp() - age;
        let claims = StateClaims {
            iss: ISSUER.into(),
            aud: STATE_AUDIENCE.into(),
            iat,
            exp: iat + STATE_LIFETIME_SECONDS,
            typ: STATE_TYPE.into(),
            nonce: "n".into(),
            redirect_uri: "http://127.0.0.1:1/cb".into(),
            challenge: "c".into(),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &EncodingKey::from_secret(&[1; 32]))
            .unwrap()
    }

    #[test]
    fn a_state_lives_ten_minutes_and_is_refused_after() {
        let tokens = tokens(1, Duration::from_secs(3600));
        let issued = tokens.issue_state("n", "http://127.0.0.1:1/cb", "c").unwrap();
        let data = jsonwebtoken::decode::<StateClaims>(&issued, &tokens.decoding, &tokens.state_validation);
        let claims = data.unwrap().claims;
        assert_eq!(claims.exp - claims.iat, 600, "a sign-in may take ten minutes");
        assert!(tokens.verify_state(&state_issued_ago(STATE_LIFETIME_SECONDS - 60)).is_ok());
        let late = STATE_LIFETIME_SECONDS + LEEWAY_SECONDS as i64 + 5;
        let refused = tokens.verify_state(&state_issued_ago(late));
        assert!(
            matches!(refused, Err(AuthError::Unauthorized(message)) if message.contains("took too long")),
            "{refused:?}"
        );
    }

    #[test]
    fn sso_claims_travel_in_the_token() {
        let tokens = tokens(1, Duration::from_secs(3600));
        let sso = SsoClaims { iss: "https://idp".into(), sub: "u1".into(), groups: vec!["devs".into()] };
        let (token, _) = tokens.issue_with("alice@example.com", Some(sso.clone())).unwrap();
        assert_eq!(tokens.verify(&token).unwrap().sso, Some(sso));
    }

    #[test]
    fn short_keys_are_refused() {
        assert!(LoginTokens::new(&SecretSlice::from(vec![0; 16]), Duration::from_secs(1)).is_err());
    }
}

//! `POST /api/v1/auth/login`: a user name and password for a login token;
//! `POST /api/v1/auth/sso/start` and `/token`: a sign-in at the identity
//! provider, for clients that receive the code on a loopback address.

use actix_web::http::StatusCode;
use actix_web::web;
use actix_web::{HttpRequest, HttpResponse};
use cms_model::{LoginRequest, LoginResponse, SsoStartRequest, SsoStartResponse, SsoTokenRequest};
use secrecy::SecretString;

use crate::body::JsonBody;
use crate::error::ApiError;
use crate::reply;
use crate::state::AppState;

/// 200 with `{token, expiresAt}`; 401 for wrong credentials, whether or not
/// the user exists; 429 with `Retry-After` after too many failures from the
/// client's address (the connection's peer; no forwarding header is
/// trusted), or while as many password checks run as the server allows.
/// Whether the password was checked (a success or a 401) is noted for the
/// audit record: only such a failure may be kept.
pub(crate) async fn login(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let request: LoginRequest = body.parse()?;
    crate::audit::note_login(&req, &request.username);
    let password = SecretString::from(request.password);
    let from = req.peer_addr().map(|peer| peer.ip());
    let result = state.auth.login(&request.username, &password, from).await;
    if matches!(result, Ok(_) | Err(cms_auth::AuthError::Unauthorized(_))) {
        crate::audit::note_password_checked(&req);
    }
    let (token, expires_at) = result?;
    reply::serialized(StatusCode::OK, &LoginResponse { token, expires_at })
}

/// Loopback redirect URIs, the only ones a client outside the console may
/// have the provider return to: the code can only reach the machine that
/// asked (RFC 8252's loopback interface redirection).
const LOOPBACK: [&str; 3] = ["http://127.0.0.1:", "http://[::1]:", "http://localhost:"];

fn check_loopback(redirect_uri: &str) -> Result<(), ApiError> {
    let fine = redirect_uri.len() <= 2048
        && !redirect_uri.contains('#')
        && LOOPBACK.iter().any(|prefix| {
            redirect_uri.strip_prefix(prefix).is_some_and(|rest| {
                let port = rest.split('/').next().unwrap_or_default();
                !port.is_empty() && port.parse::<u16>().is_ok()
            })
        });
    if fine {
        return Ok(());
    }
    Err(cms_model::FieldError::new(
        "redirectUri",
        "must be http:// on a loopback address with a port, such as http://127.0.0.1:8000/callback",
    )
    .into())
}

/// `POST /auth/sso/start`: the identity provider's authorization URL for a
/// sign-in that returns to the client's loopback address.
pub(crate) async fn sso_start(state: web::Data<AppState>, body: JsonBody) -> Result<HttpResponse, ApiError> {
    let request: SsoStartRequest = body.parse()?;
    if !state.auth.sso_enabled() {
        return Err(cms_auth::AuthError::SsoNotConfigured.into());
    }
    check_loopback(&request.redirect_uri)?;
    let authorization_url = state.auth.sso_begin(&request.redirect_uri, &request.code_challenge).await?;
    reply::serialized(StatusCode::OK, &SsoStartResponse { authorization_url })
}

/// `POST /auth/sso/token`: a finished sign-in's code, state and PKCE
/// verifier for a login token.
pub(crate) async fn sso_token(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let request: SsoTokenRequest = body.parse()?;
    if !state.auth.sso_enabled() {
        return Err(cms_auth::AuthError::SsoNotConfigured.into());
    }
    check_loopback(&request.redirect_uri)?;
    let verifier = SecretString::from(request.code_verifier);
    let login =
        state.auth.sso_finish(&request.code, &request.state, &verifier, &request.redirect_uri).await?;
    crate::audit::note_sso_login(&req, &login);
    reply::serialized(StatusCode::OK, &LoginResponse { token: login.token, expires_at: login.expires_at })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_addresses_with_a_port_are_redirect_uris() {
        for good in ["http://127.0.0.1:8000/callback", "http://[::1]:1/", "http://localhost:65535"] {
            assert!(check_loopback(good).is_ok(), "{good}");
        }
        let bad = [
            "https://127.0.0.1:8000/callback",
            "http://127.0.0.1/callback",
            "http://127.0.0.1:99999/",
            "http://127.0.0.1:80@evil.example/",
            "http://evil.example:80/",
            "http://localhost.evil.example:80/",
            "http://127.0.0.1:8000/#x",
        ];
        for bad in bad {
            assert!(check_loopback(bad).is_err(), "{bad}");
        }
    }
}

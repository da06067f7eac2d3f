//! Signing in at the identity provider: `GET /sso/login` begins the
//! authorization code flow with PKCE (the verifier in a short-lived
//! `HttpOnly` cookie scoped to `/sso`, the signed state in the URL), and
//! `GET /sso/callback` finishes it through `Authenticator::sso_finish`,
//! which checks the state, the verifier and the ID token, then starts the
//! session as `POST /login` does.
//!
//! The flow cookie is `SameSite=Lax`: the provider's redirect back is a
//! navigation from another site, which a `Strict` cookie would not follow.
//! For the same reason the callback answers a page that moves on to `/`
//! itself, so that the next request is a same-site one that carries the
//! `Strict` session cookie.

use http::header::{HOST, SET_COOKIE};
use http::{HeaderValue, StatusCode};
use maud::html;
use secrecy::{ExposeSecret, SecretString};

use crate::failure::Failure;
use crate::form::Form;
use crate::reply::{self, Outcome, Refused};
use crate::session;
use crate::{Console, Request, Response, layout};

/// The cookie that holds a sign-in's PKCE verifier.
const FLOW_COOKIE: &str = "cms_sso";

/// Where the provider sends the browser back: under the configured public
/// URL, else the address the browser used.
fn callback_url(console: &Console, request: &Request) -> Result<String, Refused> {
    if let Some(base) = &console.options.public_url {
        return Ok(format!("{}/sso/callback", base.trim_end_matches('/')));
    }
    let host = request.headers().get(HOST).and_then(|value| value.to_str().ok());
    let host = host.filter(|host| !host.is_empty() && !host.contains(['/', '@', ' ']));
    let Some(host) = host else {
        return Err(Failure::new(StatusCode::BAD_REQUEST, "The request names no host to come back to.")
            .page(None)
            .into());
    };
    let scheme = if console.options.secure_cookies { "https" } else { "http" };
    Ok(format!("{scheme}://{host}/sso/callback"))
}

fn flow_cookie(console: &Console, value: &str, max_age: u32) -> Result<HeaderValue, Refused> {
    let secure = if console.options.secure_cookies { "; Secure" } else { "" };
    let cookie =
        format!("{FLOW_COOKIE}={value}; HttpOnly; SameSite=Lax; Path=/sso; Max-Age={max_age}{secure}");
    HeaderValue::from_str(&cookie).map_err(|err| Failure::internal(&err).page(None).into())
}

/// `GET /sso/login`: to the identity provider.
pub(crate) async fn begin(console: &Console, request: &Request) -> Outcome {
    let redirect = callback_url(console, request)?;
    let (challenge, verifier) = cms_auth::pkce_pair();
    let url =
        console.auth.sso_begin(&redirect, &challenge).await.map_err(|err| Failure::from(err).page(None))?;
    let mut response = reply::redirect(&url);
    response.headers_mut().insert(SET_COOKIE, flow_cookie(console, verifier.expose_secret(), 600)?);
    Ok(response)
}

/// `GET /sso/callback`: the provider's answer; on success the session
/// cookie and a page that goes on to the tenants. Every answer is on the
/// audit log, named after the user when the sign-in succeeded.
pub(crate) async fn finish(console: &Console, request: &Request) -> Outcome {
    let mut response = match finish_sign_in(console, request).await {
        Ok(response) => response,
        Err(refused) => *refused,
    };
    response.extensions_mut().insert(crate::Recorded);
    Ok(response)
}

async fn finish_sign_in(console: &Console, request: &Request) -> Outcome {
    let query = Form::query(request);
    if !query.get("error").is_empty() {
        let message = format!("The identity provider did not sign you in: {}.", query.get("error"));
        return Ok(retry_page(StatusCode::UNAUTHORIZED, &message));
    }
    let verifier = session::cookie_named(request.headers(), FLOW_COOKIE).map(SecretString::from);
    let Some(verifier) = verifier else {
        let message = "This sign-in did not start in this browser, or took too long.";
        return Ok(retry_page(StatusCode::BAD_REQUEST, message));
    };
    let redirect = callback_url(console, request)?;
    let login =
        match console.auth.sso_finish(query.get("code"), query.get("state"), &verifier, &redirect).await {
            Ok(login) => login,
            Err(err) => {
                let failure = Failure::from(err);
                return Ok(retry_page(failure.status, &failure.message));
            }
        };
    let body = html! {
        h1 { "Signed in" }
        p { "Signed in as " strong #sso-user { (login.caller.user) } ". " a #continue href="/" { "Continue" } }
    };
    let refresh = html! { meta http-equiv="refresh" content="0;url=/"; };
    let mut response = layout::respond_with_head(StatusCode::OK, "Signed in", None, refresh, body);
    let headers = response.headers_mut();
    let session_cookie = HeaderValue::from_str(&session::set_cookie(console, &login.token))
        .map_err(|err| Failure::internal(&err).page(None))?;
    headers.append(SET_COOKIE, session_cookie);
    headers.append(SET_COOKIE, flow_cookie(console, "", 0)?);
    response.extensions_mut().insert(login.caller);
    Ok(response)
}

fn retry_page(status: StatusCode, message: &str) -> Response {
    let body = html! {
        h1 { "Sign-in failed" }
        p #failure .failure role="alert" { (message) }
        p { a #retry href="/login" { "Back to the sign-in page" } }
    };
    layout::respond(status, "Sign-in failed", None, body)
}

//! The session: a login token in the `cms_session` cookie, authenticated
//! exactly as a bearer token (`Authenticator::authenticate`), so a session
//! ends when its token expires or its user is deleted. The cookie is
//! `HttpOnly` (page scripts never read it), `SameSite=Strict` (other sites'
//! pages never send it) and `Secure` when the console is set up for HTTPS.
//!
//! A page asked for without a valid session redirects to
//! `/login?next=<path and query>`; [`safe_next`] keeps `next` to paths on
//! this site.

use cms_auth::{Caller, Permission};
use http::header::{self, HeaderMap};
use http::{Method, StatusCode};

use crate::failure::Failure;
use crate::form::Form;
use crate::reply::{self, Outcome, Refused};
use crate::{Console, Request, Response, csrf};

/// The session cookie's name.
pub const COOKIE: &str = "cms_session";

/// Someone signed in, with the token that proves it.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    pub(crate) caller: Caller,
    token: String,
}

impl Session {
    /// The form token of this session (`csrf.rs`).
    pub(crate) fn csrf(&self) -> String {
        csrf::token_for(&self.token)
    }

    /// Whether the caller's role holds `permission`, to show or hide a control.
    pub(crate) fn may(&self, permission: Permission) -> bool {
        permission.allows(self.caller.role)
    }

    /// Fails with the permission table's answer, as a page, unless the
    /// caller's role holds `permission`.
    pub(crate) fn require(&self, permission: Permission) -> Result<(), Refused> {
        self.caller.require(permission).map_err(|err| Failure::from(err).page(Some(self)).into())
    }

    /// Names the caller in `response`'s extensions, for the audit record.
    pub(crate) fn mark(&self, mut response: Response) -> Response {
        response.extensions_mut().insert(self.caller.clone());
        response
    }

    /// Checks the session token again, for a stream that outlives a request.
    pub(crate) async fn still_valid(&self, console: &Console) -> bool {
        console.auth.authenticate(&self.token).await.is_ok()
    }
}

/// The session the request's cookie holds, when its token is valid.
pub(crate) async fn current(console: &Console, headers: &HeaderMap) -> Option<Session> {
    let token = cookie(headers)?;
    match console.auth.authenticate(&token).await {
        Ok(caller) => Some(Session { caller, token }),
        Err(err) => {
            tracing::debug!(error = %err, "console session refused");
            None
        }
    }
}

/// The session of a request for a page, or the redirect to the sign-in
/// page that comes back to it.
pub(crate) async fn require(console: &Console, request: &Request) -> Result<Session, Refused> {
    match current(console, request.headers()).await {
        Some(session) => Ok(session),
        None => Err(to_login(request).into()),
    }
}

/// The session and the fields of a posted form, checked in order: the
/// session, the form token, then `permission`, which is the permission of
/// the API's route for the same change.
pub(crate) async fn posted(
    console: &Console,
    request: &Request,
    permission: Permission,
) -> Result<(Session, Form), Refused> {
    let session = require(console, request).await?;
    let form = Form::posted(request)?;
    csrf::check(&session, &form)?;
    session.require(permission)?;
    Ok((session, form))
}

/// `303` to the sign-in page. A page asked for with GET is where the
/// operator lands after signing in; a form posted without a session lands
/// on the tenants page.
pub(crate) fn to_login(request: &Request) -> Response {
    let wanted = request.uri().path_and_query().map(|path| path.as_str()).unwrap_or("/");
    if request.method() != Method::GET || wanted == "/" {
        return reply::redirect("/login");
    }
    let next: String = form_urlencoded::byte_serialize(wanted.as_bytes()).collect();
    reply::redirect(&format!("/login?next={next}"))
}

/// The `cms_session` cookie of the request, when it has one.
fn cookie(headers: &HeaderMap) -> Option<String> {
    cookie_named(headers, COOKIE)
}

/// The cookie `name` of the request, when it has a non-empty one.
pub(crate) fn cookie_named(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(cookie, _)| *cookie == name)
        .map(|(_, value)| value.trim().to_string())
        .filter(|value| !value.is_empty())
}

/// The `Set-Cookie` value that starts a session with `token`.
pub(crate) fn set_cookie(console: &Console, token: &str) -> String {
    let secure = if console.options.secure_cookies { "; Secure" } else { "" };
    format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/{secure}")
}

/// The `Set-Cookie` value that ends the session.
pub(crate) fn clear_cookie(console: &Console) -> String {
    let secure = if console.options.secure_cookies { "; Secure" } else { "" };
    format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0{secure}")
}

/// `next` when it is a path on this site: it starts with one `/`, holds
/// printable ASCII only, and no `\` (which some browsers read as `/`, making
/// `/\evil.example` another site). Anything else lands on the tenants page.
pub(crate) fn safe_next(next: &str) -> &str {
    let on_this_site = next.starts_with('/')
        && !next.starts_with("//")
        && next.bytes().all(|byte| byte.is_ascii_graphic() && byte != b'\\');
    if on_this_site { next } else { "/" }
}

/// The answer to a request for the event stream without a valid session:
/// `401`, which stops the browser's reconnecting.
pub(crate) fn unauthorized() -> Outcome {
    Err(reply::text(StatusCode::UNAUTHORIZED, "session expired: sign in again").into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn next_stays_on_this_site() {
        for good in ["/", "/tenants/demo", "/?q=a&page=2"] {
            assert_eq!(safe_next(good), good);
        }
        for bad in ["", "https://evil.example/", "//evil.example", "/\\evil.example", "tenants", "/a b", "/é"]
        {
            assert_eq!(safe_next(bad), "/", "{bad:?}");
        }
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.append(header::COOKIE, HeaderValue::from_static("theme=dark"));
        headers.append(header::COOKIE, HeaderValue::from_static("a=b; cms_session=tok.en; c=d"));
        assert_eq!(cookie(&headers).as_deref(), Some("tok.en"));
        let mut empty = HeaderMap::new();
        empty.append(header::COOKIE, HeaderValue::from_static("cms_session="));
        assert_eq!(cookie(&empty), None);
    }
}

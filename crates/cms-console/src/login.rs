//! Signing in and out. `POST /login` exchanges a user name and password
//! for a login token through `Authenticator::login`, with the API's
//! throttling, and keeps the token in the session cookie; `POST /logout`
//! clears the cookie. The token itself lives until it expires.

use cms_auth::AuthError;
use http::header::{RETRY_AFTER, SET_COOKIE};
use http::{HeaderValue, StatusCode};
use maud::{Markup, html};
use secrecy::SecretString;

use crate::failure::Failure;
use crate::form::Form;
use crate::reply::{self, Outcome, Refused};
use crate::session::{self, safe_next};
use crate::{Console, LoginAttempt, PasswordChecked, PeerAddr, Request, Response, csrf, layout};

/// `GET /login`: the form, or straight to `next` when already signed in.
pub(crate) async fn page(console: &Console, request: &Request) -> Outcome {
    let query = Form::query(request);
    let next = safe_next(query.get("next"));
    if session::current(console, request.headers()).await.is_some() {
        return Ok(reply::redirect(next));
    }
    Ok(form_page(console, StatusCode::OK, next, "", None))
}

/// `POST /login`: on success, the session cookie and `303` to `next`; a
/// wrong name or password shows the form again (`401`), and too many
/// failures say when to try again (`429`).
pub(crate) async fn submit(console: &Console, request: &Request) -> Outcome {
    refuse_cross_site(request)?;
    let form = Form::posted(request)?;
    let user = form.get("username").trim();
    let next = safe_next(form.get("next"));
    let password = SecretString::from(form.get("password"));
    let from = request.extensions().get::<PeerAddr>().map(|PeerAddr(ip)| *ip);
    let result = console.auth.login(user, &password, from).await;
    let checked = matches!(result, Ok(_) | Err(AuthError::Unauthorized(_)));
    let mut response = match result {
        Ok((token, _expires)) => {
            let mut response = reply::redirect(next);
            let cookie = HeaderValue::from_str(&session::set_cookie(console, &token))
                .map_err(|err| Failure::internal(&err).page(None))?;
            response.headers_mut().insert(SET_COOKIE, cookie);
            response
        }
        Err(AuthError::Unauthorized(_)) => {
            form_page(console, StatusCode::UNAUTHORIZED, next, user, Some("Invalid user name or password."))
        }
        Err(AuthError::TooManyAttempts { retry_after }) => {
            refused_for_now(console, next, user, "Too many failed sign-ins.", retry_after)
        }
        Err(AuthError::LoginsBusy { retry_after }) => {
            refused_for_now(console, next, user, "Too many sign-ins are in progress.", retry_after)
        }
        Err(err) => Failure::from(err).page(None),
    };
    response.extensions_mut().insert(LoginAttempt(user.to_string()));
    if checked {
        response.extensions_mut().insert(PasswordChecked);
    }
    Ok(response)
}

/// The form again with `429`, saying why and when to try again.
fn refused_for_now(console: &Console, next: &str, user: &str, why: &str, retry_after: u64) -> Response {
    let plural = if retry_after == 1 { "" } else { "s" };
    let message = format!("{why} Try again in {retry_after} second{plural}.");
    let mut response = form_page(console, StatusCode::TOO_MANY_REQUESTS, next, user, Some(&message));
    response.headers_mut().insert(RETRY_AFTER, HeaderValue::from(retry_after));
    response
}

/// `POST /logout`: clears the cookie and goes to the sign-in page. A
/// signed-in caller must send the form token.
pub(crate) async fn logout(console: &Console, request: &Request) -> Outcome {
    let mut response = reply::redirect("/login");
    if let Some(session) = session::current(console, request.headers()).await {
        let form = Form::posted(request)?;
        csrf::check(&session, &form)?;
        response = session.mark(response);
    }
    let cookie = HeaderValue::from_str(&session::clear_cookie(console))
        .map_err(|err| Failure::internal(&err).page(None))?;
    response.headers_mut().insert(SET_COOKIE, cookie);
    Ok(response)
}

/// A sign-in form posted from another site's page is refused: the browser
/// says so in `Sec-Fetch-Site`. Other sites cannot sign a browser in to an
/// account of theirs this way.
fn refuse_cross_site(request: &Request) -> Result<(), Refused> {
    let site = request.headers().get("sec-fetch-site").and_then(|value| value.to_str().ok());
    if site.is_some_and(|site| site.eq_ignore_ascii_case("cross-site")) {
        let message = "Sign in from this site's own sign-in page.";
        return Err(Failure::new(StatusCode::FORBIDDEN, message).page(None).into());
    }
    Ok(())
}

fn form_page(console: &Console, status: StatusCode, next: &str, user: &str, error: Option<&str>) -> Response {
    let methods = (console.auth.sso_enabled(), console.auth.password_login());
    layout::respond(status, "Sign in", None, form(methods, next, user, error))
}

/// The sign-in page: a link to the identity provider when single sign-on is
/// configured, the password form unless password login is off.
fn form((sso, password): (bool, bool), next: &str, user: &str, error: Option<&str>) -> Markup {
    html! {
        h1 { "Sign in" }
        @if let Some(error) = error {
            p #login-error .failure role="alert" { (error) }
        }
        @if sso {
            p { a #sso-login .button href="/sso/login" { "Sign in with single sign-on" } }
        }
        @if password {
            (password_form(next, user))
        }
    }
}

fn password_form(next: &str, user: &str) -> Markup {
    html! {
        form #login .stacked method="post" action="/login" {
            input type="hidden" name="next" value=(next);
            div .field data-field="username" {
                label for="username" { "User name" }
                input #username name="username" type="text" autocomplete="username" required value=(user);
            }
            div .field data-field="password" {
                label for="password" { "Password" }
                input #password name="password" type="password" autocomplete="current-password" required;
            }
            button type="submit" { "Sign in" }
        }
    }
}

//! The frame of every page: the document head with the hashed script and
//! stylesheet, a skip link, the header with the navigation, who is signed
//! in with their role and the sign-out button, a live region for the
//! script's notices, and `main`.

use cms_auth::{Permission, Source};
use http::StatusCode;
use maud::{DOCTYPE, Markup, html};

use crate::session::Session;
use crate::{Response, assets, csrf, reply};

/// A page as an answer with `status`. When someone is signed in, the
/// answer's extensions name them, for the audit record of a form they
/// posted.
pub(crate) fn respond(
    status: StatusCode,
    title: &str,
    session: Option<&Session>,
    content: Markup,
) -> Response {
    respond_with_head(status, title, session, html! {}, content)
}

/// A page as [`respond`], with `head` at the end of the document head.
pub(crate) fn respond_with_head(
    status: StatusCode,
    title: &str,
    session: Option<&Session>,
    head: Markup,
    content: Markup,
) -> Response {
    let response = reply::html(status, page(title, session, head, content));
    match session {
        Some(session) => session.mark(response),
        None => response,
    }
}

/// A whole page titled `title`, with `head` in its head and `content` in
/// `main`. Without a session the header holds the name of the service only.
fn page(title: &str, session: Option<&Session>, head: Markup, content: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · cms" }
                link rel="stylesheet" href=(assets::style_path());
                script src=(assets::script_path()) defer {}
                (head)
            }
            body {
                a .skip-link href="#main" { "Skip to the content" }
                header .site {
                    a .brand href="/" { "cms" }
                    @if let Some(session) = session {
                        nav aria-label="Main" {
                            ul {
                                li { a href="/" { "Tenants" } }
                                @if session.may(Permission::ReadAudit) {
                                    li { a #nav-audit href="/audit" { "Audit log" } }
                                }
                                @if session.may(Permission::ManageUsers) {
                                    li { a #nav-users href="/users" { "Users" } }
                                    li { a #nav-grants href="/grants" { "Grants" } }
                                }
                                @if session.caller.source == Source::Local {
                                    li { a #nav-tokens href="/tokens" { "API tokens" } }
                                }
                            }
                        }
                        div .signed-in {
                            span #user { (session.caller.user) }
                            " "
                            span #role .role { (session.role_shown()) }
                            form #sign-out method="post" action="/logout" {
                                (csrf_field(session))
                                button type="submit" { "Sign out" }
                            }
                        }
                    }
                }
                p #live-status role="status" aria-live="polite" hidden {}
                main #main tabindex="-1" { (content) }
            }
        }
    }
}

/// A time for people, with the machine-readable form beside it.
pub(crate) fn timestamp(time: chrono::DateTime<chrono::Utc>) -> Markup {
    html! { time datetime=(time.to_rfc3339()) { (time.format("%Y-%m-%d %H:%M:%S UTC")) } }
}

/// The hidden form-token field of a form that changes something.
pub(crate) fn csrf_field(session: &Session) -> Markup {
    html! { input type="hidden" name=(csrf::FIELD) value=(session.csrf()); }
}

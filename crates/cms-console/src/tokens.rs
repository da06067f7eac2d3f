//! `GET /tokens` (everyone, `Permission::OwnTokens`): the signed-in user's
//! API tokens, a form that creates one and a form per token that revokes
//! it. The forms make the `Authenticator` calls of
//! `/api/v1/users/{name}/tokens` for the signed-in user, with the same
//! permission and the same checks:
//!
//! - `POST /tokens/new`: `Authenticator::create_token`, the lifetime parsed
//!   by `ApiTokenSpec::hours` (`<number>h`). The answer is the page with the
//!   token's value in a read-only field, this once: the value is stored
//!   nowhere, and pages are `Cache-Control: no-store`. `console.js` adds a
//!   Copy button beside it.
//! - `POST /tokens/{name}/revoke`: `Authenticator::revoke_token`.
//!
//! Every one of them first makes the API's check,
//! `Caller::require_self_or_admin` for the signed-in user's name: tokens
//! belong to local users, so a caller from elsewhere (single sign-on, a
//! workload) that bears a local user's name gets `403` and no token of
//! that user, unless its role may manage users (as an admin may through the
//! API).

use chrono::{DateTime, Utc};
use cms_auth::{Permission, Source};
use cms_model::{ApiTokenSpec, FieldError, validate_name};
use cms_store::TokenRecord;
use http::StatusCode;
use maud::{Markup, html};

use crate::failure::Failure;
use crate::field::{Field, Refusal, form_error};
use crate::form::Form;
use crate::reply::{self, Outcome, Refused};
use crate::session::{self, Session};
use crate::{Console, Request, layout};

const NAME: Field = Field {
    id: "token-name",
    name: "name",
    path: "metadata.name",
    label: "Name",
    hint: Some("Lowercase letters, digits and '-', such as ci-deploy."),
};
const EXPIRES_IN: Field = Field {
    id: "token-expires-in",
    name: "expiresIn",
    path: "spec.expiresIn",
    label: "Expires in",
    hint: Some("Hours, such as 24h, or 720h for 30 days; at most 8760h."),
};

/// The lifetime the form offers first: 30 days.
const DEFAULT_EXPIRES_IN: &str = "720h";

/// What the page shows beside the list: nothing, a token just made (shown
/// this once), or the refusal of the create form.
enum Notice {
    None,
    Created { name: String, value: String, expires_at: DateTime<Utc> },
    Refused(FieldError),
}

/// The tokens page.
pub(crate) async fn page(console: &Console, request: &Request) -> Outcome {
    let session = session::require(console, request).await?;
    require_owner(&session)?;
    let values = Form::of(&[(EXPIRES_IN.name, DEFAULT_EXPIRES_IN)]);
    render(console, &session, StatusCode::OK, &values, &Notice::None).await
}

/// `POST /tokens/new`: makes a token for the signed-in user and shows its
/// value once (`201`), or the page again with the error at its field.
pub(crate) async fn create(console: &Console, request: &Request) -> Outcome {
    let name = Form::posted(request).map(|form| form.get(NAME.name).trim().to_string()).unwrap_or_default();
    let outcome = async {
        let (session, form) = session::posted(console, request, Permission::OwnTokens).await?;
        require_owner(&session)?;
        let (status, notice) = match create_token(console, &session, &form, &name).await {
            Ok(notice) => (StatusCode::CREATED, notice),
            Err(Refusal::Field(status, field)) => (status, Notice::Refused(field)),
            Err(Refusal::Page(failure)) => return Err(failure.page(Some(&session)).into()),
        };
        let values = match notice {
            Notice::Created { .. } => Form::of(&[(EXPIRES_IN.name, DEFAULT_EXPIRES_IN)]),
            _ => form,
        };
        render(console, &session, status, &values, &notice).await
    };
    reply::noting_created(outcome.await, name)
}

async fn create_token(
    console: &Console,
    session: &Session,
    form: &Form,
    name: &str,
) -> Result<Notice, Refusal> {
    let user = &session.caller.user;
    validate_name(NAME.path, name)?;
    let hours = ApiTokenSpec { expires_in: form.get(EXPIRES_IN.name).trim().to_string() }.hours()?;
    let (new, record) = console
        .auth
        .create_token(user, name, hours)
        .await
        .map_err(|err| Refusal::of_create(err, NAME.path))?;
    tracing::info!(user = %user, token = name, hours, "created an API token");
    Ok(Notice::Created { name: record.name, value: new.value, expires_at: record.expires_at })
}

/// `POST /tokens/{name}/revoke`: revokes the signed-in user's token `name`.
pub(crate) async fn revoke(console: &Console, request: &Request, name: &str) -> Outcome {
    let (session, _) = session::posted(console, request, Permission::OwnTokens).await?;
    require_owner(&session)?;
    let user = &session.caller.user;
    console.auth.revoke_token(user, name).await.map_err(|err| Failure::from(err).page(Some(&session)))?;
    tracing::info!(user = %user, token = name, "revoked an API token");
    Ok(session.mark(reply::redirect("/tokens")))
}

/// Fails, as a `403` page, unless the signed-in caller may manage the
/// tokens of the local user of its name: the API's check for
/// `/api/v1/users/{name}/tokens`.
fn require_owner(session: &Session) -> Result<(), Refused> {
    let caller = &session.caller;
    caller.require_self_or_admin(&caller.user).map_err(|err| Failure::from(err).page(Some(session)).into())
}

/// The page, with `values` in the create form and `notice` shown.
async fn render(
    console: &Console,
    session: &Session,
    status: StatusCode,
    values: &Form,
    notice: &Notice,
) -> Outcome {
    let tokens = console
        .auth
        .accounts()
        .tokens(session.caller.user.clone())
        .await
        .map_err(|err| Failure::from(err).page(Some(session)))?;
    let content = html! {
        h1 { "API tokens" }
        @if session.caller.source == Source::Local {
            p {
                "Your tokens. A token acts as " strong { (session.caller.user) } ", with your role, until it "
                "expires or is revoked. Send it as " code { "Authorization: Bearer <token>" } "."
            }
        } @else {
            p #tokens-of-local-user {
                "The tokens of the local user " strong { (session.caller.user) } ", which you manage as an "
                "admin: a token acts as that user, with that user's role, until it expires or is revoked."
            }
        }
        @if let Notice::Created { name, value, expires_at } = notice {
            (created(name, value, *expires_at))
        }
        (table(session, &tokens))
        (create_form(session, values, notice))
    };
    Ok(layout::respond(status, "API tokens", Some(session), content))
}

/// The token just made, in a read-only field, with what to do with it.
fn created(name: &str, value: &str, expires_at: DateTime<Utc>) -> Markup {
    html! {
        section #new-token .notice aria-labelledby="new-token-heading" {
            h2 #new-token-heading { "Token " (name) " created" }
            p #token-value-hint {
                "Copy it now: it is shown only this once. It expires at "
                (layout::timestamp(expires_at)) "."
            }
            div .field .secret {
                label for="token-value" { "Token" }
                input #token-value type="text" readonly value=(value) data-copy
                    spellcheck="false" autocomplete="off" aria-describedby="token-value-hint";
            }
            p #token-value-status .hint role="status" {}
        }
    }
}

fn table(session: &Session, tokens: &[TokenRecord]) -> Markup {
    html! {
        table #tokens {
            caption { "Tokens: " (tokens.len()) }
            thead {
                tr {
                    th scope="col" { "Name" }
                    th scope="col" { "Created" }
                    th scope="col" { "Expires" }
                    th scope="col" { "Last used" }
                    th scope="col" { "Revoke" }
                }
            }
            tbody {
                @for token in tokens {
                    tr data-token=(token.name) {
                        th scope="row" .name { (token.name) }
                        td .created { (layout::timestamp(token.created_at)) }
                        td .expires { (layout::timestamp(token.expires_at)) }
                        td .last-used {
                            @match token.last_used_at {
                                Some(used) => (layout::timestamp(used)),
                                None => "never",
                            }
                        }
                        td {
                            form .revoke method="post" action={ "/tokens/" (token.name) "/revoke" } {
                                (layout::csrf_field(session))
                                button .danger type="submit" { "Revoke" span .visually-hidden { " " (token.name) } }
                            }
                        }
                    }
                }
            }
        }
        @if tokens.is_empty() {
            p #no-tokens { "You have no API tokens." }
        }
    }
}

fn create_form(session: &Session, values: &Form, notice: &Notice) -> Markup {
    let error = match notice {
        Notice::Refused(error) => Some(error),
        _ => None,
    };
    html! {
        h2 #create-token-heading { "Create a token" }
        @if let Some(error) = error {
            (form_error("The token was not created.", error, &[&NAME, &EXPIRES_IN]))
        }
        form #create-token .stacked method="post" action="/tokens/new" aria-labelledby="create-token-heading" novalidate {
            (layout::csrf_field(session))
            (NAME.input("text", values.get(NAME.name).trim(), NAME.error(error)))
            (EXPIRES_IN.input("text", values.get(EXPIRES_IN.name).trim(), EXPIRES_IN.error(error)))
            button type="submit" { "Create token" }
        }
    }
}

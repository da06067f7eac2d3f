//! `GET /users` (admins only, `Permission::ManageUsers`): the users, a form
//! that creates one, and for each user a form that changes its role and one
//! that deletes it. The forms make the `Authenticator` calls of
//! `/api/v1/users`, with the same permission:
//!
//! - `POST /users/new`: `Authenticator::create_user`, as `POST /api/v1/users`;
//! - `POST /users/{name}/role`: `Authenticator::update_user` with the new
//!   role, at the version the page showed, as `PUT /api/v1/users/{name}`;
//! - `POST /users/{name}/delete`: when `confirm` is the user's name,
//!   `Authenticator::delete_user`, as `DELETE /api/v1/users/{name}`.
//!
//! A refused form shows the page again with the message at its field.

use chrono::Utc;
use cms_auth::{AuthError, Permission};
use cms_model::{FieldError, ObjectMeta, UserRole};
use cms_store::UserRecord;
use http::StatusCode;
use maud::{Markup, html};
use secrecy::SecretString;

use crate::failure::Failure;
use crate::field::{Field, Refusal, form_error};
use crate::form::Form;
use crate::reply::{self, Outcome, Refused};
use crate::session::{self, Session};
use crate::summary::age;
use crate::{Console, Request, layout};

/// The global roles a user may have; `none` leaves it the tenants its
/// grants give it.
const ROLES: [Option<UserRole>; 4] =
    [None, Some(UserRole::View), Some(UserRole::Edit), Some(UserRole::Admin)];

const NAME: Field = Field {
    id: "user-name",
    name: "name",
    path: "metadata.name",
    label: "Name",
    hint: Some("Lowercase letters, digits and '-', up to 63 characters."),
};
const ROLE: Field = Field {
    id: "user-role",
    name: "role",
    path: "spec.role",
    label: "Role",
    hint: Some(
        "none: only the tenants its grants give; view reads; edit also changes tenants; admin also manages users and reads the audit log.",
    ),
};
const PASSWORD: Field = Field {
    id: "user-password",
    name: "password",
    path: "spec.password",
    label: "Password",
    hint: Some("At least 8 bytes."),
};

/// What a refused form says, and where.
enum Problem {
    None,
    Create(FieldError),
    Role { user: String, message: String },
    Delete { user: String, message: String },
}

/// The users page.
pub(crate) async fn page(console: &Console, request: &Request) -> Outcome {
    let session = session::require(console, request).await?;
    session.require(Permission::ManageUsers)?;
    render(console, &session, StatusCode::OK, &Form::default(), &Problem::None).await
}

/// `POST /users/new`: creates the user and shows the list, or the page
/// again with the error at its field.
pub(crate) async fn create(console: &Console, request: &Request) -> Outcome {
    let name = Form::posted(request).map(|form| form.get(NAME.name).trim().to_string()).unwrap_or_default();
    let outcome = async {
        let (session, form) = session::posted(console, request, Permission::ManageUsers).await?;
        match create_user(console, &form, &name).await {
            Ok(()) => {
                tracing::info!(user = %session.caller.user, created = %name, "created a user");
                Ok(session.mark(reply::redirect("/users")))
            }
            Err(Refusal::Field(status, field)) => {
                render(console, &session, status, &form, &Problem::Create(field)).await
            }
            Err(Refusal::Page(failure)) => Err(failure.page(Some(&session)).into()),
        }
    };
    reply::noting_created(outcome.await, name)
}

async fn create_user(console: &Console, form: &Form, name: &str) -> Result<(), Refusal> {
    ObjectMeta::named(name).validate()?;
    let role = UserRole::from_global_name(form.get(ROLE.name))
        .ok_or_else(|| FieldError::new(ROLE.path, "must be none, view, edit or admin"))?;
    let password = SecretString::from(form.get(PASSWORD.name).to_string());
    match console.auth.create_user(name, role, &password).await {
        Ok(_) => Ok(()),
        Err(err) => Err(Refusal::of_create(err, NAME.path)),
    }
}

/// `POST /users/{name}/role`: gives user `name` the form's `role`.
pub(crate) async fn change_role(console: &Console, request: &Request, name: &str) -> Outcome {
    let (session, form) = session::posted(console, request, Permission::ManageUsers).await?;
    let Some(role) = UserRole::from_global_name(form.get("role")) else {
        let message = "The role must be none, view, edit or admin.".to_string();
        let problem = Problem::Role { user: name.to_string(), message };
        return render(console, &session, StatusCode::UNPROCESSABLE_ENTITY, &Form::default(), &problem).await;
    };
    let expected = form.get("resourceVersion").trim().parse::<u64>().ok();
    match console.auth.update_user(name, role, None, expected).await {
        Ok(_) => {
            let role = UserRole::global_name(role);
            tracing::info!(user = %session.caller.user, changed = name, role, "changed a role");
            Ok(session.mark(reply::redirect("/users")))
        }
        Err(err) => {
            let (status, message) = refused_at_row(&session, err)?;
            let problem = Problem::Role { user: name.to_string(), message };
            render(console, &session, status, &Form::default(), &problem).await
        }
    }
}

/// `POST /users/{name}/delete`: deletes user `name` when `confirm` is its name.
pub(crate) async fn delete(console: &Console, request: &Request, name: &str) -> Outcome {
    let (session, form) = session::posted(console, request, Permission::ManageUsers).await?;
    if form.get("confirm") != name {
        let message = format!("Tick the box to confirm deleting {name}; nothing was deleted.");
        let problem = Problem::Delete { user: name.to_string(), message };
        return render(console, &session, StatusCode::UNPROCESSABLE_ENTITY, &Form::default(), &problem).await;
    }
    match console.auth.delete_user(name).await {
        Ok(()) => {
            tracing::info!(user = %session.caller.user, deleted = name, "deleted a user");
            Ok(session.mark(reply::redirect("/users")))
        }
        Err(err) => {
            let (status, message) = refused_at_row(&session, err)?;
            let problem = Problem::Delete { user: name.to_string(), message };
            render(console, &session, status, &Form::default(), &problem).await
        }
    }
}

/// A refused change of one user, shown at its row (422, 409), or the
/// failure page (a missing user is 404).
fn refused_at_row(session: &Session, err: AuthError) -> Result<(StatusCode, String), Refused> {
    match Failure::from(err) {
        failure if matches!(failure.status, StatusCode::CONFLICT | StatusCode::UNPROCESSABLE_ENTITY) => {
            Ok((failure.status, failure.message))
        }
        failure => Err(failure.page(Some(session)).into()),
    }
}

/// The page, with `values` in the create form and `problem` at its place.
async fn render(
    console: &Console,
    session: &Session,
    status: StatusCode,
    values: &Form,
    problem: &Problem,
) -> Outcome {
    let users =
        console.auth.accounts().users().await.map_err(|err| Failure::from(err).page(Some(session)))?;
    let content = html! {
        h1 { "Users" }
        (table(session, &users, problem))
        (create_form(session, values, problem))
    };
    Ok(layout::respond(status, "Users", Some(session), content))
}

fn table(session: &Session, users: &[UserRecord], problem: &Problem) -> Markup {
    let now = Utc::now();
    html! {
        table #users {
            caption { "Users: " (users.len()) }
            thead {
                tr {
                    th scope="col" { "Name" }
                    th scope="col" { "Role" }
                    th scope="col" { "Created" }
                    th scope="col" { "Change the role" }
                    th scope="col" { "Delete" }
                }
            }
            tbody {
                @for user in users {
                    tr data-user=(user.name) {
                        th scope="row" .name { (user.name) }
                        td .role { (UserRole::global_name(user.role)) }
                        td .created {
                            time datetime=(user.created_at.to_rfc3339()) { (age(user.created_at, now)) " ago" }
                        }
                        td { (role_form(session, user, problem)) }
                        td { (delete_form(session, user, problem)) }
                    }
                }
            }
        }
    }
}

fn role_form(session: &Session, user: &UserRecord, problem: &Problem) -> Markup {
    let id = format!("role-{}", user.name);
    let error = match problem {
        Problem::Role { user: name, message } if *name == user.name => Some(message.as_str()),
        _ => None,
    };
    html! {
        form .role method="post" action={ "/users/" (user.name) "/role" } {
            (layout::csrf_field(session))
            input type="hidden" name="resourceVersion" value=(user.resource_version);
            div .field data-field="spec.role" {
                label for=(id) { "Role of " (user.name) }
                select #(id) name="role" aria-invalid=[error.map(|_| "true")]
                    aria-describedby=[error.map(|_| format!("{id}-error"))] {
                    @for role in ROLES {
                        option value=(UserRole::global_name(role)) selected[role == user.role] {
                            (UserRole::global_name(role))
                        }
                    }
                }
                @if let Some(message) = error {
                    p .field-error id={ (id) "-error" } { (message) }
                }
            }
            button type="submit" { "Change role" span .visually-hidden { " of " (user.name) } }
        }
    }
}

fn delete_form(session: &Session, user: &UserRecord, problem: &Problem) -> Markup {
    let id = format!("confirm-{}", user.name);
    let error = match problem {
        Problem::Delete { user: name, message } if *name == user.name => Some(message.as_str()),
        _ => None,
    };
    html! {
        form .delete-user method="post" action={ "/users/" (user.name) "/delete" } {
            (layout::csrf_field(session))
            div .field .check {
                input #(id) type="checkbox" name="confirm" value=(user.name) required
                    aria-invalid=[error.map(|_| "true")] aria-describedby=[error.map(|_| format!("{id}-error"))];
                label for=(id) { "Yes, delete " (user.name) " and its tokens" }
            }
            @if let Some(message) = error {
                p .field-error id={ (id) "-error" } { (message) }
            }
            button .danger type="submit" { "Delete" span .visually-hidden { " " (user.name) } }
        }
    }
}

fn create_form(session: &Session, values: &Form, problem: &Problem) -> Markup {
    let error = match problem {
        Problem::Create(error) => Some(error),
        _ => None,
    };
    let role_error = ROLE.error(error);
    let chosen = UserRole::from_global_name(values.get(ROLE.name)).unwrap_or(Some(UserRole::View));
    let role = html! {
        select id=(ROLE.id) name=(ROLE.name) aria-describedby=[ROLE.described(role_error)]
            aria-invalid=[role_error.map(|_| "true")] {
            @for role in ROLES {
                option value=(UserRole::global_name(role)) selected[role == chosen] { (UserRole::global_name(role)) }
            }
        }
    };
    html! {
        h2 #create-user-heading { "Create a user" }
        @if let Some(error) = error {
            (form_error("The user was not created.", error, &[&NAME, &ROLE, &PASSWORD]))
        }
        form #create-user .stacked method="post" action="/users/new" aria-labelledby="create-user-heading" novalidate {
            (layout::csrf_field(session))
            (NAME.input("text", values.get(NAME.name).trim(), NAME.error(error)))
            (ROLE.wrap(role_error, role))
            // The password is never sent back.
            (PASSWORD.input("password", "", PASSWORD.error(error)))
            button type="submit" { "Create user" }
        }
    }
}

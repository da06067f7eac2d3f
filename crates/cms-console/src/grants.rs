//! `GET /grants` (admins only, `Permission::ManageUsers`, as
//! `/api/v1/grants`): the grants, a form that creates one and, for each, a
//! form that deletes it. The forms make the `Authenticator` calls of the API:
//!
//! - `POST /grants/new`: `Authenticator::create_grant`, as `POST /api/v1/grants`;
//! - `POST /grants/{name}/delete`: when `confirm` is the grant's name,
//!   `Authenticator::delete_grant`, as `DELETE /api/v1/grants/{name}`.
//!
//! A refused form shows the page again with the message at its field.

use chrono::Utc;
use cms_auth::Permission;
use cms_model::{FieldError, GrantSpec, Subject, SubjectKind, TenantSet, UserRole};
use cms_store::GrantRecord;
use http::StatusCode;
use maud::{Markup, html};

use crate::failure::Failure;
use crate::field::{Field, Refusal, form_error};
use crate::form::Form;
use crate::reply::{self, Outcome};
use crate::session::{self, Session};
use crate::summary::age;
use crate::{Console, Request, layout};

const NAME: Field = Field {
    id: "grant-name",
    name: "name",
    path: "metadata.name",
    label: "Name",
    hint: Some("Lowercase letters, digits and '-', up to 63 characters."),
};
const ROLE: Field = Field {
    id: "grant-role",
    name: "role",
    path: "spec.role",
    label: "Role",
    hint: Some("view reads the tenants; edit also changes them. admin is a global role, never granted."),
};
const USERS: Field = Field {
    id: "grant-users",
    name: "users",
    path: "spec.subjects",
    label: "Local users",
    hint: Some("Names separated by commas."),
};
const GROUPS: Field = Field {
    id: "grant-groups",
    name: "groups",
    path: "spec.subjects.groups",
    label: "Single sign-on groups",
    hint: Some("One group per line."),
};
const WORKLOADS: Field = Field {
    id: "grant-workloads",
    name: "workloads",
    path: "spec.subjects.workloads",
    label: "Workload subject patterns",
    hint: Some("One per line, such as system:serviceaccount:ci:*; * stays within a segment."),
};
const TENANTS: Field = Field {
    id: "grant-tenants",
    name: "tenants",
    path: "spec.tenants.names",
    label: "Tenants by name",
    hint: Some("Names separated by commas."),
};
const SELECTOR: Field = Field {
    id: "grant-selector",
    name: "selector",
    path: "spec.tenants.selector",
    label: "Tenants by label selector",
    hint: Some("Such as team=a or env in (prod,staging)."),
};

/// What a refused form says, and where.
enum Problem {
    None,
    Create(FieldError),
    Delete { grant: String, message: String },
}

/// The grants page.
pub(crate) async fn page(console: &Console, request: &Request) -> Outcome {
    let session = session::require(console, request).await?;
    session.require(Permission::ManageUsers)?;
    render(console, &session, StatusCode::OK, &Form::default(), &Problem::None).await
}

/// `POST /grants/new`: creates the grant and shows the list, or the page
/// again with the error at its field.
pub(crate) async fn create(console: &Console, request: &Request) -> Outcome {
    let name = Form::posted(request).map(|form| form.get(NAME.name).trim().to_string()).unwrap_or_default();
    let outcome = async {
        let (session, form) = session::posted(console, request, Permission::ManageUsers).await?;
        let created = match spec(&form) {
            Ok(spec) => {
                console.auth.create_grant(&name, spec).await.map_err(|err| Refusal::of_create(err, NAME.path))
            }
            Err(field) => Err(field.into()),
        };
        match created {
            Ok(_) => {
                tracing::info!(user = %session.caller.user, created = %name, "created a grant");
                Ok(session.mark(reply::redirect("/grants")))
            }
            Err(Refusal::Field(status, field)) => {
                render(console, &session, status, &form, &Problem::Create(field)).await
            }
            Err(Refusal::Page(failure)) => Err(failure.page(Some(&session)).into()),
        }
    };
    reply::noting_created(outcome.await, name)
}

/// The spec the form describes; the rules are the authenticator's.
fn spec(form: &Form) -> Result<GrantSpec, FieldError> {
    let role = UserRole::from_name(form.get(ROLE.name))
        .ok_or_else(|| FieldError::new(ROLE.path, "must be view or edit"))?;
    let listed = |text: &str, separator: char| -> Vec<String> {
        text.split(separator).map(str::trim).filter(|item| !item.is_empty()).map(str::to_string).collect()
    };
    let subjects = [
        (SubjectKind::User, listed(form.get(USERS.name), ',')),
        (SubjectKind::Group, listed(form.get(GROUPS.name), '\n')),
        (SubjectKind::Workload, listed(form.get(WORKLOADS.name), '\n')),
    ]
    .into_iter()
    .flat_map(|(kind, names)| names.into_iter().map(move |name| Subject { kind, name }))
    .collect();
    let selector = Some(form.get(SELECTOR.name).trim()).filter(|text| !text.is_empty()).map(str::to_string);
    Ok(GrantSpec {
        role,
        subjects,
        tenants: TenantSet { names: listed(form.get(TENANTS.name), ','), selector },
    })
}

/// `POST /grants/{name}/delete`: deletes grant `name` when `confirm` is its name.
pub(crate) async fn delete(console: &Console, request: &Request, name: &str) -> Outcome {
    let (session, form) = session::posted(console, request, Permission::ManageUsers).await?;
    if form.get("confirm") != name {
        let message = format!("Tick the box to confirm deleting {name}; nothing was deleted.");
        let problem = Problem::Delete { grant: name.to_string(), message };
        return render(console, &session, StatusCode::UNPROCESSABLE_ENTITY, &Form::default(), &problem).await;
    }
    console.auth.delete_grant(name).await.map_err(|err| Failure::from(err).page(Some(&session)))?;
    tracing::info!(user = %session.caller.user, deleted = name, "deleted a grant");
    Ok(session.mark(reply::redirect("/grants")))
}

/// The page, with `values` in the create form and `problem` at its place.
async fn render(
    console: &Console,
    session: &Session,
    status: StatusCode,
    values: &Form,
    problem: &Problem,
) -> Outcome {
    let grants =
        console.auth.accounts().grants().await.map_err(|err| Failure::from(err).page(Some(session)))?;
    let content = html! {
        h1 { "Grants" }
        p .hint { "A grant gives view or edit on the tenants it covers, by name or label selector, to local users, \
                   single sign-on groups and workloads, beside their global role." }
        (table(session, &grants, problem))
        (create_form(session, values, problem))
    };
    Ok(layout::respond(status, "Grants", Some(session), content))
}

fn table(session: &Session, grants: &[GrantRecord], problem: &Problem) -> Markup {
    let now = Utc::now();
    html! {
        table #grants {
            caption { "Grants: " (grants.len()) }
            thead {
                tr {
                    th scope="col" { "Name" }
                    th scope="col" { "Role" }
                    th scope="col" { "Subjects" }
                    th scope="col" { "Tenants" }
                    th scope="col" { "Created" }
                    th scope="col" { "Delete" }
                }
            }
            tbody {
                @for grant in grants {
                    tr data-grant=(grant.name) {
                        th scope="row" .name { (grant.name) }
                        td .role { (grant.spec.role.as_str()) }
                        td .subjects {
                            ul { @for subject in &grant.spec.subjects { li { (subject.kind.as_str()) ": " code { (subject.name) } } } }
                        }
                        td .tenants {
                            @if !grant.spec.tenants.names.is_empty() { p { (grant.spec.tenants.names.join(", ")) } }
                            @if let Some(selector) = &grant.spec.tenants.selector { p { "labels: " code { (selector) } } }
                        }
                        td .created { time datetime=(grant.created_at.to_rfc3339()) { (age(grant.created_at, now)) " ago" } }
                        td { (delete_form(session, grant, problem)) }
                    }
                }
            }
        }
    }
}

fn delete_form(session: &Session, grant: &GrantRecord, problem: &Problem) -> Markup {
    let id = format!("confirm-{}", grant.name);
    let error = match problem {
        Problem::Delete { grant: name, message } if *name == grant.name => Some(message.as_str()),
        _ => None,
    };
    html! {
        form .delete-grant method="post" action={ "/grants/" (grant.name) "/delete" } {
            (layout::csrf_field(session))
            div .field .check {
                input #(id) type="checkbox" name="confirm" value=(grant.name) required
                    aria-invalid=[error.map(|_| "true")] aria-describedby=[error.map(|_| format!("{id}-error"))];
                label for=(id) { "Yes, delete " (grant.name) }
            }
            @if let Some(message) = error {
                p .field-error id={ (id) "-error" } { (message) }
            }
            button .danger type="submit" { "Delete" span .visually-hidden { " " (grant.name) } }
        }
    }
}

fn textarea(field: &Field, value: &str, error: Option<&str>) -> Markup {
    field.wrap(
        error,
        html! {
            textarea id=(field.id) name=(field.name) rows="3" aria-describedby=[field.described(error)]
                aria-invalid=[error.map(|_| "true")] { (value) }
        },
    )
}

fn create_form(session: &Session, values: &Form, problem: &Problem) -> Markup {
    let error = match problem {
        Problem::Create(error) => Some(error),
        _ => None,
    };
    // The subjects' refusals name `spec.subjects[i].name`: shown at the users field.
    let subjects_error =
        error.filter(|error| error.field.starts_with("spec.subjects")).map(|error| error.message.as_str());
    let role_error = ROLE.error(error);
    let chosen = values.get(ROLE.name);
    let role = html! {
        select id=(ROLE.id) name=(ROLE.name) aria-describedby=[ROLE.described(role_error)]
            aria-invalid=[role_error.map(|_| "true")] {
            @for role in ["view", "edit"] {
                option value=(role) selected[role == chosen] { (role) }
            }
        }
    };
    let tenants_error = error
        .filter(|error| error.field == "spec.tenants" || error.field.starts_with("spec.tenants.names"))
        .map(|error| error.message.as_str());
    html! {
        h2 #create-grant-heading { "Create a grant" }
        @if let Some(error) = error {
            (form_error("The grant was not created.", error, &[&NAME, &ROLE, &SELECTOR]))
        }
        form #create-grant .stacked method="post" action="/grants/new" aria-labelledby="create-grant-heading" novalidate {
            (layout::csrf_field(session))
            (NAME.input("text", values.get(NAME.name).trim(), NAME.error(error)))
            (ROLE.wrap(role_error, role))
            (USERS.wrap(subjects_error, html! {
                input id=(USERS.id) name=(USERS.name) type="text" value=(values.get(USERS.name))
                    aria-describedby=[USERS.described(subjects_error)] aria-invalid=[subjects_error.map(|_| "true")];
            }))
            (textarea(&GROUPS, values.get(GROUPS.name), None))
            (textarea(&WORKLOADS, values.get(WORKLOADS.name), None))
            (TENANTS.wrap(tenants_error, html! {
                input id=(TENANTS.id) name=(TENANTS.name) type="text" value=(values.get(TENANTS.name))
                    aria-describedby=[TENANTS.described(tenants_error)] aria-invalid=[tenants_error.map(|_| "true")];
            }))
            (SELECTOR.wrap(SELECTOR.error(error), html! {
                input id=(SELECTOR.id) name=(SELECTOR.name) type="text" value=(values.get(SELECTOR.name))
                    aria-describedby=[SELECTOR.described(SELECTOR.error(error))]
                    aria-invalid=[SELECTOR.error(error).map(|_| "true")];
            }))
            button type="submit" { "Create grant" }
        }
    }
}

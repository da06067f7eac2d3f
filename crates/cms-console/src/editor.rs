//! The YAML editor: a tenant as YAML in a textarea, saved through the same
//! `Tenancy` calls as the API.
//!
//! - `GET /tenants/{name}/edit` shows the tenant's `metadata.name`,
//!   `labels`, `annotations`, `resourceVersion` and `spec` (not its
//!   status); `POST` saves it with `Tenancy::update_tenant`, as
//!   `PUT /api/v1/tenants/{name}` does (`Write`). A stale
//!   `resourceVersion` is 409, shown with a link that reloads the editor,
//!   and the operator's text stays in the textarea.
//! - `GET /tenants/new/yaml` shows a tenant to fill in; `POST` creates it
//!   with `Tenancy::create_tenant`, as `POST /api/v1/tenants` does.
//!
//! YAML that does not parse is 422 with its line at the field; a
//! `FieldError` is shown there with its field path.

use std::collections::BTreeMap;

use cms_auth::Permission;
use cms_model::{FieldError, ParseError, Tenant, TenantSpec, parse_json};
use cms_store::StoreError;
use cms_tenancy::TenancyError;
use http::StatusCode;
use maud::{Markup, html};
use serde::Serialize;

use crate::failure::Failure;
use crate::reply::{self, Outcome};
use crate::session::{self, Session};
use crate::yaml::{self, SyntaxError};
use crate::{Console, CreatedName, Request, Response, layout};

/// What the create editor starts with.
const TEMPLATE: &str = "\
metadata:
  name: ''
  labels: {}
  annotations: {}
spec:
  kubernetesVersion: 1.31.0
  nodeGroups:
  - name: controlplane
    role: controlplane
    count: 1
    providerClass: metal:bare
    providerConfig:
      hosts:
      - address: 10.0.0.1
";

/// What an operator may change of a tenant, in the order the editor shows.
#[derive(Serialize)]
struct Document<'a> {
    metadata: Metadata<'a>,
    spec: &'a TenantSpec,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Metadata<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource_version: Option<u64>,
    labels: &'a BTreeMap<String, String>,
    annotations: &'a BTreeMap<String, String>,
}

/// Which editor: of an existing tenant, or of a new one.
#[derive(Debug, Clone, Copy)]
enum Mode<'a> {
    Edit(&'a str),
    Create,
}

/// Why the text was not saved.
#[derive(Debug)]
enum Refusal {
    /// The text is not YAML.
    Syntax(SyntaxError),
    /// A field is refused.
    Field(FieldError),
    /// The tenant changed since the editor read it.
    Stale,
    /// Anything else the change was refused for.
    Message(String),
}

/// The tenant page's link to the editor, for roles that may write.
pub(crate) fn link(session: &Session, name: &str) -> Markup {
    html! {
        @if session.may(Permission::Write) {
            p #edit-yaml { a #edit-as-yaml href={ "/tenants/" (name) "/edit" } { "Edit as YAML" } }
        }
    }
}

/// `GET /tenants/{name}/edit`.
pub(crate) async fn edit_form(console: &Console, request: &Request, name: &str) -> Outcome {
    let session = session::require(console, request).await?;
    session.require(Permission::Write)?;
    let tenant = console.tenancy.tenant(name).map_err(|err| Failure::from(err).page(Some(&session)))?;
    Ok(render(&session, Mode::Edit(name), StatusCode::OK, &document(&tenant), None))
}

/// `POST /tenants/{name}/edit`: saves the tenant and goes to its page.
pub(crate) async fn save(console: &Console, request: &Request, name: &str) -> Outcome {
    let (session, form) = session::posted(console, request, Permission::Write).await?;
    let text = form.get("yaml");
    let refused = |status, refusal| Ok(render(&session, Mode::Edit(name), status, text, Some(&refusal)));
    let tenant = match parse(text) {
        Ok(tenant) => tenant,
        Err(refusal) => return refused(StatusCode::UNPROCESSABLE_ENTITY, refusal),
    };
    if tenant.metadata.name != name {
        let message = format!("is {:?}, but this editor saves tenant {name:?}", tenant.metadata.name);
        return refused(StatusCode::BAD_REQUEST, Refusal::Field(FieldError::new("metadata.name", message)));
    }
    if let Some(message) = session.refusal_on(Permission::Write, name, &tenant.metadata.labels) {
        return refused(StatusCode::FORBIDDEN, Refusal::Field(FieldError::new("metadata.labels", message)));
    }
    match console.tenancy.update_tenant(tenant).await {
        Ok(_) => {
            tracing::info!(user = %session.caller.user, tenant = name, "edited a tenant as YAML");
            Ok(session.mark(reply::redirect(&format!("/tenants/{name}"))))
        }
        Err(TenancyError::Invalid(field)) => refused(StatusCode::UNPROCESSABLE_ENTITY, Refusal::Field(field)),
        Err(TenancyError::Store(StoreError::Conflict { .. })) => {
            refused(StatusCode::CONFLICT, Refusal::Stale)
        }
        Err(err) => match Failure::from(err) {
            failure if failure.status == StatusCode::CONFLICT => {
                refused(failure.status, Refusal::Message(failure.message))
            }
            failure => Err(failure.page(Some(&session)).into()),
        },
    }
}

/// `GET /tenants/new/yaml`.
pub(crate) async fn create_form(console: &Console, request: &Request) -> Outcome {
    let session = session::require(console, request).await?;
    session.require_somewhere(Permission::Write)?;
    Ok(render(&session, Mode::Create, StatusCode::OK, TEMPLATE, None))
}

/// `POST /tenants/new/yaml`: creates the tenant and goes to its page.
pub(crate) async fn create(console: &Console, request: &Request) -> Outcome {
    let (session, form) = session::posted_somewhere(console, request, Permission::Write).await?;
    let text = form.get("yaml");
    let refused = |status, refusal| Ok(render(&session, Mode::Create, status, text, Some(&refusal)));
    let outcome = match parse(text) {
        Err(refusal) => refused(StatusCode::UNPROCESSABLE_ENTITY, refusal),
        Ok(tenant)
            if let Some(message) = session.refusal_on_create(
                console.store().as_ref(),
                &tenant.metadata.name,
                &tenant.metadata.labels,
            ) =>
        {
            refused(StatusCode::FORBIDDEN, Refusal::Field(FieldError::new("metadata.name", message)))
        }
        Ok(tenant) => {
            let name = tenant.metadata.name.clone();
            match console.tenancy.create_tenant(tenant).await {
                Ok(_) => {
                    tracing::info!(user = %session.caller.user, tenant = %name, "created a tenant from YAML");
                    Ok(session.mark(reply::redirect(&format!("/tenants/{name}"))))
                }
                Err(TenancyError::Invalid(field)) => {
                    refused(StatusCode::UNPROCESSABLE_ENTITY, Refusal::Field(field))
                }
                Err(err) => match Failure::from(err) {
                    failure if failure.status == StatusCode::CONFLICT => refused(
                        failure.status,
                        Refusal::Field(FieldError::new("metadata.name", failure.message)),
                    ),
                    failure if failure.status == StatusCode::UNPROCESSABLE_ENTITY => {
                        refused(failure.status, Refusal::Message(failure.message))
                    }
                    failure => Err(failure.page(Some(&session)).into()),
                },
            }
        }
    };
    let name = yaml::read(text).ok().and_then(|value| value["metadata"]["name"].as_str().map(str::to_string));
    outcome.map(|mut response| {
        if let Some(name) = name.filter(|name| !name.is_empty()) {
            response.extensions_mut().insert(CreatedName(name));
        }
        response
    })
}

/// The editor's YAML for `tenant`.
fn document(tenant: &Tenant) -> String {
    let metadata = &tenant.metadata;
    yaml::write(&Document {
        metadata: Metadata {
            name: &metadata.name,
            resource_version: metadata.resource_version,
            labels: &metadata.labels,
            annotations: &metadata.annotations,
        },
        spec: &tenant.spec,
    })
}

/// The tenant `text` describes, read as the API reads a JSON body.
fn parse(text: &str) -> Result<Tenant, Refusal> {
    let value = yaml::read(text).map_err(Refusal::Syntax)?;
    let json = serde_json::to_vec(&value).map_err(|err| Refusal::Message(err.to_string()))?;
    parse_json::<Tenant>(&json).map_err(|err| match err {
        ParseError::Invalid(field) => Refusal::Field(field),
        ParseError::Malformed(message) => Refusal::Message(message),
    })
}

/// The editor page, holding `text`, with `refusal` shown at the field or
/// above the form.
fn render(
    session: &Session,
    mode: Mode<'_>,
    status: StatusCode,
    text: &str,
    refusal: Option<&Refusal>,
) -> Response {
    let (title, action, cancel, button) = match mode {
        Mode::Edit(name) => (
            format!("Edit {name} as YAML"),
            format!("/tenants/{name}/edit"),
            format!("/tenants/{name}"),
            "Save",
        ),
        Mode::Create => (
            "Create a tenant from YAML".to_string(),
            "/tenants/new/yaml".to_string(),
            "/tenants/new".to_string(),
            "Create tenant",
        ),
    };
    let at_field = matches!(refusal, Some(Refusal::Syntax(_) | Refusal::Field(_)));
    let described = if at_field { "yaml-hint yaml-error" } else { "yaml-hint" };
    let content = html! {
        h1 { (title) }
        @if let Some(refusal) = refusal {
            div #form-error .failure role="alert" {
                @match (refusal, mode) {
                    (Refusal::Stale, Mode::Edit(name)) => {
                        p { "This tenant changed since you opened it, so it was not saved. Your text is kept below: copy what you need, then reload." }
                        p { a #reload-editor href={ "/tenants/" (name) "/edit" } { "Reload the editor with the current version" } }
                    }
                    (Refusal::Message(message), _) => {
                        p { "The tenant was not saved." }
                        p { (message) }
                    }
                    _ => p { "The tenant was not saved." },
                }
            }
        }
        form #yaml-editor .stacked method="post" action=(action) novalidate {
            (layout::csrf_field(session))
            div .field .invalid[at_field] data-field="yaml" {
                label for="yaml" { "The tenant as YAML" }
                p .hint #yaml-hint {
                    @match mode {
                        Mode::Edit(_) => "Only metadata.labels, metadata.annotations and spec are saved, at metadata.resourceVersion, the version you opened. A list in spec.nodeGroups replaces the node groups. Status is not edited.",
                        Mode::Create => "metadata.name, labels, annotations and spec, as POST /api/v1/tenants takes them. The server sets the rest.",
                    }
                }
                textarea #yaml .code name="yaml" rows="30" spellcheck="false" autocapitalize="off"
                    aria-invalid=[at_field.then_some("true")] aria-describedby=(described) { (text) }
                @match refusal {
                    Some(Refusal::Syntax(error)) => {
                        p .field-error #yaml-error data-line=[error.line] { (error) }
                    }
                    Some(Refusal::Field(error)) => {
                        p .field-error #yaml-error data-path=(error.field) { code { (error.field) } ": " (error.message) }
                    }
                    _ => {}
                }
            }
            div .buttons {
                button type="submit" { (button) }
                " "
                a href=(cancel) {
                    @match mode { Mode::Edit(_) => "Cancel", Mode::Create => "Use the form instead" }
                }
            }
        }
    };
    layout::respond(status, &title, Some(session), content)
}

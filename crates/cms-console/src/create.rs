//! `GET /tenants/new` and `POST /tenants/new`: the form that creates a
//! tenant with one control-plane node group, enough for a metal tenant. It
//! goes through `Tenancy::create_tenant` with the API's checks; a field the
//! checks refuse (`FieldError`) is shown at the form field whose
//! `data-field` names it, and a name that exists at the name field.

use cms_auth::Permission;
use cms_model::{FieldError, NodeGroupSpec, ObjectMeta, Role, Tenant, TenantSpec};
use cms_tenancy::TenancyError;
use http::StatusCode;
use maud::{Markup, html};
use serde_json::{Map, Value, json};

use crate::failure::Failure;
use crate::form::Form;
use crate::reply::{self, Outcome};
use crate::session::{self, Session};
use crate::{Console, CreatedName, Request, Response, csrf, layout};

/// How a field is entered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Input {
    Text,
    Number,
    Lines,
}

/// One field of the form: the control's name and id, the JSON path of the
/// resource field it fills, its label and an optional hint.
struct Field {
    name: &'static str,
    path: &'static str,
    label: &'static str,
    hint: Option<&'static str>,
    input: Input,
    required: bool,
}

const fn field(name: &'static str, path: &'static str, label: &'static str) -> Field {
    Field { name, path, label, hint: None, input: Input::Text, required: false }
}

const NAME: Field = Field {
    hint: Some("Lowercase letters, digits and '-', up to 63 characters."),
    required: true,
    ..field("name", "metadata.name", "Name")
};
const KUBERNETES: Field = Field {
    hint: Some("Such as 1.31.0."),
    required: true,
    ..field("kubernetesVersion", "spec.kubernetesVersion", "Kubernetes version")
};
const TALOS: Field = Field {
    hint: Some("Optional: the default release when left empty."),
    ..field("talosVersion", "spec.talosVersion", "Talos version")
};
const ENDPOINT: Field = Field {
    hint: Some("Optional, such as https://10.0.0.10:6443."),
    ..field("controlPlaneEndpoint", "spec.controlPlaneEndpoint", "Control-plane endpoint")
};
const GROUP: Field = Field {
    hint: Some("Leave empty to create the tenant without node groups."),
    ..field("groupName", "spec.nodeGroups[0].name", "Group name")
};
const COUNT: Field = Field { input: Input::Number, ..field("count", "spec.nodeGroups[0].count", "Machines") };
const CLASS: Field = Field {
    hint: Some("<provider>:<shape>, such as metal:bare."),
    ..field("providerClass", "spec.nodeGroups[0].providerClass", "Provider class")
};
const HOSTS: Field = Field {
    hint: Some("For metal: the IP address of each host, one per line, at least as many as machines."),
    input: Input::Lines,
    ..field("hosts", "spec.nodeGroups[0].providerConfig.hosts", "Host addresses")
};

const TENANT_FIELDS: [&Field; 4] = [&NAME, &KUBERNETES, &TALOS, &ENDPOINT];
const GROUP_FIELDS: [&Field; 4] = [&GROUP, &COUNT, &CLASS, &HOSTS];

/// `GET /tenants/new`: the empty form, for roles that may create tenants.
pub(crate) async fn form(console: &Console, request: &Request) -> Outcome {
    let session = session::require(console, request).await?;
    session.require_somewhere(Permission::Write)?;
    let defaults = Form::of(&[(GROUP.name, "controlplane"), (COUNT.name, "1"), (CLASS.name, "metal:bare")]);
    Ok(render(&session, StatusCode::OK, &defaults, None))
}

/// `POST /tenants/new`: creates the tenant and goes to its page, or shows
/// the form again with the error at its field.
pub(crate) async fn submit(console: &Console, request: &Request) -> Outcome {
    let session = session::require(console, request).await?;
    let form = Form::posted(request)?;
    csrf::check(&session, &form)?;
    session.require_somewhere(Permission::Write)?;
    let name = form.get(NAME.name).trim().to_string();
    let outcome = match tenant(&form) {
        Err(field) => Ok(render(&session, StatusCode::UNPROCESSABLE_ENTITY, &form, Some(&field))),
        Ok(tenant)
            if let Some(message) =
                session.refusal_on_create(console.store().as_ref(), &name, &tenant.metadata.labels) =>
        {
            Ok(render(&session, StatusCode::FORBIDDEN, &form, Some(&FieldError::new(NAME.path, message))))
        }
        Ok(tenant) => match console.tenancy.create_tenant(tenant).await {
            Ok(_) => {
                tracing::info!(user = %session.caller.user, tenant = %name, "created a tenant");
                Ok(session.mark(reply::redirect(&format!("/tenants/{name}"))))
            }
            Err(TenancyError::Invalid(field)) => {
                Ok(render(&session, StatusCode::UNPROCESSABLE_ENTITY, &form, Some(&field)))
            }
            Err(err) => match Failure::from(err) {
                failure if failure.status == StatusCode::CONFLICT => {
                    let field = FieldError::new(NAME.path, failure.message);
                    Ok(render(&session, StatusCode::CONFLICT, &form, Some(&field)))
                }
                failure if failure.status == StatusCode::UNPROCESSABLE_ENTITY => {
                    let field = FieldError::new("", failure.message);
                    Ok(render(&session, failure.status, &form, Some(&field)))
                }
                failure => Err(failure.page(Some(&session)).into()),
            },
        },
    };
    outcome.map(|mut response| {
        response.extensions_mut().insert(CreatedName(name));
        response
    })
}

/// The tenant the form describes. Parsing the count is the form's own
/// check; everything else is the application layer's.
fn tenant(form: &Form) -> Result<Tenant, FieldError> {
    let group = match form.optional(GROUP.name) {
        None => None,
        Some(name) => {
            let count = form.get(COUNT.name).trim();
            let count = count
                .parse::<u32>()
                .map_err(|_| FieldError::new(COUNT.path, format!("{count:?} is not a whole number")))?;
            let provider_class = form.get(CLASS.name).trim().to_string();
            let hosts: Vec<Value> = form
                .get(HOSTS.name)
                .lines()
                .map(str::trim)
                .filter(|line| !line.is_empty())
                .map(|address| json!({ "address": address }))
                .collect();
            let mut provider_config = Map::new();
            if !hosts.is_empty() || provider_class.starts_with("metal:") {
                provider_config.insert("hosts".to_string(), Value::Array(hosts));
            }
            Some(NodeGroupSpec {
                name: name.to_string(),
                role: Role::ControlPlane,
                count,
                provider_class,
                provider_config,
                ..NodeGroupSpec::default()
            })
        }
    };
    let spec = TenantSpec {
        kubernetes_version: form.get(KUBERNETES.name).trim().to_string(),
        talos_version: form.optional(TALOS.name).map(str::to_string),
        control_plane_endpoint: form.optional(ENDPOINT.name).map(str::to_string),
        node_groups: group.map(|group| vec![group]),
        ..TenantSpec::default()
    };
    Ok(Tenant { metadata: ObjectMeta::named(form.get(NAME.name).trim()), spec, status: Default::default() })
}

/// Whether `error` names `field` or a part of it.
fn names(error: &FieldError, field: &Field) -> bool {
    match error.field.strip_prefix(field.path) {
        Some(rest) => rest.is_empty() || rest.starts_with('.') || rest.starts_with('['),
        None => false,
    }
}

/// What to show at `field` for `error`: the message, led by the part of the
/// field it names when that is deeper than the control.
fn message_at(error: &FieldError, field: &Field) -> String {
    match error.field.strip_prefix(field.path) {
        Some("") | None => error.message.clone(),
        Some(rest) => format!("{}: {}", rest.trim_start_matches('.'), error.message),
    }
}

/// The form with `values`, and `error` at its field, or above the form when
/// it names none of them.
fn render(session: &Session, status: StatusCode, values: &Form, error: Option<&FieldError>) -> Response {
    let all = TENANT_FIELDS.iter().chain(GROUP_FIELDS.iter());
    let placed = error.is_some_and(|error| all.clone().any(|field| names(error, field)));
    let control =
        |field: &Field| control(field, values.get(field.name), error.filter(|error| names(error, field)));
    let content = html! {
        h1 { "Create a tenant" }
        p #yaml-mode { "Or " a #create-as-yaml href="/tenants/new/yaml" { "write the tenant as YAML" } ", with every field of the API." }
        @if let Some(error) = error {
            div #form-error .failure role="alert" {
                p { "The tenant was not created." }
                @if !placed { p { (error) } }
            }
        }
        form #create-tenant .stacked method="post" action="/tenants/new" novalidate {
            (layout::csrf_field(session))
            fieldset {
                legend { "Tenant" }
                @for field in TENANT_FIELDS { (control(field)) }
            }
            fieldset {
                legend { "Control-plane node group" }
                @for field in GROUP_FIELDS { (control(field)) }
            }
            button type="submit" { "Create tenant" }
        }
    };
    layout::respond(status, "Create a tenant", Some(session), content)
}

/// One labelled control, with its hint and, when `error` names it, the
/// error, both linked with `aria-describedby`.
fn control(field: &Field, value: &str, error: Option<&FieldError>) -> Markup {
    let hint_id = format!("{}-hint", field.name);
    let error_id = format!("{}-error", field.name);
    let described: Vec<&str> =
        field.hint.map(|_| hint_id.as_str()).into_iter().chain(error.map(|_| error_id.as_str())).collect();
    let described = (!described.is_empty()).then(|| described.join(" "));
    let invalid = error.map(|_| "true");
    html! {
        div .field .invalid[error.is_some()] data-field=(field.path) {
            label for=(field.name) { (field.label) }
            @if let Some(hint) = field.hint {
                p .hint id=(hint_id) { (hint) }
            }
            @match field.input {
                Input::Lines => {
                    textarea id=(field.name) name=(field.name) rows="4"
                        aria-describedby=[described.as_deref()] aria-invalid=[invalid] { (value) }
                }
                Input::Number => {
                    input id=(field.name) name=(field.name) type="number" min="1" step="1" value=(value)
                        aria-describedby=[described.as_deref()] aria-invalid=[invalid];
                }
                Input::Text => {
                    input id=(field.name) name=(field.name) type="text" value=(value) required[field.required]
                        aria-describedby=[described.as_deref()] aria-invalid=[invalid];
                }
            }
            @if let Some(error) = error {
                p .field-error id=(error_id) { (message_at(error, field)) }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_find_their_field() {
        let at = |path: &str| FieldError::new(path, "is wrong");
        assert!(names(&at("spec.kubernetesVersion"), &KUBERNETES));
        assert!(names(&at("spec.nodeGroups[0].providerConfig.hosts[1].address"), &HOSTS));
        assert!(!names(&at("spec.nodeGroups[0].providerConfig"), &HOSTS));
        assert!(!names(&at("spec.kubernetesVersionX"), &KUBERNETES));
        let deep = at("spec.nodeGroups[0].providerConfig.hosts[1].address");
        assert_eq!(message_at(&deep, &HOSTS), "[1].address: is wrong");
    }
}

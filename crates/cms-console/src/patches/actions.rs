//! The config-patch forms of the tenant page. Each checks, in order, the
//! session, the form token and the permission of the API's route for the
//! same change, then makes the change through `Tenancy` as that route does:
//!
//! - `POST /tenants/{name}/configpatches/new`: `create_child`, as
//!   `POST /api/v1/tenants/{tenant}/configpatches` (`Write`);
//! - `POST .../configpatches/{patch}/edit`: the format, target and body
//!   replaced at the `resourceVersion` the page read, as `PUT` does
//!   (`Write`); a stale version is 409, shown with a reload link;
//! - `POST .../configpatches/{patch}/enable`: `spec.enabled` set to the
//!   form's `enabled`, at the version read (`Write`);
//! - `POST .../configpatches/{patch}/delete`: as `DELETE` (`Delete`).
//!
//! A refused change shows the tenant page again with the message at its
//! form, keeping what the operator typed.

use cms_auth::Permission;
use cms_model::{ConfigPatch, ConfigPatchSpec, FieldError, Kind, ObjectMeta, PatchFormat, PatchTarget};
use cms_store::{Key, StoreError};
use cms_tenancy::TenancyError;
use http::StatusCode;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{Control, PatchForm, PatchProblem};

use crate::failure::Failure;
use crate::form::Form;
use crate::reply::{self, Outcome};
use crate::session::{self, Session};
use crate::tenant::{self, Problem};
use crate::{Console, CreatedName, Request, yaml};

/// Creates a config patch in tenant `name` from the form's `name`,
/// `format`, `target` and `patches`.
pub(crate) async fn create(console: &Console, request: &Request, name: &str) -> Outcome {
    let (session, form) = session::posted(console, request, Permission::Write).await?;
    let patch_name = form.get("name").trim().to_string();
    let refuse = Refusal { console, session: &session, tenant: name, form: PatchForm::Create, values: &form };
    let spec = match spec(&form, true) {
        Ok(spec) => spec,
        Err((at, message)) => return refuse.at(StatusCode::UNPROCESSABLE_ENTITY, at, message).await,
    };
    let patch = ConfigPatch { metadata: ObjectMeta::named(&patch_name), spec, status: Default::default() };
    let outcome = match console.tenancy.create_child(name, patch).await {
        Ok(_) => {
            tracing::info!(user = %session.caller.user, tenant = name, patch = %patch_name, "created a config patch");
            Ok(session.mark(reply::redirect(&format!("/tenants/{name}"))))
        }
        Err(TenancyError::Invalid(field)) => refuse.field(&field).await,
        Err(err) => match Failure::from(err) {
            failure if failure.status == StatusCode::CONFLICT => {
                refuse.at(failure.status, Control::Name, failure.message).await
            }
            failure => Err(failure.page(Some(&session)).into()),
        },
    };
    outcome.map(|mut response| {
        response.extensions_mut().insert(CreatedName(patch_name));
        response
    })
}

/// Replaces the format, target and body of patch `patch` of tenant `name`.
pub(crate) async fn edit(console: &Console, request: &Request, name: &str, patch: &str) -> Outcome {
    let (session, form) = session::posted(console, request, Permission::Write).await?;
    let refuse = Refusal {
        console,
        session: &session,
        tenant: name,
        form: PatchForm::Edit(patch.into()),
        values: &form,
    };
    let mut current = read(console, &session, name, patch)?;
    match spec(&form, current.spec.enabled) {
        Ok(spec) => current.spec = spec,
        Err((at, message)) => return refuse.at(StatusCode::UNPROCESSABLE_ENTITY, at, message).await,
    }
    replace(console, &session, name, current, &form, &refuse).await
}

/// Enables or disables patch `patch` of tenant `name`, as the form's
/// `enabled` says.
pub(crate) async fn enable(console: &Console, request: &Request, name: &str, patch: &str) -> Outcome {
    let (session, form) = session::posted(console, request, Permission::Write).await?;
    let refuse = Refusal {
        console,
        session: &session,
        tenant: name,
        form: PatchForm::Enable(patch.into()),
        values: &form,
    };
    let mut current = read(console, &session, name, patch)?;
    current.spec.enabled = form.get("enabled") == "true";
    replace(console, &session, name, current, &form, &refuse).await
}

/// Deletes patch `patch` of tenant `name`.
pub(crate) async fn delete(console: &Console, request: &Request, name: &str, patch: &str) -> Outcome {
    let (session, _form) = session::posted(console, request, Permission::Delete).await?;
    let key = Key::child(Kind::ConfigPatch, name, patch);
    console.tenancy.delete(key).await.map_err(|err| Failure::from(err).page(Some(&session)))?;
    tracing::info!(user = %session.caller.user, tenant = name, patch, "deleted a config patch");
    Ok(session.mark(reply::redirect(&format!("/tenants/{name}"))))
}

/// The stored patch `patch` of tenant `name`, or the failure page.
fn read(
    console: &Console,
    session: &Session,
    name: &str,
    patch: &str,
) -> Result<ConfigPatch, crate::reply::Refused> {
    let key = Key::child(Kind::ConfigPatch, name, patch);
    let object = console.tenancy.find(&key).map_err(|err| Failure::from(err).page(Some(session)))?;
    object.parse().map_err(|err| Failure::internal(&err).page(Some(session)).into())
}

/// Writes `patch` at the form's `resourceVersion`; a stale version is 409.
async fn replace(
    console: &Console,
    session: &Session,
    name: &str,
    mut patch: ConfigPatch,
    form: &Form,
    refuse: &Refusal<'_>,
) -> Outcome {
    let Ok(version) = form.get("resourceVersion").trim().parse::<u64>() else {
        let message = "The form does not say which version of the patch it edits. Reload the page.";
        return refuse.at(StatusCode::UNPROCESSABLE_ENTITY, Control::Form, message.to_string()).await;
    };
    patch.metadata.resource_version = Some(version);
    let patch_name = patch.metadata.name.clone();
    match console.tenancy.update_child(name, patch).await {
        Ok(_) => {
            tracing::info!(user = %session.caller.user, tenant = name, patch = %patch_name, "changed a config patch");
            Ok(session.mark(reply::redirect(&format!("/tenants/{name}"))))
        }
        Err(TenancyError::Invalid(field)) => refuse.field(&field).await,
        Err(TenancyError::Store(err @ StoreError::Conflict { .. })) => refuse.stale(err.to_string()).await,
        Err(err) => match Failure::from(err) {
            failure if failure.status == StatusCode::CONFLICT => {
                refuse.at(failure.status, Control::Form, failure.message).await
            }
            failure => Err(failure.page(Some(session)).into()),
        },
    }
}

/// The spec the form describes; a body that is not YAML, or a format or
/// target that is none of the model's, is refused at its control.
fn spec(form: &Form, enabled: bool) -> Result<ConfigPatchSpec, (Control, String)> {
    let format: PatchFormat = choice(form, "format")?;
    let target: PatchTarget = choice(form, "target")?;
    let patches = match yaml::read(form.get("patches")).map_err(|err| (Control::Body, err.to_string()))? {
        Value::Array(elements) => elements,
        Value::Null => Vec::new(),
        one => vec![one],
    };
    Ok(ConfigPatchSpec { format, target, enabled, patches })
}

/// The model's value of the select `field`, or a refusal of the form.
fn choice<T: DeserializeOwned>(form: &Form, field: &str) -> Result<T, (Control, String)> {
    let value = form.get(field);
    serde_json::from_value(Value::String(value.to_string()))
        .map_err(|_| (Control::Form, format!("{value:?} is not a patch {field}")))
}

/// How a refused form of the section is shown: the tenant page again.
struct Refusal<'a> {
    console: &'a Console,
    session: &'a Session,
    tenant: &'a str,
    form: PatchForm,
    values: &'a Form,
}

impl Refusal<'_> {
    async fn at(&self, status: StatusCode, at: Control, message: String) -> Outcome {
        self.show(
            status,
            PatchProblem { form: self.form.clone(), at, message, values: self.values.clone(), stale: false },
        )
        .await
    }

    /// A `FieldError` from `Tenancy`, at the control of its field.
    async fn field(&self, field: &FieldError) -> Outcome {
        let (at, message) = if field.field == "metadata.name" && self.form == PatchForm::Create {
            (Control::Name, field.message.clone())
        } else if let Some(rest) = field.field.strip_prefix("spec.patches") {
            let message = match rest {
                "" => field.message.clone(),
                rest => format!("{rest}: {}", field.message),
            };
            (Control::Body, message)
        } else {
            (Control::Form, field.to_string())
        };
        self.at(StatusCode::UNPROCESSABLE_ENTITY, at, message).await
    }

    /// The patch changed since the page read it.
    async fn stale(&self, detail: String) -> Outcome {
        let patch = match &self.form {
            PatchForm::Create => "",
            PatchForm::Edit(patch) | PatchForm::Enable(patch) => patch,
        };
        tracing::debug!(tenant = self.tenant, patch, detail, "a config patch form was stale");
        let problem = PatchProblem {
            form: self.form.clone(),
            at: Control::Form,
            message: format!("Config patch {patch} changed since you opened it, so nothing was changed."),
            values: self.values.clone(),
            stale: true,
        };
        self.show(StatusCode::CONFLICT, problem).await
    }

    async fn show(&self, status: StatusCode, problem: PatchProblem) -> Outcome {
        tenant::render(self.console, self.session, self.tenant, status, &Problem::Patch(problem)).await
    }
}

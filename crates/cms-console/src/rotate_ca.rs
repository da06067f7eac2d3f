//! The rotation of a tenant's certificate authorities on the tenant page
//! (`docs/ca-rotation.md`): where it stands (`status.caRotation`: the
//! authorities, phase, since when and what it waits for) and, for admins,
//! the form that asks for one.
//!
//! `POST /tenants/{name}/rotate-ca` (`os` and or `kubernetes` checked, and
//! `confirm`, which must be the tenant's name) makes the request of the
//! API's `POST /api/v1/tenants/{name}/rotate-ca`: the same permission
//! (`RotateCa`, admins) and the same operation
//! (`cms_tenancy::request_rotation`); the mounting server's audit log
//! records it as it records the API's. A refused request shows the page
//! again with the message at the form; a rotation under way or a tenant
//! being deleted is 409, a server with no rotations configured 503.

use chrono::Utc;
use cms_auth::Permission;
use cms_model::Tenant;
use cms_talos::Authority;
use http::StatusCode;
use maud::{Markup, html};

use crate::failure::Failure;
use crate::layout::{self, timestamp};
use crate::reply::{self, Outcome};
use crate::session::{self, Session};
use crate::tenant::{self, Problem};
use crate::{Console, Request};

/// Asks for a rotation of tenant `name`'s CAs.
pub(crate) async fn rotate(console: &Console, request: &Request, name: &str) -> Outcome {
    let (session, form) = session::posted(console, request, Permission::RotateCa).await?;
    let refused = async |status: StatusCode, message: String| {
        tenant::render(console, &session, name, status, &Problem::RotateCa { message }).await
    };
    let mut authorities = Vec::new();
    if checked(form.get("os")) {
        authorities.push(Authority::Os);
    }
    if checked(form.get("kubernetes")) {
        authorities.push(Authority::Kubernetes);
    }
    if authorities.is_empty() {
        let message = "Check the OS CA, the Kubernetes CA or both; nothing was rotated.".to_string();
        return refused(StatusCode::UNPROCESSABLE_ENTITY, message).await;
    }
    if form.get("confirm").trim() != name {
        let message = format!("Type {name} exactly to rotate the tenant's CAs; nothing was rotated.");
        return refused(StatusCode::UNPROCESSABLE_ENTITY, message).await;
    }
    let Some(rotations) = console.rotations.as_deref() else {
        let message = "This server does not rotate tenants' CAs.";
        return Err(Failure::new(StatusCode::SERVICE_UNAVAILABLE, message).page(Some(&session)).into());
    };
    match cms_tenancy::request_rotation(&console.tenancy, rotations, name, &authorities, Utc::now()).await {
        Ok(status) => {
            tracing::info!(
                user = %session.caller.user,
                tenant = name,
                authorities = ?status.authorities,
                "began rotating the tenant's CAs from the console"
            );
            Ok(session.mark(reply::redirect(&format!("/tenants/{name}"))))
        }
        Err(err) => match Failure::from(err) {
            failure if failure.status == StatusCode::CONFLICT => {
                refused(failure.status, failure.message).await
            }
            failure => Err(failure.page(Some(&session)).into()),
        },
    }
}

/// Whether a checkbox's value says checked: browsers send `on`.
fn checked(value: &str) -> bool {
    matches!(value, "on" | "true" | "1")
}

/// The rotation's status, when the tenant has one, and the form for admins.
pub(crate) fn section(session: &Session, tenant: &Tenant, problem: &Problem) -> Markup {
    let status = tenant.status.ca_rotation.as_ref();
    let may_rotate = session.may(Permission::RotateCa) && tenant.metadata.deletion_timestamp.is_none();
    if status.is_none() && !may_rotate {
        return html! {};
    }
    let name = &tenant.metadata.name;
    let error = match problem {
        Problem::RotateCa { message } => Some(message.as_str()),
        _ => None,
    };
    html! {
        h2 #ca-rotation-heading { "Certificate authorities" }
        @if let Some(status) = status {
            dl #ca-rotation .facts data-phase=(status.phase) aria-labelledby="ca-rotation-heading" {
                dt { "Rotated" }
                dd .authorities { (status.authorities.join(", ")) }
                dt { "Phase" }
                dd .phase { (status.phase) }
                dt { "Since" }
                dd .since { (timestamp(status.since)) }
                @if let Some(message) = &status.message {
                    dt { "Waiting for" }
                    dd .message { (message) }
                }
            }
        }
        @if may_rotate {
            form #rotate-ca .stacked method="post" action={ "/tenants/" (name) "/rotate-ca" } data-name=(name) {
                (layout::csrf_field(session))
                fieldset {
                    legend { "Authorities to rotate" }
                    label { input #rotate-ca-os name="os" type="checkbox" checked; " OS (the Talos API's CA)" }
                    label { input #rotate-ca-kubernetes name="kubernetes" type="checkbox" checked; " Kubernetes" }
                }
                div .field data-field="confirm" {
                    label for="rotate-ca-confirm" { "Type the tenant's name, " code { (name) } ", to rotate its CAs" }
                    input #rotate-ca-confirm name="confirm" type="text" autocomplete="off" required
                        aria-invalid=[error.map(|_| "true")]
                        aria-describedby=[error.map(|_| "rotate-ca-error")];
                    @if let Some(message) = error {
                        p .field-error #rotate-ca-error { (message) }
                    }
                }
                button .danger type="submit" { "Rotate CAs" }
            }
        }
    }
}

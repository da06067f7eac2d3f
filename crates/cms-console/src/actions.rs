//! The tenant page's forms. Each checks, in order, the session, the form
//! token and the permission the API's route for the same change needs,
//! then makes the change through `Tenancy` as that route does:
//!
//! - `POST /tenants/{name}/node-groups/{group}/scale`: the node group
//!   replaced with the new `count`, at the version just read, as
//!   `PUT /api/v1/tenants/{tenant}/node-groups/{name}` (`Write`);
//! - `POST /tenants/{name}/delete`: when `confirm` is the tenant's name,
//!   the delete of `DELETE /api/v1/tenants/{name}` (`DeleteTenant`).
//!
//! A refused change shows the page again with the message at its form.

use cms_auth::Permission;
use cms_model::{Kind, NodeGroup};
use cms_store::Key;
use cms_tenancy::TenancyError;
use http::StatusCode;

use crate::failure::Failure;
use crate::reply::{self, Outcome};
use crate::session;
use crate::tenant::{self, Problem};
use crate::{Console, Request};

/// Scales node group `group` of tenant `name`.
pub(crate) async fn scale(console: &Console, request: &Request, name: &str, group: &str) -> Outcome {
    let (session, form) = session::posted(console, request, Permission::Write).await?;
    let refused = async |status: StatusCode, message: String| {
        let problem = Problem::Scale { group: group.to_string(), message };
        tenant::render(console, &session, name, status, &problem).await
    };
    let text = form.get("count").trim();
    let Ok(count) = text.parse::<u32>() else {
        let message = format!("The count must be a whole number from 1, not {text:?}.");
        return refused(StatusCode::UNPROCESSABLE_ENTITY, message).await;
    };
    let key = Key::child(Kind::NodeGroup, name, group);
    let object = console.tenancy.find(&key).map_err(|err| Failure::from(err).page(Some(&session)))?;
    let mut node_group: NodeGroup =
        object.parse().map_err(|err| Failure::internal(&err).page(Some(&session)))?;
    node_group.metadata.resource_version = Some(object.resource_version);
    node_group.spec.count = count;
    match console.tenancy.update_child(name, node_group).await {
        Ok(_) => {
            tracing::info!(user = %session.caller.user, tenant = name, group, count, "scaled a node group");
            Ok(session.mark(reply::redirect(&format!("/tenants/{name}"))))
        }
        Err(TenancyError::Invalid(field)) => refused(StatusCode::UNPROCESSABLE_ENTITY, field.message).await,
        Err(err) => match Failure::from(err) {
            failure if failure.status == StatusCode::CONFLICT => {
                refused(failure.status, failure.message).await
            }
            failure => Err(failure.page(Some(&session)).into()),
        },
    }
}

/// Deletes tenant `name` when the form's `confirm` is its name.
pub(crate) async fn delete(console: &Console, request: &Request, name: &str) -> Outcome {
    let (session, form) = session::posted(console, request, Permission::DeleteTenant).await?;
    if form.get("confirm").trim() != name {
        let message = format!("Type {name} exactly to delete the tenant; nothing was deleted.");
        return tenant::render(
            console,
            &session,
            name,
            StatusCode::UNPROCESSABLE_ENTITY,
            &Problem::Delete { message },
        )
        .await;
    }
    console.tenancy.delete(Key::tenant(name)).await.map_err(|err| Failure::from(err).page(Some(&session)))?;
    tracing::info!(user = %session.caller.user, tenant = name, "began deleting a tenant");
    Ok(session.mark(reply::redirect("/")))
}

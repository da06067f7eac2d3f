//! `GET /api/v1/tenants/{tenant}/machines/{id}/config`: the machine's
//! complete Talos config (`cms_tenancy::Tenancy::machine_config`). A
//! machine whose group is gone, a ref to a missing patch, or a patch that
//! does not apply is a conflict with the stored state (409, naming it); a
//! tenant with no control-plane endpoint yet is 503. Every read is logged
//! with the user, never with the content.

use actix_web::{HttpRequest, HttpResponse, web};

use crate::auth::caller;
use crate::error::ApiError;
use crate::reply::yaml_download;
use crate::state::AppState;

/// `GET /tenants/{tenant}/machines/{id}/config`.
pub(crate) async fn get(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let caller = caller(&req)?;
    let (tenant, id) = path.into_inner();
    let (yaml, role) = state.tenancy.machine_config(&tenant, &id).await?;
    tracing::info!(
        user = %caller.user,
        role = caller.role_name(),
        tenant = %tenant,
        machine = %id,
        machine_role = role.as_str(),
        "read a machine config"
    );
    Ok(yaml_download(yaml, &format!("{tenant}-{id}.yaml")))
}

//! `POST /api/v1/tenants/{name}/rotate-ca` `{"authorities": ["os",
//! "kubernetes"]}`: an administrator's request to rotate a tenant's
//! certificate authorities (`docs/ca-rotation.md`).
//!
//! Admins only (`RotateCa`), on the audit log as every mutation is. The
//! new CAs are sealed beside the old at once (a compare-and-swap of the
//! sealed bundle), the tenant's `service.io/ca-rotation` annotation wakes
//! the replica reconciling it, which carries the rotation on, and
//! `status.caRotation` shows `generated`: 202 with that status. 404 for no
//! such tenant, 409 for one being deleted or while a rotation is under way,
//! 400 for a body that is not JSON, 422 naming the field for one that
//! names no authority, an unknown one or one twice, 503 on a server with
//! no rotations configured.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use chrono::Utc;
use serde::Deserialize;

use crate::auth::caller;
use crate::body::JsonBody;
use crate::error::ApiError;
use crate::reply;
use crate::state::AppState;

/// What a rotation request asks for.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RotateCaRequest {
    /// The authorities to rotate, one or both, each once: `os` (the Talos
    /// API's CA) and `kubernetes` (the Kubernetes API's).
    #[schema(min_items = 1, max_items = 2)]
    authorities: Vec<String>,
}

/// `POST /tenants/{name}/rotate-ca`.
pub(crate) async fn rotate(
    req: HttpRequest,
    state: web::Data<AppState>,
    name: web::Path<String>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let name = name.into_inner();
    let caller = caller(&req)?;
    if !req.query_string().is_empty() {
        return Err(ApiError::BadRequest("this route takes no query parameters".into()));
    }
    let request: RotateCaRequest = body.parse()?;
    let authorities = cms_tenancy::authorities_named(&request.authorities)?;
    let rotations = state
        .rotations
        .as_ref()
        .ok_or_else(|| ApiError::Unavailable("rotating tenants' CAs is not configured".into()))?;
    let status =
        cms_tenancy::request_rotation(&state.tenancy, rotations.as_ref(), &name, &authorities, Utc::now())
            .await?;
    tracing::info!(user = %caller.user, tenant = %name, authorities = ?status.authorities, "began rotating the tenant's CAs");
    reply::serialized(StatusCode::ACCEPTED, &status)
}

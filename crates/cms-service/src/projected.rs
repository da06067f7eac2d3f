//! `/api/v1/projected` and `/api/v1/tenants/{tenant}/projected[/{kind}]`:
//! what the provisioning tool created, read-only. 503 until the first apply.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use cms_model::{Projected, ProjectedList};

use crate::error::ApiError;
use crate::lookup::require_tenant;
use crate::reply;
use crate::state::AppState;

/// `GET /projected`: the projected resources of every tenant.
pub(crate) async fn list_all(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let items = projection(&state, None).await?;
    respond(items)
}

/// `GET /tenants/{tenant}/projected`.
pub(crate) async fn list(
    state: web::Data<AppState>,
    tenant: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    require_tenant(state.store().as_ref(), &tenant)?;
    let items = projection(&state, Some(tenant.into_inner())).await?;
    respond(items)
}

/// `GET /tenants/{tenant}/projected/{kind}`: `kind` matches in any case.
pub(crate) async fn list_kind(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, kind) = path.into_inner();
    require_tenant(state.store().as_ref(), &tenant)?;
    let mut items = projection(&state, Some(tenant)).await?;
    items.retain(|item| item.kind.eq_ignore_ascii_case(&kind));
    respond(items)
}

pub(crate) async fn projection(state: &AppState, tenant: Option<String>) -> Result<Vec<Projected>, ApiError> {
    state.store().projection(tenant).await?.ok_or_else(|| {
        ApiError::Unavailable(
            "projected state is not available yet: no provisioning run has completed".to_string(),
        )
    })
}

fn respond(items: Vec<Projected>) -> Result<HttpResponse, ApiError> {
    reply::serialized(StatusCode::OK, &ProjectedList { items })
}

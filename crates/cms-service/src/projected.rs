//! `/api/v1/projected` and `/api/v1/tenants/{tenant}/projected[/{kind}]`:
//! what the provisioning tool created, read-only. 503 until the first apply.
//! Paged as every list is (`limit`, `offset`, `total`, decisions §7), by
//! tenant, then name.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use cms_model::{Page, Projected, ProjectedList};

use crate::error::ApiError;
use crate::lookup::require_tenant;
use crate::query::ListQuery;
use crate::reply;
use crate::state::AppState;
use crate::visibility;

/// What the query's refusals call these lists.
const WHAT: &str = "projected resources";

/// `GET /projected`: the projected resources of every tenant.
/// A caller whose grants give it some tenants sees theirs only.
pub(crate) async fn list_all(
    req: HttpRequest,
    state: web::Data<AppState>,
    query: ListQuery,
) -> Result<HttpResponse, ApiError> {
    let page = query.page_only(WHAT)?;
    let mut items = projection(&state, None).await?;
    if let Some(visible) = visibility::tenant_names(state.store().as_ref(), &crate::auth::caller(&req)?) {
        items.retain(|item| visible.contains(&item.tenant));
    }
    respond(items, page)
}

/// `GET /tenants/{tenant}/projected`.
pub(crate) async fn list(
    state: web::Data<AppState>,
    tenant: web::Path<String>,
    query: ListQuery,
) -> Result<HttpResponse, ApiError> {
    let page = query.page_only(WHAT)?;
    require_tenant(state.store().as_ref(), &tenant)?;
    let items = projection(&state, Some(tenant.into_inner())).await?;
    respond(items, page)
}

/// `GET /tenants/{tenant}/projected/{kind}`: `kind` matches in any case.
pub(crate) async fn list_kind(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    query: ListQuery,
) -> Result<HttpResponse, ApiError> {
    let page = query.page_only(WHAT)?;
    let (tenant, kind) = path.into_inner();
    require_tenant(state.store().as_ref(), &tenant)?;
    let mut items = projection(&state, Some(tenant)).await?;
    items.retain(|item| item.kind.eq_ignore_ascii_case(&kind));
    respond(items, page)
}

pub(crate) async fn projection(state: &AppState, tenant: Option<String>) -> Result<Vec<Projected>, ApiError> {
    state.store().projection(tenant).await?.ok_or_else(|| {
        ApiError::Unavailable(
            "projected state is not available yet: no provisioning run has completed".to_string(),
        )
    })
}

/// The page of `items`, sorted by tenant, then name (then kind and type,
/// so that the order is total).
fn respond(mut items: Vec<Projected>, page: Page) -> Result<HttpResponse, ApiError> {
    items.sort_by(|a, b| {
        (&a.tenant, &a.name, &a.kind, &a.tf_type).cmp(&(&b.tenant, &b.name, &b.kind, &b.tf_type))
    });
    let total = items.len() as u64;
    let items = items.into_iter().skip(page.offset).take(page.limit).collect();
    reply::serialized(StatusCode::OK, &ProjectedList { items, total })
}

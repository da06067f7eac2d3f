//! `/api/v1/machines` and `/api/v1/tenants/{tenant}/machines`: machines are
//! created by the reconciler; users read and delete them, and the controller
//! writes their status.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use cms_auth::Permission;
use cms_model::{Kind, MachineStatus, ObjectMeta};
use cms_store::Key;
use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::body::{JsonBody, check_update};
use crate::error::ApiError;
use crate::lookup::{find, require_tenant};
use crate::query::ListQuery;
use crate::reply;
use crate::state::AppState;
use crate::visibility;
use crate::watch::WatchFilter;

/// The body of a status write: a machine whose `status` replaces the stored
/// one. Its `spec` may be sent back as read, and is ignored.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StatusUpdate {
    metadata: ObjectMeta,
    #[serde(default, rename = "spec")]
    _spec: Option<IgnoredAny>,
    status: MachineStatus,
}

fn key(tenant: String, id: String) -> Key {
    Key::child(Kind::Machine, tenant, id)
}

/// `GET /machines`: the machines of every tenant that `labelSelector`
/// matches, by tenant then name.
/// A caller whose grants give it some tenants sees their machines only.
pub(crate) async fn list_all(
    req: HttpRequest,
    state: web::Data<AppState>,
    query: ListQuery,
) -> Result<HttpResponse, ApiError> {
    let query = query.without_watch()?;
    let caller = crate::auth::caller(&req)?;
    if !caller.holds_everywhere(Permission::Read) {
        let filter = WatchFilter { labels: Some(query.selector), ..WatchFilter::default() };
        let filter = visibility::narrow_children(filter, state.store().as_ref(), &caller);
        let listing = visibility::filtered_page(state.store().as_ref(), Kind::Machine, &filter, query.page);
        return Ok(reply::listing(&listing));
    }
    Ok(reply::listing(&state.store().select(Kind::Machine, None, &query.selector, query.page)))
}

/// `GET /tenants/{tenant}/machines`.
pub(crate) async fn list(
    state: web::Data<AppState>,
    tenant: web::Path<String>,
    query: ListQuery,
) -> Result<HttpResponse, ApiError> {
    let query = query.without_watch()?;
    require_tenant(state.store().as_ref(), &tenant)?;
    let listing = state.store().select(Kind::Machine, Some(tenant.into_inner()), &query.selector, query.page);
    Ok(reply::listing(&listing))
}

/// `GET /tenants/{tenant}/machines/{id}`.
pub(crate) async fn get(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, id) = path.into_inner();
    let object = find(state.store().as_ref(), &key(tenant, id))?;
    Ok(reply::object(StatusCode::OK, &object))
}

/// `PUT /tenants/{tenant}/machines/{id}/status`: replaces the observed state,
/// checking `metadata.resourceVersion`.
pub(crate) async fn update_status(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let (tenant, id) = path.into_inner();
    let update: StatusUpdate = body.parse()?;
    let expected = check_update(&id, &update.metadata)?;
    let status = serde_json::to_value(&update.status).map_err(|err| ApiError::internal(&err))?;
    let object = state.store().update_status(key(tenant, id), status, Some(expected)).await?;
    Ok(reply::object(StatusCode::OK, &object))
}

/// `DELETE /tenants/{tenant}/machines/{id}`: 202; the reconciler replaces it.
pub(crate) async fn delete(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, id) = path.into_inner();
    let deleted = state.store().delete(key(tenant, id)).await?;
    Ok(reply::deleted(&deleted))
}

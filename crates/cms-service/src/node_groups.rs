//! `/api/v1/tenants/{tenant}/node-groups`: the node groups of a tenant.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use cms_model::{Kind, NodeGroupSpec, NodeGroupStatus};
use cms_store::Key;

use crate::body::JsonBody;
use crate::error::ApiError;
use crate::lookup::{find, require_tenant};
use crate::query::ListQuery;
use crate::state::AppState;
use crate::{patch_refs, reply};

fn key(tenant: String, name: String) -> Key {
    Key::child(Kind::NodeGroup, tenant, name)
}

/// `GET /tenants/{tenant}/node-groups`.
pub(crate) async fn list(
    state: web::Data<AppState>,
    tenant: web::Path<String>,
    query: ListQuery,
) -> Result<HttpResponse, ApiError> {
    let page = query.without_watch()?;
    require_tenant(state.store.as_ref(), &tenant)?;
    Ok(reply::listing(&state.store.list(Kind::NodeGroup, Some(tenant.into_inner()), page)))
}

/// `POST /tenants/{tenant}/node-groups`: 201 with the new group.
pub(crate) async fn create(
    state: web::Data<AppState>,
    tenant: web::Path<String>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let (name, draft) = body.for_create::<NodeGroupSpec, NodeGroupStatus>()?;
    let tenant = tenant.into_inner();
    let object = state.store.create(key(tenant.clone(), name), draft).await?;
    patch_refs::refresh(state.store.as_ref(), &tenant).await?;
    Ok(reply::object(StatusCode::CREATED, &object))
}

/// `GET /tenants/{tenant}/node-groups/{name}`.
pub(crate) async fn get(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, name) = path.into_inner();
    let object = find(state.store.as_ref(), &key(tenant, name))?;
    Ok(reply::object(StatusCode::OK, &object))
}

/// `PUT /tenants/{tenant}/node-groups/{name}`.
pub(crate) async fn update(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let (tenant, name) = path.into_inner();
    let (draft, expected) = body.for_update::<NodeGroupSpec, NodeGroupStatus>(&name)?;
    let object = state.store.update(key(tenant.clone(), name), draft, expected).await?;
    patch_refs::refresh(state.store.as_ref(), &tenant).await?;
    Ok(reply::object(StatusCode::OK, &object))
}

/// `DELETE /tenants/{tenant}/node-groups/{name}`: 204.
pub(crate) async fn delete(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, name) = path.into_inner();
    let deleted = state.store.delete(key(tenant.clone(), name)).await?;
    patch_refs::refresh(state.store.as_ref(), &tenant).await?;
    Ok(reply::deleted(&deleted))
}

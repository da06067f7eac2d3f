//! `/api/v1/tenants`: list (or watch), create, read, replace and delete tenants.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use cms_model::{Kind, TenantSpec, TenantStatus};
use cms_store::Key;

use crate::body::JsonBody;
use crate::error::ApiError;
use crate::lookup::find;
use crate::query::ListQuery;
use crate::state::AppState;
use crate::{reply, watch};

/// `GET /tenants`: a page of tenants, or with `watch=true` an event stream.
pub(crate) async fn list(state: web::Data<AppState>, query: ListQuery) -> Result<HttpResponse, ApiError> {
    if query.watch {
        return watch::respond(&state, Kind::Tenant, query.since).await;
    }
    Ok(reply::listing(&state.store.list(Kind::Tenant, None, query.page)))
}

/// `POST /tenants`: 201 with the new tenant.
pub(crate) async fn create(state: web::Data<AppState>, body: JsonBody) -> Result<HttpResponse, ApiError> {
    let (name, draft) = body.for_create::<TenantSpec, TenantStatus>()?;
    let object = state.store.create(Key::tenant(name), draft).await?;
    Ok(reply::object(StatusCode::CREATED, &object))
}

/// `GET /tenants/{name}`.
pub(crate) async fn get(
    state: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let object = find(state.store.as_ref(), &Key::tenant(name.into_inner()))?;
    Ok(reply::object(StatusCode::OK, &object))
}

/// `PUT /tenants/{name}`: replaces the spec, labels and annotations.
pub(crate) async fn update(
    state: web::Data<AppState>,
    name: web::Path<String>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let (draft, expected) = body.for_update::<TenantSpec, TenantStatus>(&name)?;
    let object = state.store.update(Key::tenant(name.into_inner()), draft, expected).await?;
    Ok(reply::object(StatusCode::OK, &object))
}

/// `DELETE /tenants/{name}`: 202 with the tenant marked for deletion.
pub(crate) async fn delete(
    state: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let deleted = state.store.delete(Key::tenant(name.into_inner())).await?;
    Ok(reply::deleted(&deleted))
}

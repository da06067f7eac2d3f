//! `/api/v1/tenants`: list (or watch), create, read, replace and delete
//! tenants. What each write means is `cms_tenancy::Tenancy`'s.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use cms_model::{Kind, Tenant};
use cms_store::Key;

use crate::body::JsonBody;
use crate::error::ApiError;
use crate::lookup::find;
use crate::query::ListQuery;
use crate::state::AppState;
use crate::{reply, watch};

/// `GET /tenants`: a page of tenants, or with `watch=true` an event
/// stream, which holds one of the caller's watch slots while it is open.
pub(crate) async fn list(
    req: HttpRequest,
    state: web::Data<AppState>,
    query: ListQuery,
) -> Result<HttpResponse, ApiError> {
    if query.watch {
        let slot = watch::slot(&req, &state)?;
        return watch::respond(&state, Kind::Tenant, query.since, slot).await;
    }
    Ok(reply::listing(&state.store().list(Kind::Tenant, None, query.page)))
}

/// `POST /tenants`: 201 with the new tenant, whose secrets bundle is
/// generated, sealed and written in the same transaction.
pub(crate) async fn create(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let tenant: Tenant = body.parse()?;
    crate::audit::note_created(&req, &tenant.metadata.name);
    let object = state.tenancy.create_tenant(tenant).await?;
    Ok(reply::object(StatusCode::CREATED, &object))
}

/// `GET /tenants/{name}`.
pub(crate) async fn get(
    state: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let object = find(state.store().as_ref(), &Key::tenant(name.into_inner()))?;
    Ok(reply::object(StatusCode::OK, &object))
}

/// `PUT /tenants/{name}`: replaces the spec, labels and annotations.
pub(crate) async fn update(
    state: web::Data<AppState>,
    name: web::Path<String>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let tenant: Tenant = body.for_update(&name)?;
    let object = state.tenancy.update_tenant(tenant).await?;
    Ok(reply::object(StatusCode::OK, &object))
}

/// `DELETE /tenants/{name}`: 202 with the tenant marked for deletion.
pub(crate) async fn delete(
    state: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let deleted = state.tenancy.delete(Key::tenant(name.into_inner())).await?;
    Ok(reply::deleted(&deleted))
}

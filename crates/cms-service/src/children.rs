//! The resources a tenant holds and users write, node groups and config
//! patches: one set of handlers, typed per kind. What each write means is
//! `cms_tenancy::Tenancy`'s.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use cms_model::{ConfigPatch, NodeGroup};
use cms_store::Key;
use cms_tenancy::Writable;
use serde::de::DeserializeOwned;

use crate::body::JsonBody;
use crate::error::ApiError;
use crate::lookup::{find, require_tenant};
use crate::query::ListQuery;
use crate::reply;
use crate::state::AppState;

/// A kind of tenant-scoped resource that users create and change.
pub(crate) trait Child {
    type Resource: Writable + DeserializeOwned;
}

/// `/api/v1/tenants/{tenant}/node-groups`.
pub(crate) struct NodeGroups;

impl Child for NodeGroups {
    type Resource = NodeGroup;
}

/// `/api/v1/tenants/{tenant}/configpatches`.
pub(crate) struct ConfigPatches;

impl Child for ConfigPatches {
    type Resource = ConfigPatch;
}

fn key<C: Child>(tenant: String, name: String) -> Key {
    Key::child(C::Resource::KIND, tenant, name)
}

/// `GET .../{kind}`: a page of the tenant's objects that `labelSelector` matches.
pub(crate) async fn list<C: Child>(
    state: web::Data<AppState>,
    tenant: web::Path<String>,
    query: ListQuery,
) -> Result<HttpResponse, ApiError> {
    let query = query.without_watch()?;
    require_tenant(state.store().as_ref(), &tenant)?;
    let listing =
        state.store().select(C::Resource::KIND, Some(tenant.into_inner()), &query.selector, query.page);
    Ok(reply::listing(&listing))
}

/// `POST .../{kind}`: 201 with the new object.
pub(crate) async fn create<C: Child>(
    req: HttpRequest,
    state: web::Data<AppState>,
    tenant: web::Path<String>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let resource: C::Resource = body.parse()?;
    crate::audit::note_created(&req, &resource.metadata().name);
    let object = state.tenancy.create_child(&tenant, resource).await?;
    Ok(reply::object(StatusCode::CREATED, &object))
}

/// `GET .../{kind}/{name}`.
pub(crate) async fn get<C: Child>(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, name) = path.into_inner();
    let object = find(state.store().as_ref(), &key::<C>(tenant, name))?;
    Ok(reply::object(StatusCode::OK, &object))
}

/// `PUT .../{kind}/{name}`.
pub(crate) async fn update<C: Child>(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let (tenant, name) = path.into_inner();
    let resource: C::Resource = body.for_update(&name)?;
    let object = state.tenancy.update_child(&tenant, resource).await?;
    Ok(reply::object(StatusCode::OK, &object))
}

/// `DELETE .../{kind}/{name}`: 204.
pub(crate) async fn delete<C: Child>(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, name) = path.into_inner();
    let deleted = state.tenancy.delete(key::<C>(tenant, name)).await?;
    Ok(reply::deleted(&deleted))
}

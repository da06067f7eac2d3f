//! The resources a tenant holds and users write, node groups and config
//! patches: one set of handlers, typed per kind.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use cms_model::{ConfigPatchSpec, ConfigPatchStatus, Kind, NodeGroupSpec, NodeGroupStatus, Resource};
use cms_store::Key;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::body::{JsonBody, Prepare};
use crate::error::ApiError;
use crate::lookup::{find, require_tenant};
use crate::query::ListQuery;
use crate::state::AppState;
use crate::{patch_refs, reply};

/// A kind of tenant-scoped resource that users create and change.
pub(crate) trait Child {
    const KIND: Kind;
    type Spec: Serialize;
    type Status;
}

/// `/api/v1/tenants/{tenant}/node-groups`.
pub(crate) struct NodeGroups;

impl Child for NodeGroups {
    const KIND: Kind = Kind::NodeGroup;
    type Spec = NodeGroupSpec;
    type Status = NodeGroupStatus;
}

/// `/api/v1/tenants/{tenant}/configpatches`.
pub(crate) struct ConfigPatches;

impl Child for ConfigPatches {
    const KIND: Kind = Kind::ConfigPatch;
    type Spec = ConfigPatchSpec;
    type Status = ConfigPatchStatus;
}

/// `GET .../{kind}`: a page of the tenant's objects.
pub(crate) async fn list<C: Child>(
    state: web::Data<AppState>,
    tenant: web::Path<String>,
    query: ListQuery,
) -> Result<HttpResponse, ApiError> {
    let page = query.without_watch()?;
    require_tenant(state.store.as_ref(), &tenant)?;
    Ok(reply::listing(&state.store.list(C::KIND, Some(tenant.into_inner()), page)))
}

/// `POST .../{kind}`: 201 with the new object.
pub(crate) async fn create<C: Child>(
    req: HttpRequest,
    state: web::Data<AppState>,
    tenant: web::Path<String>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError>
where
    Resource<C::Spec, C::Status>: Prepare + DeserializeOwned,
{
    let (name, draft) = body.for_create::<C::Spec, C::Status>()?;
    crate::audit::note_created(&req, &name);
    let tenant = tenant.into_inner();
    let object = state.store.create(Key::child(C::KIND, tenant.clone(), name), draft).await?;
    patch_refs::refresh(state.store.as_ref(), &tenant).await?;
    Ok(reply::object(StatusCode::CREATED, &object))
}

/// `GET .../{kind}/{name}`.
pub(crate) async fn get<C: Child>(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, name) = path.into_inner();
    let object = find(state.store.as_ref(), &Key::child(C::KIND, tenant, name))?;
    Ok(reply::object(StatusCode::OK, &object))
}

/// `PUT .../{kind}/{name}`.
pub(crate) async fn update<C: Child>(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError>
where
    Resource<C::Spec, C::Status>: Prepare + DeserializeOwned,
{
    let (tenant, name) = path.into_inner();
    let (draft, expected) = body.for_update::<C::Spec, C::Status>(&name)?;
    let object = state.store.update(Key::child(C::KIND, tenant.clone(), name), draft, expected).await?;
    patch_refs::refresh(state.store.as_ref(), &tenant).await?;
    Ok(reply::object(StatusCode::OK, &object))
}

/// `DELETE .../{kind}/{name}`: 204.
pub(crate) async fn delete<C: Child>(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, name) = path.into_inner();
    let deleted = state.store.delete(Key::child(C::KIND, tenant.clone(), name)).await?;
    patch_refs::refresh(state.store.as_ref(), &tenant).await?;
    Ok(reply::deleted(&deleted))
}

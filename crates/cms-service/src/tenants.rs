//! `/api/v1/tenants`: list (or watch), create, read, replace and delete tenants.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use cms_model::{Kind, TenantSpec, TenantStatus};
use cms_store::{Key, StoreError};

use crate::body::JsonBody;
use crate::error::ApiError;
use crate::lookup::find;
use crate::query::ListQuery;
use crate::state::AppState;
use crate::{patch_refs, reply, watch};

/// `GET /tenants`: a page of tenants, or with `watch=true` an event stream.
pub(crate) async fn list(state: web::Data<AppState>, query: ListQuery) -> Result<HttpResponse, ApiError> {
    if query.watch {
        return watch::respond(&state, Kind::Tenant, query.since).await;
    }
    Ok(reply::listing(&state.store.list(Kind::Tenant, None, query.page)))
}

/// `POST /tenants`: 201 with the new tenant, whose secrets bundle is
/// generated, sealed and written in the same transaction.
///
/// A name already in the cache is refused before any cryptography, so a
/// repeated POST costs nothing; the store's transaction still decides races.
pub(crate) async fn create(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let (name, mut draft) = body.for_create::<TenantSpec, TenantStatus>()?;
    crate::audit::note_created(&req, &name);
    let key = Key::tenant(name.clone());
    if state.store.get(&key).is_some() {
        return Err(StoreError::AlreadyExists(key.to_string()).into());
    }
    // Concurrent creates of one name: one generates the secrets, the others
    // are answered at once. The store's transaction still decides between
    // servers.
    let _reservation =
        state.creating.reserve(&name).ok_or_else(|| ApiError::Conflict(format!("{key} is being created")))?;
    let spec: TenantSpec =
        serde_json::from_value(draft.spec.clone()).map_err(|err| ApiError::internal(&err))?;
    let mut status = TenantStatus::default();
    patch_refs::apply(&mut status, &spec, &Default::default());
    draft.status = Some(serde_json::to_value(&status).map_err(|err| ApiError::internal(&err))?);
    let version = state.secrets.talos_version("spec.talosVersion", spec.talos_version.as_deref())?;
    draft.secrets = Some(state.secrets.generate_sealed(&name, version).await?);
    let object = state.store.create(key, draft).await?;
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
    let name = name.into_inner();
    let object = state.store.update(Key::tenant(name.clone()), draft, expected).await?;
    let object = patch_refs::after_write(state.store.as_ref(), object).await?;
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

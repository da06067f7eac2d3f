//! `/api/v1/tenants`: list (or watch), create, read, replace and delete
//! tenants. What each write means is `cms_tenancy::Tenancy`'s.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use cms_auth::Permission;
use cms_model::{Kind, Tenant};
use cms_store::{Key, Listing};

use crate::body::JsonBody;
use crate::error::ApiError;
use crate::lookup::find;
use crate::query::ListQuery;
use crate::state::AppState;
use crate::visibility;
use crate::watch::{WatchFilter, WatchPlan, WatchQuery};
use crate::{reply, watch};

/// `GET /tenants`: a page of the tenants `labelSelector` matches, or with
/// `watch=true` an event stream, which holds one of the caller's watch slots while it is open.
/// `fieldSelector=metadata.name=NAME` narrows either to that tenant; the
/// watch then follows that tenant alone (see `watch.rs`).
pub(crate) async fn list(
    req: HttpRequest,
    state: web::Data<AppState>,
    query: ListQuery,
    watching: WatchQuery,
) -> Result<HttpResponse, ApiError> {
    let filter =
        WatchFilter { name: watching.name, labels: Some(query.selector.clone()), ..WatchFilter::default() };
    let filter = visibility::narrow_tenants(filter, &crate::auth::caller(&req)?);
    if query.watch {
        let slot = watch::slot(&req, &state)?;
        let plan =
            WatchPlan { kind: Kind::Tenant, since: query.since, filter, bookmarks: watching.bookmarks };
        return watch::respond(&state, plan, slot).await;
    }
    if let Some(name) = &filter.name {
        let found = state.store().get(&Key::tenant(name.as_str())).filter(|object| filter.matches(object));
        let items: Vec<_> = found.into_iter().collect();
        let total = items.len() as u64;
        let items = items.into_iter().skip(query.page.offset).take(query.page.limit).collect();
        return Ok(reply::listing(&Listing { items, total }));
    }
    if filter.predicate.is_some() {
        let listing = visibility::filtered_page(state.store().as_ref(), Kind::Tenant, &filter, query.page);
        return Ok(reply::listing(&listing));
    }
    Ok(reply::listing(&state.store().select(Kind::Tenant, None, &query.selector, query.page)))
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
    let caller = crate::auth::caller(&req)?;
    visibility::require_on_create(
        state.store().as_ref(),
        &caller,
        &tenant.metadata.name,
        &tenant.metadata.labels,
    )?;
    let object = state.tenancy.create_tenant(tenant).await?;
    Ok(reply::object(StatusCode::CREATED, &object))
}

/// `GET /tenants/{name}`, or with `watch=true` the watch of that tenant
/// alone: the same stream as `GET /tenants?watch=true&fieldSelector=metadata.name=NAME`.
pub(crate) async fn get(
    req: HttpRequest,
    state: web::Data<AppState>,
    name: web::Path<String>,
    query: ListQuery,
    watching: WatchQuery,
) -> Result<HttpResponse, ApiError> {
    let name = name.into_inner();
    if query.watch {
        if watching.name.as_ref().is_some_and(|selected| *selected != name) {
            return Err(ApiError::BadRequest(format!(
                "fieldSelector names another tenant than the path's {name:?}"
            )));
        }
        let slot = watch::slot(&req, &state)?;
        let filter = WatchFilter { name: Some(name), labels: Some(query.selector), ..WatchFilter::default() };
        let filter = visibility::narrow_tenants(filter, &crate::auth::caller(&req)?);
        let plan =
            WatchPlan { kind: Kind::Tenant, since: query.since, filter, bookmarks: watching.bookmarks };
        return watch::respond(&state, plan, slot).await;
    }
    let object = find(state.store().as_ref(), &Key::tenant(name))?;
    Ok(reply::object(StatusCode::OK, &object))
}

/// `PUT /tenants/{name}`: replaces the spec, labels and annotations. A
/// caller whose grants give it the change must hold it on the tenant as
/// stored at the version it sends (checked here against the tenant the
/// route's guard judged) and as it would be with its new labels.
pub(crate) async fn update(
    req: HttpRequest,
    state: web::Data<AppState>,
    name: web::Path<String>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let tenant: Tenant = body.for_update(&name)?;
    let caller = crate::auth::caller(&req)?;
    if !caller.holds_everywhere(Permission::Write) {
        let current = find(state.store().as_ref(), &Key::tenant(name.as_str()))?;
        crate::auth::require_on_stored(&caller, Permission::Write, &name, Some(&current))?;
        let expected = tenant.metadata.read_at()?;
        if expected != current.resource_version {
            let current = current.resource_version;
            let what = Key::tenant(name.as_str()).to_string();
            return Err(cms_store::StoreError::Conflict { what, expected, current }.into());
        }
        visibility::require_on_new(&caller, Permission::Write, &name, &tenant.metadata.labels)?;
    }
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

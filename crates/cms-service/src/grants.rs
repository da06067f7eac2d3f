//! `/api/v1/grants`: create, list, read, replace and delete grants (admins
//! only). A grant gives `view` or `edit` on the tenants it covers to the
//! users, groups and workloads it names; `admin` is refused (400). The rules
//! are `cms_auth`'s, which applies a change to the next request on this
//! server and within its cache time on the others.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use cms_model::{Grant, GrantStatus, ObjectMeta};
use cms_store::GrantRecord;

use crate::body::{JsonBody, check_update};
use crate::error::ApiError;
use crate::query::ListQuery;
use crate::reply;
use crate::state::AppState;

/// How a grant is shown.
fn shown(record: &GrantRecord) -> Grant {
    let metadata = ObjectMeta {
        resource_version: Some(record.resource_version),
        created_at: Some(record.created_at),
        updated_at: Some(record.updated_at),
        ..ObjectMeta::named(record.name.clone())
    };
    Grant { metadata, spec: record.spec.clone(), status: GrantStatus {} }
}

/// Grants keep no labels or annotations: refused rather than dropped.
fn check_metadata(metadata: &ObjectMeta) -> Result<(), ApiError> {
    if !metadata.labels.is_empty() || !metadata.annotations.is_empty() {
        return Err(ApiError::Invalid("metadata: grants take no labels or annotations".into()));
    }
    Ok(())
}

/// `GET /grants`: a page of grants, sorted by name.
pub(crate) async fn list(state: web::Data<AppState>, query: ListQuery) -> Result<HttpResponse, ApiError> {
    let page = query.page_only("grants")?;
    let grants = state.auth.accounts().grants().await?;
    let total = grants.len() as u64;
    let items: Vec<Grant> = grants.iter().skip(page.offset).take(page.limit).map(shown).collect();
    reply::serialized(StatusCode::OK, &cms_model::List { items, total })
}

/// `POST /grants`: 201 with the new grant.
pub(crate) async fn create(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let grant: Grant = body.parse()?;
    crate::audit::note_created(&req, &grant.metadata.name);
    check_metadata(&grant.metadata)?;
    let record = state.auth.create_grant(&grant.metadata.name, grant.spec).await?;
    reply::serialized(StatusCode::CREATED, &shown(&record))
}

/// `GET /grants/{name}`.
pub(crate) async fn get(
    state: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let record = state
        .auth
        .accounts()
        .grant(name.to_string())
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("grant {:?} not found", name.as_str())))?;
    reply::serialized(StatusCode::OK, &shown(&record))
}

/// `PUT /grants/{name}`: replaces the spec, at the `resourceVersion` read.
pub(crate) async fn update(
    state: web::Data<AppState>,
    name: web::Path<String>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let grant: Grant = body.parse()?;
    let expected = check_update(&name, &grant.metadata)?;
    check_metadata(&grant.metadata)?;
    let record = state.auth.update_grant(&name, grant.spec, expected).await?;
    reply::serialized(StatusCode::OK, &shown(&record))
}

/// `DELETE /grants/{name}`: 204; what it gave ends with the next request.
pub(crate) async fn delete(
    state: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    state.auth.delete_grant(&name).await?;
    Ok(HttpResponse::NoContent().finish())
}

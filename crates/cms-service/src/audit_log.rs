//! `GET /api/v1/audit` (admins only): the audit log, newest first, a page at
//! a time, optionally only one actor's records or one tenant's.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use cms_model::List;

use crate::error::ApiError;
use crate::query::AuditQuery;
use crate::reply;
use crate::state::AppState;

/// `{items, total}`: the page of records and how many match the filters.
pub(crate) async fn list(state: web::Data<AppState>, query: AuditQuery) -> Result<HttpResponse, ApiError> {
    let (items, total) = state.audit.list(query.page, query.filter).await?;
    reply::serialized(StatusCode::OK, &List { items, total })
}

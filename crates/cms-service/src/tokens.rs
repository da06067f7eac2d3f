//! `/api/v1/users/{name}/tokens`: API tokens. Users manage their own; admins
//! manage everyone's.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use cms_model::{ApiToken, ApiTokenSpec, ApiTokenStatus, ObjectMeta, validate_name};
use cms_store::TokenRecord;

use crate::auth::caller;
use crate::body::JsonBody;
use crate::error::ApiError;
use crate::query::ListQuery;
use crate::reply;
use crate::state::AppState;

/// How a token is shown: its value only when `value` is given, at creation.
fn shown(record: &TokenRecord, value: Option<String>) -> ApiToken {
    let hours = (record.expires_at - record.created_at).num_hours();
    ApiToken {
        metadata: ObjectMeta {
            created_at: Some(record.created_at),
            ..ObjectMeta::named(record.name.clone())
        },
        spec: ApiTokenSpec { expires_in: format!("{hours}h") },
        status: ApiTokenStatus {
            token: value,
            expires_at: Some(record.expires_at),
            last_used_at: record.last_used_at,
        },
    }
}

/// Only the user itself or an admin may touch a user's tokens.
fn check_owner(req: &HttpRequest, user: &str) -> Result<(), ApiError> {
    Ok(caller(req)?.require_self_or_admin(user)?)
}

/// `GET /users/{name}/tokens`: the user's tokens, without their values.
pub(crate) async fn list(
    req: HttpRequest,
    state: web::Data<AppState>,
    user: web::Path<String>,
    query: ListQuery,
) -> Result<HttpResponse, ApiError> {
    check_owner(&req, &user)?;
    let page = query.page_only("API tokens")?;
    if state.auth.accounts().user(user.to_string()).await?.is_none() {
        return Err(ApiError::NotFound(format!("user {:?} not found", user.as_str())));
    }
    let tokens = state.auth.accounts().tokens(user.to_string()).await?;
    let total = tokens.len() as u64;
    let items: Vec<ApiToken> =
        tokens.iter().skip(page.offset).take(page.limit).map(|t| shown(t, None)).collect();
    reply::serialized(StatusCode::OK, &cms_model::List { items, total })
}

/// `POST /users/{name}/tokens`: 201 with the token's value, shown this once.
pub(crate) async fn create(
    req: HttpRequest,
    state: web::Data<AppState>,
    user: web::Path<String>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    check_owner(&req, &user)?;
    let token: ApiToken = body.parse()?;
    crate::audit::note_created(&req, &token.metadata.name);
    validate_name("metadata.name", &token.metadata.name)?;
    let hours = token.spec.hours()?;
    let (new, record) = state.auth.create_token(&user, &token.metadata.name, hours).await?;
    reply::serialized(StatusCode::CREATED, &shown(&record, Some(new.value)))
}

/// `DELETE /users/{name}/tokens/{tokenName}`: 204; the token stops working at once.
pub(crate) async fn revoke(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (user, token) = path.into_inner();
    check_owner(&req, &user)?;
    state.auth.revoke_token(&user, &token).await?;
    Ok(HttpResponse::NoContent().finish())
}

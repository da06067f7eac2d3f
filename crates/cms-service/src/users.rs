//! `/api/v1/users`: create, list, read, change and delete users (admins only).

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use cms_model::{ObjectMeta, User, UserSpec, UserStatus};
use cms_store::UserRecord;
use secrecy::SecretString;

use crate::body::{JsonBody, check_update};
use crate::error::ApiError;
use crate::query::ListQuery;
use crate::reply;
use crate::state::AppState;

/// How a user is shown: never with its password.
fn shown(record: &UserRecord) -> User {
    let metadata = ObjectMeta {
        resource_version: Some(record.resource_version),
        created_at: Some(record.created_at),
        updated_at: Some(record.updated_at),
        ..ObjectMeta::named(record.name.clone())
    };
    User { metadata, spec: UserSpec { role: record.role, password: None }, status: UserStatus {} }
}

/// `GET /users`: a page of users, sorted by name.
pub(crate) async fn list(state: web::Data<AppState>, query: ListQuery) -> Result<HttpResponse, ApiError> {
    let page = query.page_only("users")?;
    let users = state.auth.accounts().users().await?;
    let total = users.len() as u64;
    let items: Vec<User> = users.iter().skip(page.offset).take(page.limit).map(shown).collect();
    reply::serialized(StatusCode::OK, &cms_model::List { items, total })
}

/// `POST /users`: 201 with the new user.
pub(crate) async fn create(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let user: User = body.parse()?;
    crate::audit::note_created(&req, &user.metadata.name);
    user.metadata.validate()?;
    let password = user
        .spec
        .password
        .map(SecretString::from)
        .ok_or_else(|| ApiError::Invalid("spec.password: is required".into()))?;
    let record = state.auth.create_user(&user.metadata.name, user.spec.role, &password).await?;
    reply::serialized(StatusCode::CREATED, &shown(&record))
}

/// `GET /users/{name}`.
pub(crate) async fn get(
    state: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let record = state
        .auth
        .accounts()
        .user(name.to_string())
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("user {:?} not found", name.as_str())))?;
    reply::serialized(StatusCode::OK, &shown(&record))
}

/// `PUT /users/{name}`: changes the role, and the password when one is given.
pub(crate) async fn update(
    state: web::Data<AppState>,
    name: web::Path<String>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let user: User = body.parse()?;
    let expected = check_update(&name, &user.metadata)?;
    let password = user.spec.password.map(SecretString::from);
    let record = state.auth.update_user(&name, user.spec.role, password.as_ref(), Some(expected)).await?;
    reply::serialized(StatusCode::OK, &shown(&record))
}

/// `DELETE /users/{name}`: 204; its tokens stop working at once.
pub(crate) async fn delete(
    state: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    state.auth.delete_user(&name).await?;
    Ok(HttpResponse::NoContent().finish())
}

//! `POST /api/v1/auth/login`: a user name and password for a login token.

use actix_web::http::StatusCode;
use actix_web::web;
use actix_web::{HttpRequest, HttpResponse};
use cms_model::{LoginRequest, LoginResponse};
use secrecy::SecretString;

use crate::body::JsonBody;
use crate::error::ApiError;
use crate::reply;
use crate::state::AppState;

/// 200 with `{token, expiresAt}`; 401 for wrong credentials, whether or not
/// the user exists; 429 with `Retry-After` after too many failures.
pub(crate) async fn login(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let request: LoginRequest = body.parse()?;
    crate::audit::note_login(&req, &request.username);
    let password = SecretString::from(request.password);
    let (token, expires_at) = state.auth.login(&request.username, &password).await?;
    reply::serialized(StatusCode::OK, &LoginResponse { token, expires_at })
}

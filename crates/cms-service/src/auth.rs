//! Authentication and authorization of requests: each route is wrapped with
//! the access it needs (see [`crate::routes`]); the caller it finds is kept in
//! the request for handlers that need to know who asks.

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{AUTHORIZATION, HeaderMap};
use actix_web::middleware::Next;
use actix_web::{HttpMessage, web};
use cms_auth::{Caller, Credential, Permission};
use cms_model::UserRole;

use crate::error::ApiError;
use crate::state::AppState;

/// What a route needs from its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone, with no token: login and the operational endpoints.
    Public,
    /// A valid token whose user's role holds the permission.
    Requires(Permission),
}

/// Checks the caller against `access`, then runs the handler.
pub(crate) async fn guard(
    access: Access,
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let Access::Requires(permission) = access else {
        return next.call(req).await.map(ServiceResponse::map_into_boxed_body);
    };
    match authorize(&req, permission).await {
        Ok(()) => next.call(req).await.map(ServiceResponse::map_into_boxed_body),
        Err(err) => Ok(req.error_response(err)),
    }
}

/// Authenticates the caller, keeps it in the request (the audit log names
/// it, even when it is then refused), counts the request against its
/// identity's rate, and checks its permission.
async fn authorize(req: &ServiceRequest, permission: Permission) -> Result<(), ApiError> {
    let state = req
        .app_data::<web::Data<AppState>>()
        .ok_or_else(|| ApiError::Internal("application state is missing".into()))?;
    let caller = authenticate(req.headers(), state).await?;
    // Without authentication there is no identity to count against.
    let admitted = match state.options.insecure_disable_auth {
        true => Ok(()),
        false => state.auth.limits().admit(&caller),
    };
    let allowed = caller.require(permission);
    req.extensions_mut().insert(caller);
    admitted?;
    Ok(allowed?)
}

/// The caller the `Authorization` header of `headers` names: `Bearer
/// <token>`, or 401.
pub(crate) async fn authenticate(headers: &HeaderMap, state: &AppState) -> Result<Caller, ApiError> {
    if state.options.insecure_disable_auth {
        return Ok(Caller::local("anonymous", UserRole::Admin, Credential::Login));
    }
    let header = headers.get(AUTHORIZATION).ok_or_else(|| unauthorized("missing bearer token"))?;
    let token = header
        .to_str()
        .ok()
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|token| !token.is_empty())
        .ok_or_else(|| unauthorized("the Authorization header must be \"Bearer <token>\""))?;
    Ok(state.auth.authenticate(token).await?)
}

fn unauthorized(message: &str) -> ApiError {
    ApiError::Unauthorized(message.to_string())
}

/// The caller of the current request, as the route's guard found it.
pub(crate) fn caller(req: &actix_web::HttpRequest) -> Result<Caller, ApiError> {
    req.extensions()
        .get::<Caller>()
        .cloned()
        .ok_or_else(|| ApiError::Internal("route has no authenticated caller".into()))
}

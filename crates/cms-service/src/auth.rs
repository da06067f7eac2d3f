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
use crate::routes::Routed;
use crate::state::AppState;

/// What a route needs from its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone, with no token: login and the operational endpoints.
    Public,
    /// A valid token whose global role holds the permission.
    Requires(Permission),
    /// A valid token whose role on the tenant the path names (its first
    /// parameter) holds the permission: its global role joined with its
    /// grants on that tenant. A tenant it has no access to at all is 404,
    /// exactly as a missing one; one it sees but may not change so is 403.
    OnTenant(Permission),
    /// A valid token that holds the permission on some tenant, by its
    /// global role or a grant: the handler narrows the answer to those
    /// tenants (the lists across tenants), or checks the one the body names
    /// (a create).
    OnTenants(Permission),
}

impl Access {
    /// The permission the route needs, unless it is public.
    pub fn permission(self) -> Option<Permission> {
        match self {
            Access::Public => None,
            Access::Requires(permission) | Access::OnTenant(permission) | Access::OnTenants(permission) => {
                Some(permission)
            }
        }
    }
}

/// Notes the route in the request, checks the caller against `access`,
/// then runs the handler.
pub(crate) async fn guard(
    access: Access,
    routed: Routed,
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    req.extensions_mut().insert(routed);
    if access == Access::Public {
        return next.call(req).await.map(ServiceResponse::map_into_boxed_body);
    }
    match authorize(&req, access).await {
        Ok(()) => next.call(req).await.map(ServiceResponse::map_into_boxed_body),
        Err(err) => Ok(req.error_response(err)),
    }
}

/// Authenticates the caller, keeps it in the request (the audit log names
/// it, even when it is then refused), counts the request against its
/// identity's rate, and checks its access.
async fn authorize(req: &ServiceRequest, access: Access) -> Result<(), ApiError> {
    let state = req
        .app_data::<web::Data<AppState>>()
        .ok_or_else(|| ApiError::Internal("application state is missing".into()))?;
    let caller = authenticate(req.headers(), state).await?;
    // Without authentication there is no identity to count against.
    let admitted = match state.options.insecure_disable_auth {
        true => Ok(()),
        false => state.auth.limits().admit(&caller),
    };
    let allowed = match access {
        Access::Public => Ok(()),
        Access::Requires(permission) => caller.require(permission).map_err(ApiError::from),
        Access::OnTenants(permission) => caller.require_somewhere(permission).map_err(ApiError::from),
        Access::OnTenant(permission) => {
            let tenant = req.match_info().get("tenant").or_else(|| req.match_info().get("name"));
            let tenant = tenant.ok_or_else(|| ApiError::Internal("route names no tenant".into()))?;
            require_on_tenant(state, &caller, permission, tenant)
        }
    };
    req.extensions_mut().insert(caller);
    admitted?;
    allowed
}

/// Fails unless `caller` holds `permission` on tenant `name`: 404 as for a
/// missing tenant when it has no access to it at all, 403 when it sees it
/// but may not do this. A caller whose global role holds the permission
/// passes without a look at the tenant, whose handler answers for it.
pub(crate) fn require_on_tenant(
    state: &AppState,
    caller: &Caller,
    permission: Permission,
    name: &str,
) -> Result<(), ApiError> {
    if caller.holds_everywhere(permission) {
        return Ok(());
    }
    let tenant = state.store().get(&cms_store::Key::tenant(name));
    require_on_stored(caller, permission, name, tenant.as_deref())
}

/// Fails unless `caller` holds `permission` on tenant `name` as stored
/// (`None` when there is none), with the refusals of [`require_on_tenant`].
pub(crate) fn require_on_stored(
    caller: &Caller,
    permission: Permission,
    name: &str,
    tenant: Option<&cms_store::Object>,
) -> Result<(), ApiError> {
    let hidden = || ApiError::from(cms_auth::AuthError::TenantNotFound { tenant: name.to_string() });
    match tenant.and_then(|tenant| caller.role_on_tenant(tenant)) {
        None => Err(hidden()),
        Some(role) if permission.allows(role) => Ok(()),
        Some(role) => {
            Err(cms_auth::AuthError::Forbidden { role: role.as_str(), action: permission.action() }.into())
        }
    }
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

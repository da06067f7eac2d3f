//! `GET /tenants/{name}/health` and `GET /health`: cluster health from the
//! prober, which asks the tenant's nodes on request and caches for 15 s.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use cms_prober::{Health, ProberError};
use serde::Serialize;

use crate::error::ApiError;
use crate::reply;
use crate::state::AppState;

/// `GET /tenants/{name}/health`.
pub(crate) async fn tenant(
    state: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let health = state.prober.tenant(&name).await?;
    reply::serialized(StatusCode::OK, &health)
}

/// `GET /health`: every tenant.
pub(crate) async fn all(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    #[derive(Serialize)]
    struct AllTenants {
        tenants: Vec<Health>,
    }
    let tenants = state.prober.all().await;
    reply::serialized(StatusCode::OK, &AllTenants { tenants })
}

impl From<ProberError> for ApiError {
    fn from(err: ProberError) -> ApiError {
        match err {
            ProberError::TenantNotFound(_) => ApiError::NotFound(err.to_string()),
        }
    }
}

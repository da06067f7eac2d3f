//! `GET /tenants/{name}/health` and `GET /health`: cluster health from the
//! prober, which asks the tenant's nodes on request and caches for 15 s.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use cms_prober::{Health, ProberError};
use futures_util::StreamExt;
use serde::Serialize;

use crate::error::ApiError;
use crate::reply;
use crate::state::AppState;
use crate::visibility;

/// How many of a caller's own tenants `GET /health` probes at once.
const PROBES_AT_ONCE: usize = 8;

/// `GET /tenants/{name}/health`.
pub(crate) async fn tenant(
    state: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let health = state.prober.tenant(&name).await?;
    reply::serialized(StatusCode::OK, &health)
}

/// `GET /health`: every tenant the caller reads.
pub(crate) async fn all(req: HttpRequest, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    #[derive(Serialize)]
    struct AllTenants {
        tenants: Vec<Health>,
    }
    let tenants = match visibility::tenant_names(state.store().as_ref(), &crate::auth::caller(&req)?) {
        None => state.prober.all().await,
        // Only the caller's tenants are probed, in name order as `all` does.
        Some(visible) => {
            let mut names: Vec<String> = visible.into_iter().collect();
            names.sort();
            futures_util::stream::iter(names)
                .map(|name| {
                    let state = state.clone();
                    async move { state.prober.tenant(&name).await.ok() }
                })
                .buffered(PROBES_AT_ONCE)
                .filter_map(|health| async move { health })
                .collect()
                .await
        }
    };
    reply::serialized(StatusCode::OK, &AllTenants { tenants })
}

impl From<ProberError> for ApiError {
    fn from(err: ProberError) -> ApiError {
        match err {
            ProberError::TenantNotFound(_) => ApiError::NotFound(err.to_string()),
        }
    }
}

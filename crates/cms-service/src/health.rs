//! `GET /tenants/{name}/health` and `GET /health`: cluster health from the
//! prober, which asks the tenant's nodes on request and caches for 15 s.
//!
//! [`SealedCredentials`] gives the prober each tenant's node API
//! credentials: the sealed bundle, opened with the service's sealer, and a
//! short-lived admin client certificate from its OS CA.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use async_trait::async_trait;
use cms_model::UserRole;
use cms_nodeapi::NodeCredentials;
use cms_prober::{Health, ProberError, TenantCredentials};
use cms_store::Store;
use serde::Serialize;

use crate::error::ApiError;
use crate::reply;
use crate::secrets::Secrets;
use crate::state::AppState;

/// How long the client certificate of one probe lives.
const PROBE_CERT_TTL: Duration = Duration::from_secs(600);

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

/// The prober's credentials: each tenant's sealed bundle, opened.
pub(crate) struct SealedCredentials {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) secrets: Arc<Secrets>,
}

impl fmt::Debug for SealedCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SealedCredentials").finish_non_exhaustive()
    }
}

#[async_trait]
impl TenantCredentials for SealedCredentials {
    async fn credentials(&self, tenant: &str) -> Option<NodeCredentials> {
        let bundle = match self.secrets.open(self.store.as_ref(), tenant).await {
            Ok(bundle) => bundle,
            Err(ApiError::Conflict(_)) => return None,
            Err(err) => {
                tracing::warn!(tenant, "cannot open the tenant's secrets for a probe: {err}");
                return None;
            }
        };
        NodeCredentials::for_tenant(&bundle, UserRole::Admin, PROBE_CERT_TTL)
            .inspect_err(|err| tracing::warn!(tenant, "cannot make node API credentials: {err}"))
            .ok()
    }
}

//! `GET /api/v1/tenants/{name}/autoscaler-identity`: the Kubernetes Secret
//! a tenant's cluster autoscaler mounts to reach the service's
//! `externalgrpc` port, as a YAML file: the cloud config, the autoscaler CA
//! and a freshly issued client certificate (`cms_tenancy::autoscaler_ca`).
//!
//! Admins only (`DownloadAutoscalerIdentity`). Every download issues a new
//! certificate and is recorded on the audit log with the tenant as its
//! target; the certificates issued before stay valid until they expire.
//! 503 when the server serves no autoscaler port, 409 for a tenant being
//! deleted.

use actix_web::{HttpRequest, HttpResponse, web};

use crate::audit::note_recorded_read;
use crate::auth::caller;
use crate::error::ApiError;
use crate::reply::yaml_download;
use crate::state::AppState;

/// `GET /tenants/{name}/autoscaler-identity`.
pub(crate) async fn download(
    req: HttpRequest,
    state: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let name = name.into_inner();
    let caller = caller(&req)?;
    note_recorded_read(&req);
    if !req.query_string().is_empty() {
        return Err(ApiError::BadRequest("this route takes no query parameters".into()));
    }
    let access = state
        .autoscaler
        .as_ref()
        .ok_or_else(|| ApiError::Unavailable("this server serves no autoscaler port".into()))?;
    let tenant = state.tenancy.tenant(&name)?;
    if tenant.metadata.deletion_timestamp.is_some() {
        return Err(ApiError::Conflict(format!(
            "tenant {name:?} is being deleted: its autoscaler gets no new identity"
        )));
    }
    let yaml = cms_tenancy::autoscaler_secret_yaml(&access.ca, &tenant, &access.address)?;
    tracing::info!(user = %caller.user, tenant = %name, "issued an autoscaler identity");
    Ok(yaml_download(yaml, &format!("{name}-autoscaler.yaml")))
}

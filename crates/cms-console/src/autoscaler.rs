//! `GET /tenants/{name}/autoscaler-identity` with the session cookie: the
//! Kubernetes Secret a tenant's cluster autoscaler mounts, as the API's
//! `GET /api/v1/tenants/{name}/autoscaler-identity` serves it: the same
//! permission (`DownloadAutoscalerIdentity`, admins), document
//! (`cms_tenancy::autoscaler_secret_yaml`, a fresh certificate each time)
//! and headers. Every answer past the permission check is on the audit log,
//! as the API's are; the download is logged with the user, never with the
//! content. A server without an autoscaler port answers 503, a tenant being
//! deleted 409.

use cms_auth::Permission;
use http::header::{CACHE_CONTROL, CONTENT_DISPOSITION};
use http::{HeaderValue, StatusCode};

use crate::failure::Failure;
use crate::reply::{self, Outcome};
use crate::session::{self, Session};
use crate::{Console, Recorded, Request, Response};

/// What the console needs to issue identities: the autoscaler CA and the
/// `host:port` of the server's autoscaler port.
pub(crate) struct Access {
    pub(crate) ca: cms_talos::CertificateAuthority,
    pub(crate) address: String,
}

/// Whether the server serves an autoscaler port, for the tenant page's link.
pub(crate) fn served(console: &Console) -> bool {
    console.autoscaler.is_some()
}

/// The autoscaler identity of tenant `name`.
pub(crate) async fn identity(console: &Console, request: &Request, name: &str) -> Outcome {
    let session = session::require(console, request).await?;
    session.require(Permission::DownloadAutoscalerIdentity)?;
    let mut outcome = issue(console, request, &session, name);
    let response = match &mut outcome {
        Ok(response) => response,
        Err(refused) => refused.as_mut(),
    };
    // It holds a client certificate: the audit log keeps this read, served
    // or refused, as it keeps the API's.
    response.extensions_mut().insert(Recorded);
    outcome
}

fn issue(console: &Console, request: &Request, session: &Session, name: &str) -> Outcome {
    let refuse = |status: StatusCode, message: String| Failure::new(status, message).page(Some(session));
    if request.uri().query().is_some() {
        return Err(refuse(StatusCode::BAD_REQUEST, "This download takes no query parameters.".into()).into());
    }
    let Some(access) = console.autoscaler.as_deref() else {
        let message = "This server serves no autoscaler port, so it issues no autoscaler identities.";
        return Err(refuse(StatusCode::SERVICE_UNAVAILABLE, message.into()).into());
    };
    let tenant = console.tenancy.tenant(name).map_err(|err| Failure::from(err).page(Some(session)))?;
    if tenant.metadata.deletion_timestamp.is_some() {
        let message = format!("Tenant {name:?} is being deleted: its autoscaler gets no new identity.");
        return Err(refuse(StatusCode::CONFLICT, message).into());
    }
    let yaml = cms_tenancy::autoscaler_secret_yaml(&access.ca, &tenant, &access.address)
        .map_err(|err| Failure::from(err).page(Some(session)))?;
    tracing::info!(
        user = %session.caller.user,
        role = session.role_shown(),
        tenant = name,
        "issued an autoscaler identity from the console"
    );
    Ok(download(session, name, yaml))
}

/// The Secret as a YAML file to save. It holds a private key, so no cache
/// may keep it.
fn download(session: &Session, tenant: &str, yaml: String) -> Response {
    let mut response = reply::bytes(StatusCode::OK, "application/yaml", yaml);
    let disposition = format!("attachment; filename=\"{tenant}-autoscaler.yaml\"");
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        response.headers_mut().insert(CONTENT_DISPOSITION, value);
    }
    response.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    session.mark(response)
}

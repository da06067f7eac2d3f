//! `/api/v1/tenants/{name}/kubeconfig`, `/talosconfig` and `/secrets`: the
//! documents built from a tenant's secrets bundle, served as YAML files.
//!
//! Client configs carry a fresh client certificate whose identity follows
//! the caller's role on the tenant (its global role joined with its grants) (see `cms_talos::kubernetes_identity` and
//! `cms_talos::talos_role`); it lives 24 hours unless `?ttl=` asks for
//! less or more, up to the configured longest lifetime (a longer one is 400).
//! Every download is logged with the user, never with the content.

use std::time::Duration;

use actix_web::{HttpRequest, HttpResponse, web};
use cms_auth::Caller;
use cms_model::UserRole;
use serde::Deserialize;

use crate::auth::caller;
use crate::error::ApiError;
use crate::reply::yaml_download;
use crate::state::AppState;
use crate::visibility;

/// The query of a client-config download.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DownloadQuery {
    /// The certificate's lifetime, such as `2h` or `30m`.
    ttl: Option<String>,
}

impl DownloadQuery {
    /// The lifetime asked for, the default when none, checked against the cap.
    fn ttl(&self, state: &AppState) -> Result<Duration, ApiError> {
        let options = state.tenancy.secrets().options();
        let Some(text) = &self.ttl else { return Ok(options.client_cert_ttl) };
        let ttl = humantime::parse_duration(text).map_err(|err| {
            ApiError::BadRequest(format!("ttl {text:?} is not a duration such as 2h or 30m: {err}"))
        })?;
        if ttl < Duration::from_secs(60) {
            return Err(ApiError::BadRequest(format!("ttl {text:?} is shorter than one minute")));
        }
        if ttl > options.client_cert_max_ttl {
            return Err(ApiError::BadRequest(format!(
                "ttl {text:?} is longer than the longest allowed, {}",
                format_ttl(options.client_cert_max_ttl)
            )));
        }
        Ok(ttl)
    }
}

/// A lifetime as people write it: `24h` rather than `1day`.
fn format_ttl(ttl: Duration) -> String {
    match ttl.as_secs() {
        secs if secs % 3600 == 0 => format!("{}h", secs / 3600),
        secs if secs % 60 == 0 => format!("{}m", secs / 60),
        _ => humantime::format_duration(ttl).to_string(),
    }
}

fn log_issue(caller: &Caller, role: UserRole, tenant: &str, document: &str, ttl: Duration) {
    tracing::info!(
        user = %caller.user,
        role = role.as_str(),
        tenant,
        ttl = %format_ttl(ttl),
        "issued a {document}"
    );
}

/// `GET /tenants/{name}/kubeconfig`: the cluster's Kubernetes API as the
/// caller's role, at the control-plane endpoint.
pub(crate) async fn kubeconfig(
    req: HttpRequest,
    state: web::Data<AppState>,
    name: web::Path<String>,
    query: web::Query<DownloadQuery>,
) -> Result<HttpResponse, ApiError> {
    let caller = caller(&req)?;
    let ttl = query.ttl(&state)?;
    let role = visibility::role_on(state.store().as_ref(), &caller, &name)?;
    let (user, groups) = caller.kube_identity();
    let identity = cms_talos::KubeIdentity { role, name: user.as_deref(), groups: &groups };
    let yaml = state.tenancy.kubeconfig_as(&name, &identity, ttl).await?;
    log_issue(&caller, role, &name, "kubeconfig", ttl);
    Ok(yaml_download(yaml, &format!("{name}-kubeconfig.yaml")))
}

/// `GET /tenants/{name}/talosconfig`: the node API as the caller's role.
/// Its endpoints are the control-plane machines' addresses once they exist,
/// else the host of the control-plane endpoint.
pub(crate) async fn talosconfig(
    req: HttpRequest,
    state: web::Data<AppState>,
    name: web::Path<String>,
    query: web::Query<DownloadQuery>,
) -> Result<HttpResponse, ApiError> {
    let caller = caller(&req)?;
    let ttl = query.ttl(&state)?;
    let role = visibility::role_on(state.store().as_ref(), &caller, &name)?;
    let yaml = state.tenancy.talosconfig(&name, role, ttl).await?;
    log_issue(&caller, role, &name, "talosconfig", ttl);
    Ok(yaml_download(yaml, &format!("{name}-talosconfig.yaml")))
}

/// `GET /tenants/{name}/secrets`: the whole bundle in `talosctl gen secrets`
/// form, for break-glass access and migration. Admins only; always logged.
pub(crate) async fn secrets(
    req: HttpRequest,
    state: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let caller = caller(&req)?;
    let yaml = state.tenancy.secrets_yaml(&name).await?;
    tracing::info!(user = %caller.user, role = caller.role_name(), tenant = %name, "read a secrets bundle");
    Ok(yaml_download(yaml, &format!("{name}-secrets.yaml")))
}

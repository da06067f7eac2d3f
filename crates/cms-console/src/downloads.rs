//! `GET /tenants/{name}/kubeconfig` and `/talosconfig` with the session
//! cookie: the same documents, permission (`ReadClientConfig`), lifetimes
//! (the configured default, or `?ttl=` up to the configured longest) and
//! headers as the API's downloads. Each is logged with the user, never with
//! the content.

use std::time::Duration;

use cms_auth::Permission;
use http::header::{CACHE_CONTROL, CONTENT_DISPOSITION};
use http::{HeaderValue, StatusCode};

use crate::failure::Failure;
use crate::form::Form;
use crate::reply::{self, Outcome, Refused};
use crate::session::{self, Session};
use crate::{Console, Request, Response};

/// The kubeconfig of tenant `name`, as the caller's role on it (and, for a
/// user from the identity provider, its name and groups).
pub(crate) async fn kubeconfig(console: &Console, request: &Request, name: &str) -> Outcome {
    let (session, ttl) = allowed(console, request).await?;
    let (user, groups) = session.caller.kube_identity();
    let identity =
        cms_talos::KubeIdentity { role: session.tenant_role()?, name: user.as_deref(), groups: &groups };
    let yaml = console
        .tenancy
        .kubeconfig_as(name, &identity, ttl)
        .await
        .map_err(|err| Failure::from(err).page(Some(&session)))?;
    Ok(issued(&session, name, "kubeconfig", ttl, yaml))
}

/// The talosconfig of tenant `name`, as the caller's role on it.
pub(crate) async fn talosconfig(console: &Console, request: &Request, name: &str) -> Outcome {
    let (session, ttl) = allowed(console, request).await?;
    let yaml = console
        .tenancy
        .talosconfig(name, session.tenant_role()?, ttl)
        .await
        .map_err(|err| Failure::from(err).page(Some(&session)))?;
    Ok(issued(&session, name, "talosconfig", ttl, yaml))
}

/// The session, checked for the permission, and the certificate lifetime.
async fn allowed(console: &Console, request: &Request) -> Result<(Session, Duration), Refused> {
    let session = session::require(console, request).await?;
    session.require(Permission::ReadClientConfig)?;
    let ttl = ttl(console, Form::query(request).optional("ttl"))
        .map_err(|message| Failure::new(StatusCode::BAD_REQUEST, message).page(Some(&session)))?;
    Ok((session, ttl))
}

/// The lifetime asked for, or the default, checked as the API checks it.
fn ttl(console: &Console, asked: Option<&str>) -> Result<Duration, String> {
    let options = console.tenancy.secrets().options();
    let Some(text) = asked else { return Ok(options.client_cert_ttl) };
    let ttl = humantime::parse_duration(text)
        .map_err(|err| format!("ttl {text:?} is not a duration such as 2h or 30m: {err}"))?;
    if ttl < Duration::from_secs(60) {
        return Err(format!("ttl {text:?} is shorter than one minute"));
    }
    if ttl > options.client_cert_max_ttl {
        let longest = humantime::format_duration(options.client_cert_max_ttl);
        return Err(format!("ttl {text:?} is longer than the longest allowed, {longest}"));
    }
    Ok(ttl)
}

/// The document as a YAML file to save, logged. It holds credentials, so no
/// cache may keep it.
fn issued(session: &Session, tenant: &str, document: &str, ttl: Duration, yaml: String) -> Response {
    tracing::info!(
        user = %session.caller.user,
        role = session.role_shown(),
        tenant,
        ttl = %humantime::format_duration(ttl),
        "issued a {document} from the console"
    );
    let mut response = reply::bytes(StatusCode::OK, "application/yaml", yaml);
    let disposition = format!("attachment; filename=\"{tenant}-{document}.yaml\"");
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        response.headers_mut().insert(CONTENT_DISPOSITION, value);
    }
    response.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    session.mark(response)
}

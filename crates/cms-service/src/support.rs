//! `GET /api/v1/tenants/{name}/support`: the tenant's support bundle, a zip
//! streamed as `cms_support` builds it (its resources, its nodes' services,
//! logs and kernel log, its Kubernetes Nodes and events, the provisioning
//! tool's last runs; no secret). Editors and admins; every read is on the
//! audit log. A bundle holds one of its caller's watch slots until its
//! stream ends or its client goes: past the caller's limit of open watches,
//! follows and bundles, it is 429.

use actix_web::http::header::{CACHE_CONTROL, CONTENT_DISPOSITION, CONTENT_TYPE, HeaderValue};
use actix_web::{HttpRequest, HttpResponse, web};
use chrono::Utc;
use cms_support::{Sources, SupportOptions, bundle_file_name, support_bundle};
use futures_util::StreamExt;

use crate::audit::note_recorded_read;
use crate::auth::caller;
use crate::error::ApiError;
use crate::state::AppState;

/// `GET /tenants/{name}/support`.
pub(crate) async fn bundle(
    req: HttpRequest,
    state: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let caller = caller(&req)?;
    note_recorded_read(&req);
    let sources = Sources {
        store: state.store().clone(),
        secrets: Some(state.tenancy.secrets().clone()),
        nodes: state.nodes.clone(),
        kube: state.kube.clone(),
    };
    let slot = crate::watch::slot(&req, &state)?;
    let stream = support_bundle(sources, &name, SupportOptions::default())?;
    // The slot goes with the stream, whether it ends or is dropped unfinished.
    let stream = stream.map(move |piece| {
        let _slot = &slot;
        piece
    });
    tracing::info!(user = %caller.user, tenant = %name, "reading a support bundle");
    let file = bundle_file_name(&name, Utc::now());
    Ok(HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, HeaderValue::from_static("application/zip")))
        .insert_header((CONTENT_DISPOSITION, format!("attachment; filename=\"{file}\"")))
        .insert_header((CACHE_CONTROL, HeaderValue::from_static("no-store")))
        .streaming(stream))
}

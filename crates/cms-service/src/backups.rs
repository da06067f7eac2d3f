//! `/api/v1/tenants/{name}/backups`: a tenant's etcd backups, taken on
//! demand, listed, read, downloaded (the decrypted snapshot, streamed)
//! and restored. The work is `cms_backup::Backups`'; this module parses,
//! replies, logs who did what, and maps its failures to statuses.

use actix_web::http::StatusCode;
use actix_web::http::header::{CACHE_CONTROL, CONTENT_DISPOSITION, CONTENT_TYPE, HeaderValue};
use actix_web::{HttpRequest, HttpResponse, web};
use cms_backup::{Backup, BackupError, Backups};
use futures_util::StreamExt;
use serde::Serialize;

use crate::audit::{note_created, note_recorded_read};
use crate::auth::caller;
use crate::error::ApiError;
use crate::reply;
use crate::state::AppState;

/// The list of a tenant's backups.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct BackupList {
    /// Oldest first.
    items: Vec<Backup>,
}

/// What a restore did.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RestoreResult {
    /// The backup restored.
    backup: Backup,
    /// The control plane whose etcd started from it.
    machine: String,
}

fn backups(state: &AppState) -> Result<&Backups, ApiError> {
    state.backups.as_ref().ok_or_else(|| ApiError::Unavailable("backups are not configured".into()))
}

/// `POST /tenants/{name}/backups`: takes a backup now; 201 with it.
pub(crate) async fn take(
    req: HttpRequest,
    state: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let caller = caller(&req)?;
    let backup = backups(&state)?.take(&name).await?;
    note_created(&req, &backup.id);
    tracing::info!(user = %caller.user, tenant = %name, backup = %backup.id, "took a backup");
    reply::serialized(StatusCode::CREATED, &backup)
}

/// `GET /tenants/{name}/backups`.
pub(crate) async fn list(
    state: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let items = backups(&state)?.list(&name).await?;
    reply::serialized(StatusCode::OK, &BackupList { items })
}

/// `GET /tenants/{name}/backups/{id}`.
pub(crate) async fn get(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (name, id) = path.into_inner();
    let backup = backups(&state)?.get(&name, &id).await?;
    reply::serialized(StatusCode::OK, &backup)
}

/// `DELETE /tenants/{name}/backups/{id}`: 204. Admins only.
pub(crate) async fn delete(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let caller = caller(&req)?;
    let (name, id) = path.into_inner();
    backups(&state)?.delete(&name, &id).await?;
    tracing::info!(user = %caller.user, tenant = %name, backup = %id, "deleted a backup");
    Ok(HttpResponse::NoContent().finish())
}

/// `GET /tenants/{name}/backups/{id}/download`: the snapshot, decrypted and
/// verified chunk by chunk as it streams. A backup found altered midway
/// ends the transfer with an error, so the client never gets a whole
/// file from a bad one.
pub(crate) async fn download(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let caller = caller(&req)?;
    note_recorded_read(&req);
    let (name, id) = path.into_inner();
    let (backup, chunks) = backups(&state)?.download(&name, &id).await?;
    tracing::info!(user = %caller.user, tenant = %name, backup = %id, "downloaded a backup");
    let tenant = name.clone();
    let body = chunks.map(move |chunk| {
        chunk.map_err(|err| {
            tracing::warn!(tenant = %tenant, backup = %id, "backup download failed: {err}");
            std::io::Error::other(err.to_string())
        })
    });
    Ok(HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, HeaderValue::from_static("application/octet-stream")))
        .insert_header((CONTENT_DISPOSITION, format!("attachment; filename=\"{name}-{}.db\"", backup.id)))
        .insert_header((CACHE_CONTROL, HeaderValue::from_static("no-store")))
        .insert_header(("X-Content-SHA256", backup.sha256))
        .streaming(body))
}

/// `POST /tenants/{name}/backups/{id}/restore`: verifies the whole backup,
/// then uploads it to a control plane whose etcd waits for its bootstrap
/// and starts etcd from it. Admins only.
pub(crate) async fn restore(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let caller = caller(&req)?;
    let (name, id) = path.into_inner();
    tracing::info!(user = %caller.user, tenant = %name, backup = %id, "restoring a backup");
    let restored = backups(&state)?.restore(&name, &id).await?;
    let result = RestoreResult { backup: restored.backup, machine: restored.machine };
    reply::serialized(StatusCode::OK, &result)
}

/// Maps every backup failure to its status.
impl From<BackupError> for ApiError {
    fn from(err: BackupError) -> ApiError {
        match err {
            BackupError::TenantNotFound(_)
            | BackupError::BackupNotFound { .. }
            | BackupError::NotFound(_) => ApiError::NotFound(err.to_string()),
            BackupError::Busy(_)
            | BackupError::NoControlPlane { .. }
            | BackupError::Node { .. }
            | BackupError::Tampered
            | BackupError::Checksum
            | BackupError::Malformed(_) => ApiError::Conflict(err.to_string()),
            BackupError::InvalidKey(_) | BackupError::Io(_) | BackupError::Key(_) => ApiError::internal(&err),
        }
    }
}

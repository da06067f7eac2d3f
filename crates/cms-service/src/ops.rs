//! The operational endpoints at the server root: `/healthz`, `/readyz` and
//! `/version`.

use actix_web::http::StatusCode;
use actix_web::http::header::{CONTENT_TYPE, HeaderValue};
use actix_web::{HttpResponse, web};
use serde::Serialize;

use crate::error::ApiError;
use crate::reply;
use crate::state::AppState;

/// What this build is, as `/version` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BuildInfo {
    pub version: &'static str,
    pub git_commit: &'static str,
    pub build_time: &'static str,
}

/// The build this binary came from, recorded by the build script.
pub const BUILD_INFO: BuildInfo = BuildInfo {
    version: env!("CMS_BUILD_VERSION"),
    git_commit: env!("CMS_GIT_COMMIT"),
    build_time: env!("CMS_BUILD_TIME"),
};

fn text(body: &'static str) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8")))
        .body(body)
}

/// `GET /healthz`: the process is up.
pub(crate) async fn healthz() -> HttpResponse {
    text("ok")
}

/// `GET /readyz`: the store is migrated and answers.
pub(crate) async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    match state.store().ping().await {
        Ok(()) => Ok(text("ready")),
        Err(err) => {
            tracing::warn!(error = %err, "readiness check failed");
            Err(ApiError::Unavailable("not ready: the store does not answer".to_string()))
        }
    }
}

/// `GET /version`.
pub(crate) async fn version() -> Result<HttpResponse, ApiError> {
    reply::serialized(StatusCode::OK, &BUILD_INFO)
}

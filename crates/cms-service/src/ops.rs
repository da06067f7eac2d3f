//! The operational endpoints at the server root: `/healthz`, `/readyz` and
//! `/version`.

use actix_web::http::StatusCode;
use actix_web::http::header::{CONTENT_TYPE, HeaderValue};
use actix_web::{HttpResponse, web};
use serde::Serialize;

use crate::error::ApiError;
use crate::fallback::resource;
use crate::reply;
use crate::state::AppState;

/// What this build is, as `/version` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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

pub(crate) fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(resource("/healthz").route(web::get().to(healthz)))
        .service(resource("/readyz").route(web::get().to(readyz)))
        .service(resource("/version").route(web::get().to(version)));
}

fn text(body: &'static str) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8")))
        .body(body)
}

/// `GET /healthz`: the process is up.
async fn healthz() -> HttpResponse {
    text("ok")
}

/// `GET /readyz`: the store is migrated and answers.
async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    match state.store.ping().await {
        Ok(()) => Ok(text("ready")),
        Err(err) => {
            tracing::warn!(error = %err, "readiness check failed");
            Err(ApiError::Unavailable("not ready: the store does not answer".to_string()))
        }
    }
}

/// `GET /version`.
async fn version() -> Result<HttpResponse, ApiError> {
    reply::serialized(StatusCode::OK, &BUILD_INFO)
}

//! Answers for requests that no handler takes: unknown paths (404), known
//! paths with the wrong method (405, with `Allow`), and path or query values that the
//! framework's extractors reject (400), all in the API's error shape.

use actix_web::{HttpRequest, Resource, web};

use crate::error::ApiError;

/// A resource at `path` that answers 405 to the methods it does not route,
/// with `Allow` naming the ones it does (`allow`, such as `GET, POST`).
pub(crate) fn resource(path: &str, allow: &'static str) -> Resource {
    web::resource(path).default_service(web::to(move |req: HttpRequest| method_not_allowed(req, allow)))
}

/// The app's default service: no route matches the path.
pub(crate) async fn not_found(req: HttpRequest) -> Result<&'static str, ApiError> {
    Err(ApiError::NotFound(format!("no route for {}", req.path())))
}

async fn method_not_allowed(req: HttpRequest, allow: &'static str) -> Result<&'static str, ApiError> {
    Err(ApiError::MethodNotAllowed { method: req.method().to_string(), allow })
}

/// Registers error handlers for the framework's extractors, so that their
/// failures become [`ApiError::BadRequest`].
pub(crate) fn extractor_errors(cfg: &mut web::ServiceConfig) {
    cfg.app_data(
        web::PathConfig::default()
            .error_handler(|err, _| ApiError::BadRequest(format!("bad path: {err}")).into()),
    )
    .app_data(
        web::QueryConfig::default()
            .error_handler(|err, _| ApiError::BadRequest(format!("bad query: {err}")).into()),
    );
}

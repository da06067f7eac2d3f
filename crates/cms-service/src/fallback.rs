//! Answers for requests that no handler takes: unknown paths (404), known
//! paths with the wrong method (405), and path or query values that the
//! framework's extractors reject (400), all in the API's error shape.

use actix_web::{HttpRequest, Resource, web};

use crate::error::ApiError;

/// A resource at `path` that answers 405 to the methods it does not route.
pub(crate) fn resource(path: &str) -> Resource {
    web::resource(path).default_service(web::to(method_not_allowed))
}

/// The app's default service: no route matches the path.
pub(crate) async fn not_found(req: HttpRequest) -> Result<&'static str, ApiError> {
    Err(ApiError::NotFound(format!("no route for {}", req.path())))
}

async fn method_not_allowed(req: HttpRequest) -> Result<&'static str, ApiError> {
    Err(ApiError::MethodNotAllowed(req.method().to_string()))
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

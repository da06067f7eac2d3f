//! The root span of each request: tracing-actix-web's own, with its fields
//! and its OpenTelemetry parent, but with `http.route` found by comparing
//! the path's segments with the route table ([`routes::pattern_of`]). The
//! router's own lookup of the pattern, before it has routed the request,
//! runs the pattern match of every route before the one that matches.

use std::ops::Deref;

use actix_web::Error;
use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use tracing::Span;
use tracing_actix_web::{DefaultRootSpanBuilder, RootSpanBuilder};

use crate::routes;

/// The root span builder of the service.
pub(crate) struct RootSpans;

impl RootSpanBuilder for RootSpans {
    fn on_request_start(request: &ServiceRequest) -> Span {
        let request = &Routed(request);
        tracing_actix_web::root_span!(request)
    }

    fn on_request_end<B: MessageBody>(span: Span, outcome: &Result<ServiceResponse<B>, Error>) {
        DefaultRootSpanBuilder::on_request_end(span, outcome);
    }
}

/// A request whose route pattern comes from the route table.
struct Routed<'a>(&'a ServiceRequest);

impl Routed<'_> {
    fn match_pattern(&self) -> Option<String> {
        routes::pattern_of(self.0.path())
    }
}

impl Deref for Routed<'_> {
    type Target = ServiceRequest;

    fn deref(&self) -> &ServiceRequest {
        self.0
    }
}

//! OpenTelemetry traces of the real server, exported over OTLP/gRPC to a
//! collector in the test: a request's span continues the caller's
//! `traceparent` and carries the request id of the reply, store writes
//! open spans beneath it, and a reconcile's span holds its tool runs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use reqwest::Method;

use crate::provisioning::{CONVERGE, Engine, eventually, metal_tenant};

/// One exported span.
#[derive(Debug, Clone)]
struct Span {
    name: String,
    trace_id: String,
    span_id: String,
    parent: String,
    attributes: HashMap<String, String>,
}

/// The collector: keeps every span it is sent.
#[derive(Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<Span>>>,
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut spans = self.spans.lock().unwrap();
        for resource in request.into_inner().resource_spans {
            for scope in resource.scope_spans {
                for span in scope.spans {
                    let attributes = span
                        .attributes
                        .iter()
                        .map(|kv| {
                            let value = match kv.value.as_ref().and_then(|v| v.value.clone()) {
                                Some(Any::StringValue(text)) => text,
                                Some(Any::IntValue(n)) => n.to_string(),
                                Some(Any::BoolValue(b)) => b.to_string(),
                                other => format!("{other:?}"),
                            };
                            (kv.key.clone(), value)
                        })
                        .collect();
                    spans.push(Span {
                        name: span.name,
                        trace_id: hex(&span.trace_id),
                        span_id: hex(&span.span_id),
                        parent: hex(&span.parent_span_id),
                        attributes,
                    });
                }
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse { partial_success: None }))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_follow_a_request_through_the_store_and_a_reconcile_through_its_tool_runs() {
    let collector = Collector::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let service = TraceServiceServer::new(collector.clone());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );

    let engine = Engine::new();
    let server = engine
        .options()
        .env("CMS_OTLP_ENDPOINT", endpoint)
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .start()
        .await;
    let api = server.api();
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller = "00f067aa0ba902b7";
    let request = api
        .request(Method::POST, "/api/v1/tenants")
        .header("traceparent", format!("00-{trace_id}-{caller}-01"))
        .json(&metal_tenant("traced", 1, 1));
    let reply = api.send(request).await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    let request_id = reply.header("x-request-id").expect("a request id");

    let spans = || collector.spans.lock().unwrap().clone();
    let root = eventually("the request's span", CONVERGE, || async {
        spans().into_iter().find(|span| span.trace_id == trace_id && span.parent == caller)
    })
    .await;
    assert_eq!(root.attributes.get("request_id"), Some(&request_id), "{root:?}");
    assert_eq!(root.attributes.get("http.route").map(String::as_str), Some("/api/v1/tenants"), "{root:?}");
    let store = eventually("a store write beneath the request", CONVERGE, || async {
        spans().into_iter().find(|span| span.trace_id == trace_id && span.name.starts_with("store."))
    })
    .await;
    assert_ne!(store.span_id, root.span_id);

    let reconcile = eventually("the reconcile's span", CONVERGE, || async {
        spans().into_iter().find(|span| {
            span.name == "reconcile" && span.attributes.get("tenant").map(String::as_str) == Some("traced")
        })
    })
    .await;
    let apply = eventually("the apply beneath the reconcile", CONVERGE, || async {
        spans().into_iter().find(|span| {
            span.name == "tool.run"
                && span.trace_id == reconcile.trace_id
                && span.attributes.get("command").map(String::as_str) == Some("apply")
        })
    })
    .await;
    assert_eq!(apply.parent.len(), 16, "{apply:?}");
    assert!(
        spans().iter().all(|span| !span.attributes.values().any(|value| value.contains("BEGIN"))),
        "no key material in spans"
    );
}

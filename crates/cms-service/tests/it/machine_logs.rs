//! `/tenants/{tenant}/machines/{id}/logs` and `/dmesg` over the real app and
//! store, with a mocked node client: what the node sends is what the client
//! reads, bad queries and unknown machines never reach a node, a node's
//! failures map to 404, 502 or 503, a followed log ends with its client or
//! the server, and every read is on the audit log.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use actix_web::body::MessageBody;
use actix_web::test::{self, TestRequest};
use cms_model::{Kind, UserRole};
use cms_nodeapi::NodeApiError;
use cms_service::app;
use cms_store::{Draft, Key, Store};
use cms_tenancy::{LogChunks, LogsRequest, MockNodeClient, NodeError, NodeRef};
use serde_json::json;

use crate::{Harness, harness};

async fn machine<S>(h: &Harness<S>, tenant: &str, name: &str, address: Option<&str>) {
    let spec = match address {
        Some(address) => json!({"managementAddress": address}),
        None => json!({}),
    };
    let draft = Draft { spec, status: Some(json!({"stage": "ready"})), ..Draft::default() };
    h.store.create(Key::child(Kind::Machine, tenant, name), draft).await.unwrap();
}

fn chunks(parts: &[&str]) -> LogChunks {
    let parts: Vec<_> = parts.iter().map(|part| Ok(part.as_bytes().to_vec())).collect();
    Box::pin(futures_util::stream::iter(parts))
}

/// Counts the node streams open: one is while its guard lives.
#[derive(Default, Clone)]
struct Open(Arc<AtomicUsize>);

struct Guard(Arc<AtomicUsize>);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Open {
    /// A followed log: `first`, then nothing, for ever.
    fn stream(&self, first: &str) -> LogChunks {
        self.0.fetch_add(1, Ordering::SeqCst);
        let guard = Guard(self.0.clone());
        let first = futures_util::stream::iter([Ok(first.as_bytes().to_vec())]);
        Box::pin(futures_util::StreamExt::map(
            futures_util::StreamExt::chain(first, futures_util::stream::pending()),
            move |chunk| {
                let _open = &guard;
                chunk
            },
        ))
    }

    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

fn status(code: tonic::Code, message: &str) -> NodeError {
    NodeError::Api(NodeApiError::Status {
        endpoint: "10.0.0.5:50000".into(),
        status: Box::new(tonic::Status::new(code, message)),
    })
}

#[actix_web::test]
async fn a_log_is_sent_as_the_node_sends_it_and_every_read_is_audited() {
    let h = harness().await;
    h.tenant("acme").await;
    machine(&h, "acme", "m-1", Some("10.0.0.5:50000")).await;
    let mut nodes = MockNodeClient::new();
    nodes
        .expect_logs()
        .withf(|node: &NodeRef, request: &LogsRequest| {
            node.machine == "m-1"
                && node.management_address == "10.0.0.5:50000"
                && *request == LogsRequest { service: "etcd".into(), follow: false, tail_lines: Some(7) }
        })
        .times(1)
        .returning(|_, _| Ok(chunks(&["one\n", "two\nthr", "ee\n"])));
    nodes.expect_dmesg().returning(|_, _| Ok(chunks(&["k1\nk2\n", "k3\nk4\nk5\n"])));
    let app = test::init_service(app(h.state.clone().with_nodes(Arc::new(nodes)))).await;
    let editor = h.user("ed", UserRole::Edit).await;
    let get = |uri: &str, token: &str| {
        TestRequest::get().uri(uri).insert_header(("authorization", format!("Bearer {token}"))).to_request()
    };

    let response =
        test::call_service(&app, get("/api/v1/tenants/acme/machines/m-1/logs?service=etcd&tail=7", &editor))
            .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers().get("content-type").unwrap(), "text/plain; charset=utf-8");
    assert_eq!(test::read_body(response).await, "one\ntwo\nthree\n");

    // The kernel log's last two lines: counted once, then read again.
    let response =
        test::call_service(&app, get("/api/v1/tenants/acme/machines/m-1/dmesg?tail=2", &editor)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(test::read_body(response).await, "k4\nk5\n");

    // Viewers may not read logs.
    let viewer = h.user("vi", UserRole::View).await;
    let response =
        test::call_service(&app, get("/api/v1/tenants/acme/machines/m-1/logs?service=etcd", &viewer)).await;
    assert_eq!(response.status(), 403);

    let response = test::call_service(&app, get("/api/v1/audit?tenant=acme", &h.token)).await;
    let records: serde_json::Value = test::read_body_json(response).await;
    let reads: Vec<(String, String, String)> = records["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|record| record["method"] == "GET")
        .map(|record| {
            assert_eq!(
                record["target"],
                json!({"kind": "Machine", "tenant": "acme", "name": "m-1"}),
                "{record}"
            );
            let field = |name: &str| record[name].as_str().unwrap_or_default().to_string();
            (field("actor"), field("path"), record["status"].to_string())
        })
        .collect();
    assert_eq!(
        reads,
        [
            ("ed".into(), "/api/v1/tenants/acme/machines/m-1/dmesg?service=kernel".into(), "200".into()),
            ("ed".into(), "/api/v1/tenants/acme/machines/m-1/logs?service=etcd".into(), "200".into()),
        ]
    );
}

#[actix_web::test]
async fn bad_queries_and_unknown_machines_never_reach_a_node() {
    let h = harness().await;
    h.tenant("acme").await;
    machine(&h, "acme", "m-1", Some("10.0.0.5:50000")).await;
    machine(&h, "acme", "fresh", None).await;
    // No expectation: a call to the node fails the test.
    let app = test::init_service(app(h.state.clone().with_nodes(Arc::new(MockNodeClient::new())))).await;
    let base = "/api/v1/tenants/acme/machines";
    for (uri, status, code) in [
        (format!("{base}/m-1/logs"), 400, "BadRequest"),
        (format!("{base}/m-1/logs?service=Etcd"), 400, "BadRequest"),
        (format!("{base}/m-1/logs?service=..%2Fetc"), 400, "BadRequest"),
        (format!("{base}/m-1/logs?service={}", "a".repeat(64)), 400, "BadRequest"),
        (format!("{base}/m-1/logs?service=etcd&tail=0"), 400, "BadRequest"),
        (format!("{base}/m-1/logs?service=etcd&tail=10001"), 400, "BadRequest"),
        (format!("{base}/m-1/logs?service=etcd&follow=yes"), 400, "BadRequest"),
        (format!("{base}/m-1/logs?service=etcd&other=1"), 400, "BadRequest"),
        (format!("{base}/m-1/dmesg?service=etcd"), 400, "BadRequest"),
        (format!("{base}/nobody/logs?service=etcd"), 404, "NotFound"),
        (format!("{base}/nobody/dmesg"), 404, "NotFound"),
        ("/api/v1/tenants/nobody/machines/m-1/logs?service=etcd".to_string(), 404, "NotFound"),
        (format!("{base}/fresh/logs?service=etcd"), 503, "Unavailable"),
    ] {
        let request =
            TestRequest::get().uri(&uri).insert_header(("authorization", format!("Bearer {}", h.token)));
        let response = test::call_service(&app, request.to_request()).await;
        assert_eq!(response.status().as_u16(), status, "{uri}");
        let body: serde_json::Value = test::read_body_json(response).await;
        assert_eq!(
            (body["code"].as_str(), body["status"].as_u64()),
            (Some(code), Some(u64::from(status))),
            "{uri}"
        );
    }
    // Without a node client, the routes say so.
    let h2 = harness().await;
    h2.tenant("acme").await;
    machine(&h2, "acme", "m-1", Some("10.0.0.5:50000")).await;
    let mut without = h2.state.clone();
    without.nodes = None;
    let bare = test::init_service(cms_service::app(without)).await;
    let request = TestRequest::get()
        .uri(&format!("{base}/m-1/logs?service=etcd"))
        .insert_header(("authorization", format!("Bearer {}", h2.token)));
    let response = test::call_service(&bare, request.to_request()).await;
    assert_eq!(response.status().as_u16(), 503);
    let body: serde_json::Value = test::read_body_json(response).await;
    let message = body["error"].as_str().unwrap_or_default();
    assert!(message.contains("no node API client"), "{message}");
}

#[actix_web::test]
async fn a_node_failure_before_the_log_starts_is_one_line() {
    let h = harness().await;
    h.tenant("acme").await;
    machine(&h, "acme", "m-1", Some("10.0.0.5:50000")).await;
    let mut nodes = MockNodeClient::new();
    nodes.expect_logs().returning(|_, request| {
        Err(match request.service.as_str() {
            "nope" => status(tonic::Code::Unknown, "log \"nope\" was not registered"),
            "down" => status(tonic::Code::Unavailable, "connection reset"),
            _ => status(tonic::Code::Internal, "failed to read log\nsecret: do-not-show"),
        })
    });
    let app = test::init_service(app(h.state.clone().with_nodes(Arc::new(nodes)))).await;
    let send = |service: &str| {
        let uri = format!("/api/v1/tenants/acme/machines/m-1/logs?service={service}");
        TestRequest::get()
            .uri(&uri)
            .insert_header(("authorization", format!("Bearer {}", h.token)))
            .to_request()
    };
    for (service, status, code) in
        [("nope", 404, "NotFound"), ("down", 503, "Unavailable"), ("etcd", 502, "BadGateway")]
    {
        let response = test::call_service(&app, send(service)).await;
        assert_eq!(response.status().as_u16(), status);
        let body: serde_json::Value = test::read_body_json(response).await;
        assert_eq!((body["code"].as_str(), body["status"].as_u64()), (Some(code), Some(u64::from(status))));
        let message = body["error"].as_str().unwrap();
        assert!(message.contains("machine \"m-1\"") && !message.contains('\n'), "{message}");
        assert!(!message.contains("do-not-show"), "{message}");
    }
}

#[actix_web::test]
async fn a_followed_log_ends_with_its_client_and_with_the_server() {
    let h = harness().await;
    h.tenant("acme").await;
    machine(&h, "acme", "m-1", Some("10.0.0.5:50000")).await;
    let open = Open::default();
    let mut nodes = MockNodeClient::new();
    let streams = open.clone();
    nodes
        .expect_logs()
        .withf(|_, request: &LogsRequest| request.follow && request.tail_lines == Some(100))
        .returning(move |_, _| Ok(streams.stream("first\n")));
    let app = test::init_service(app(h.state.clone().with_nodes(Arc::new(nodes)))).await;
    let request = || {
        TestRequest::get()
            .uri("/api/v1/tenants/acme/machines/m-1/logs?service=kubelet&follow=true")
            .insert_header(("authorization", format!("Bearer {}", h.token)))
            .to_request()
    };

    // The client reads the first chunk, then goes away.
    let response = test::call_service(&app, request()).await;
    assert_eq!(response.status(), 200);
    let mut body = Box::pin(response.into_body());
    let first = std::future::poll_fn(|cx| body.as_mut().poll_next(cx)).await.unwrap().unwrap();
    assert_eq!(first, "first\n");
    assert_eq!(open.count(), 1);
    drop(body);
    assert_eq!(open.count(), 0, "the node's stream went with the client");

    // A shutdown ends a followed log.
    let response = test::call_service(&app, request()).await;
    let mut body = Box::pin(response.into_body());
    let first = std::future::poll_fn(|cx| body.as_mut().poll_next(cx)).await.unwrap().unwrap();
    assert_eq!((first.as_ref(), open.count()), (b"first\n".as_slice(), 1));
    h.state.shutdown.cancel();
    assert!(std::future::poll_fn(|cx| body.as_mut().poll_next(cx)).await.is_none(), "the log ended");
    assert_eq!(open.count(), 0);
}

/// The next piece of a streaming body: `Some(true)` a chunk, `Some(false)`
/// an error, `None` its end. A body silent for a minute fails the test.
async fn next_piece(body: &mut std::pin::Pin<Box<actix_web::body::BoxBody>>) -> Option<bool> {
    let next = std::future::poll_fn(|cx| body.as_mut().poll_next(cx));
    let piece = tokio::time::timeout(std::time::Duration::from_secs(60), next).await;
    piece.expect("the body is still open a minute later").map(|piece| piece.is_ok())
}

#[actix_web::test]
async fn a_followed_log_ends_once_its_caller_may_no_longer_read_it() {
    let options = cms_service::ServiceOptions {
        watch_heartbeat: std::time::Duration::from_millis(50),
        ..cms_service::ServiceOptions::default()
    };
    let h = crate::harness_with(options).await;
    h.tenant("acme").await;
    machine(&h, "acme", "m-1", Some("10.0.0.5:50000")).await;
    let open = Open::default();
    let mut nodes = MockNodeClient::new();
    let streams = open.clone();
    nodes.expect_logs().returning(move |_, _| Ok(streams.stream("first\n")));
    let app = test::init_service(app(h.state.clone().with_nodes(Arc::new(nodes)))).await;
    let follow = |token: &str| {
        TestRequest::get()
            .uri("/api/v1/tenants/acme/machines/m-1/logs?service=kubelet&follow=true")
            .insert_header(("authorization", format!("Bearer {token}")))
            .to_request()
    };

    // A user whose only access is a grant on the tenant.
    let grant = r#"{"metadata":{"name":"gina-acme"},"spec":{"role":"edit",
        "subjects":[{"kind":"User","name":"gina"}],"tenants":{"names":["acme"]}}}"#;
    assert_eq!(h.post("/api/v1/grants", grant).await.status.as_u16(), 201);
    let user = r#"{"metadata":{"name":"gina"},"spec":{"role":"none","password":"gina-password"}}"#;
    assert_eq!(h.post("/api/v1/users", user).await.status.as_u16(), 201);
    let login = h.post("/api/v1/auth/login", r#"{"username":"gina","password":"gina-password"}"#).await;
    let gina = login.json()["token"].as_str().expect("a token").to_string();
    let response = test::call_service(&app, follow(&gina)).await;
    assert_eq!(response.status(), 200);
    let mut body = Box::pin(response.into_body());
    assert_eq!(next_piece(&mut body).await, Some(true), "the first chunk");
    // Heartbeats pass while the grant stands: the log stays open.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(open.count(), 1, "the log is open while its caller may read it");
    assert_eq!(h.delete("/api/v1/grants/gina-acme").await.status.as_u16(), 204);
    assert_eq!(next_piece(&mut body).await, Some(false), "the log is cut short");
    assert_eq!(next_piece(&mut body).await, None);
    drop(body);
    assert_eq!(open.count(), 0, "the node's stream went with it");

    // A user deleted mid-stream: its token stops working, and the log ends.
    let ed = h.user("ed", UserRole::Edit).await;
    let response = test::call_service(&app, follow(&ed)).await;
    assert_eq!(response.status(), 200);
    let mut body = Box::pin(response.into_body());
    assert_eq!(next_piece(&mut body).await, Some(true));
    h.state.auth.delete_user("ed").await.unwrap();
    assert_eq!(next_piece(&mut body).await, Some(false), "the log is cut short");
    assert_eq!(next_piece(&mut body).await, None);
    drop(body);
    assert_eq!(open.count(), 0);
}

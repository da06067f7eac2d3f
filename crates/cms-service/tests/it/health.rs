//! `GET /tenants/{name}/health` and `GET /health` over the real app and
//! store, with fake nodes on loopback ports serving the tenant's OS CA, and
//! a clock the tests move.

use std::sync::Arc;
use std::time::Duration;

use actix_web::body::BoxBody;
use actix_web::dev::{Service, ServiceResponse};
use actix_web::test::{self, TestRequest};
use chrono::Utc;
use cms_fake_node::{FakeNode, FakeNodeOptions};
use cms_model::{Kind, UserRole};
use cms_prober::{ManualClock, ProberOptions};
use cms_service::app;
use cms_store::{Draft, Key, Store};
use cms_talos::{Sealer, SealingKey, SecretsBundle};
use serde_json::{Value, json};

use crate::{Harness, SEALING_KEY, harness};

/// The bundle of a tenant the API created, opened as the service does.
async fn bundle<S>(h: &Harness<S>, tenant: &str) -> SecretsBundle {
    let sealed = h.store.secrets(tenant.to_string()).await.unwrap().expect("the tenant has secrets");
    let sealer = Sealer::new(SealingKey::new("test", SEALING_KEY).unwrap());
    sealer.open_bundle(tenant, &sealed).unwrap()
}

async fn machine<S>(h: &Harness<S>, tenant: &str, id: &str, role: &str, address: String) {
    let draft = Draft {
        spec: json!({"managementAddress": address}),
        status: Some(json!({"stage": "ready", "role": role})),
        ..Draft::default()
    };
    h.store.create(Key::child(Kind::Machine, tenant, id), draft).await.unwrap();
}

/// The app over the harness's state, with a prober on `clock`.
async fn app_with_clock<S>(
    h: &Harness<S>,
    clock: Arc<ManualClock>,
) -> impl Service<actix_http::Request, Response = ServiceResponse<BoxBody>, Error = actix_web::Error> {
    let prober = crate::prober(&h.state.tenancy, clock, ProberOptions::default());
    test::init_service(app(h.state.clone().with_prober(prober))).await
}

async fn get(
    service: &impl Service<actix_http::Request, Response = ServiceResponse<BoxBody>, Error = actix_web::Error>,
    token: &str,
    uri: &str,
) -> Value {
    let request = TestRequest::get().uri(uri).insert_header(("authorization", format!("Bearer {token}")));
    let response = test::call_service(service, request.to_request()).await;
    assert_eq!(response.status().as_u16(), 200);
    serde_json::from_slice(&test::read_body(response).await).unwrap()
}

#[actix_web::test]
async fn a_tenant_is_probed_through_its_own_ca() {
    let h = harness().await;
    h.tenant("demo").await;
    let node =
        FakeNode::start(FakeNodeOptions::new(bundle(&h, "demo").await.os_ca().clone()).version("v1.13.1"))
            .await
            .unwrap();
    machine(&h, "demo", "cp-1", "controlplane", node.addr().to_string()).await;
    machine(&h, "demo", "w-1", "worker", node.addr().to_string()).await;
    let viewer = h.user("viewer", UserRole::View).await;
    let reply = h.get_as("/api/v1/tenants/demo/health", &viewer).await;
    assert_eq!(reply.status.as_u16(), 200, "{}", reply.text());
    let health = reply.json();
    assert_eq!(health["tenant"], "demo");
    assert_eq!(health["reachable"], true, "{health}");
    assert_eq!(health["talosVersion"], "1.13.1");
    assert_eq!(health["machineCount"], 2);
    assert!(health["probedAt"].as_str().is_some_and(|at| at.ends_with('Z')), "{health}");
    assert!(health.get("error").is_none());
    // Both machines are asked at once; the control plane's answer decides,
    // and the worker's call may be dropped before it reaches the node.
    assert!((1..=2).contains(&node.calls().len()), "{:?}", node.calls());
    h.get("/api/v1/tenants/nobody/health").await.error(404, "NotFound");
}

#[actix_web::test]
async fn a_second_request_within_15_seconds_is_served_from_the_cache() {
    let h = harness().await;
    h.tenant("demo").await;
    let node = FakeNode::start(FakeNodeOptions::new(bundle(&h, "demo").await.os_ca().clone())).await.unwrap();
    machine(&h, "demo", "cp-1", "controlplane", node.addr().to_string()).await;
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let service = app_with_clock(&h, clock.clone()).await;
    let first = get(&service, &h.token, "/api/v1/tenants/demo/health").await;
    assert_eq!(first["reachable"], true, "{first}");
    clock.advance(Duration::from_millis(14_999));
    assert_eq!(get(&service, &h.token, "/api/v1/tenants/demo/health").await, first);
    assert_eq!(node.calls().len(), 1, "the second request did not reach the node");
    clock.advance(Duration::from_millis(1));
    get(&service, &h.token, "/api/v1/tenants/demo/health").await;
    assert_eq!(node.calls().len(), 2, "after 15 s the node is asked again");
}

#[actix_web::test]
async fn a_hundred_concurrent_requests_make_one_probe() {
    let h = harness().await;
    h.tenant("demo").await;
    let options =
        FakeNodeOptions::new(bundle(&h, "demo").await.os_ca().clone()).latency(Duration::from_millis(500));
    let node = FakeNode::start(options).await.unwrap();
    machine(&h, "demo", "cp-1", "controlplane", node.addr().to_string()).await;
    let requests = (0..100).map(|_| get(&h.service, &h.token, "/api/v1/tenants/demo/health"));
    let answers = futures_util::future::join_all(requests).await;
    assert_eq!(node.calls().len(), 1);
    assert!(answers.iter().all(|answer| answer == &answers[0] && answer["reachable"] == true));
}

#[actix_web::test]
async fn health_covers_every_tenant() {
    let h = harness().await;
    h.tenant("b-up").await;
    h.tenant("c-down").await;
    let draft = Draft { spec: json!({"kubernetesVersion": "1.31.0"}), ..Draft::default() };
    h.store.create(Key::tenant("a-bare"), draft).await.unwrap();
    let node = FakeNode::start(FakeNodeOptions::new(bundle(&h, "b-up").await.os_ca().clone())).await.unwrap();
    machine(&h, "b-up", "cp-1", "controlplane", node.addr().to_string()).await;
    let body = h.get("/api/v1/health").await.json();
    let tenants = body["tenants"].as_array().expect("a list of tenants");
    let summary: Vec<(&str, bool, &str)> = tenants
        .iter()
        .map(|t| {
            (t["tenant"].as_str().unwrap(), t["reachable"] == true, t["error"].as_str().unwrap_or_default())
        })
        .collect();
    assert_eq!(
        summary,
        [("a-bare", false, "no credentials"), ("b-up", true, ""), ("c-down", false, "no reachable machines")]
    );
}

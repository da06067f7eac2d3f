//! Cluster health against the real binary, with `cms-fake-node` processes
//! on loopback ports as the tenants' nodes.
//!
//! Tenants are created through the API, so their secrets are the server's
//! own; the server is then stopped, the machines are written into its store
//! as the reconciler would (there is no API to create machines), and the
//! server is started again on the same data. The 15 s cache expiry needs an
//! injectable clock, so it is shown in `cms-service`'s and `cms-prober`'s
//! tests; here, a second request within 15 s reaches no node.

use std::time::{Duration, Instant};

use cms_e2e::fixtures::tenant;
use cms_e2e::nodes::{FakeNodeProcess, StoreWriter};
use cms_e2e::{Api, Server};
use serde_json::Value;

/// Starts a server, creates `tenants` through its API and stops it.
async fn stopped_with(tenants: &[&str]) -> cms_e2e::Stopped {
    let server = Server::start().await;
    for name in tenants {
        server.api().post("/api/v1/tenants", &tenant(name)).await.expect(201);
    }
    server.terminate().await
}

async fn health(api: &Api, tenant: &str) -> Value {
    api.get(&format!("/api/v1/tenants/{tenant}/health")).await.expect(200)
}

#[tokio::test]
async fn the_first_machine_in_probing_order_that_answers_gives_the_version() {
    let stopped = stopped_with(&["demo"]).await;
    let store = StoreWriter::open(stopped.data_dir()).await;
    let ca = store.os_ca_dir("demo").await;
    let worker = FakeNodeProcess::start(&ca, &["--version", "v1.12.5"]);
    let cp_down = FakeNodeProcess::start(&ca, &["--fail", "etcd is down"]);
    let cp_failing = FakeNodeProcess::start(&ca, &["--fail", "apid is restarting"]);
    // The worker's name sorts first: the order comes from the roles.
    store.machine("demo", "a-worker", "worker", &worker.addr().to_string()).await;
    store.machine("demo", "b-cp", "controlplane", &cp_down.addr().to_string()).await;
    store.machine("demo", "c-cp", "controlplane", &cp_failing.addr().to_string()).await;
    drop(store);
    let server = stopped.restart().await;

    let result = health(&server.api(), "demo").await;
    assert_eq!(result["tenant"], "demo");
    assert_eq!(result["reachable"], true, "{result}");
    assert_eq!(result["talosVersion"], "1.12.5");
    assert_eq!(result["machineCount"], 3);
    assert!(result["probedAt"].as_str().is_some_and(|at| at.ends_with('Z')), "{result}");
    assert!(result.get("error").is_none(), "{result}");

    // Every machine is asked at once; the control planes failed, so the
    // worker's answer is the first in probing order.
    let (first, second, third) =
        (cp_down.calls_at_least(1), cp_failing.calls_at_least(1), worker.calls_at_least(1));
    assert_eq!((first.len(), second.len(), third.len()), (1, 1, 1));
    assert!(third.iter().all(|call| call["method"] == "Version" && call["clientCertificate"] == true));

    let again = health(&server.api(), "demo").await;
    assert_eq!(again, result, "served from the cache");
    assert_eq!(worker.calls().len() + cp_down.calls().len() + cp_failing.calls().len(), 3);
}

#[tokio::test]
async fn all_machines_down_gives_no_reachable_machines_within_the_time_bound() {
    let stopped = stopped_with(&["down"]).await;
    let store = StoreWriter::open(stopped.data_dir()).await;
    let ca = store.os_ca_dir("down").await;
    let hanging = FakeNodeProcess::start(&ca, &["--latency", "60s"]);
    let gone = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    store.machine("down", "cp-1", "controlplane", &hanging.addr().to_string()).await;
    store.machine("down", "w-1", "worker", &gone.to_string()).await;
    drop(store);
    let server = stopped.restart().await;

    let started = Instant::now();
    let result = health(&server.api(), "down").await;
    let took = started.elapsed();
    assert_eq!(result["reachable"], false, "{result}");
    assert_eq!(result["error"], "no reachable machines");
    assert_eq!(result["machineCount"], 2);
    assert!(result.get("talosVersion").is_none() && result.get("probedAt").is_none(), "{result}");
    // One deadline (2 s) for the hanging machine; the closed port refuses at once.
    assert!(took >= Duration::from_secs(2) && took < Duration::from_secs(4), "{took:?}");
    assert_eq!(hanging.calls_at_least(1).len(), 1);
}

#[tokio::test]
async fn no_credentials_another_ca_and_every_tenant_in_health() {
    let stopped = stopped_with(&["impostor", "other"]).await;
    let store = StoreWriter::open(stopped.data_dir()).await;
    store.tenant_without_secrets("bare").await;
    // The node of `impostor` serves a certificate from `other`'s CA.
    let wrong_ca = FakeNodeProcess::start(&store.os_ca_dir("other").await, &[]);
    store.machine("impostor", "cp-1", "controlplane", &wrong_ca.addr().to_string()).await;
    let unasked = FakeNodeProcess::start(&store.os_ca_dir("impostor").await, &[]);
    store.machine("bare", "cp-1", "controlplane", &unasked.addr().to_string()).await;
    drop(store);
    let server = stopped.restart().await;
    let api = server.api();

    let bare = health(&api, "bare").await;
    assert_eq!((bare["reachable"].clone(), bare["error"].clone()), (false.into(), "no credentials".into()));
    let impostor = health(&api, "impostor").await;
    assert_eq!(impostor["error"], "no reachable machines", "{impostor}");
    assert!(wrong_ca.calls().is_empty(), "TLS failed before any call");
    assert!(unasked.calls().is_empty(), "no credentials, no call");

    let all = api.get("/api/v1/health").await.expect(200);
    let names: Vec<&str> =
        all["tenants"].as_array().expect("tenants").iter().filter_map(|t| t["tenant"].as_str()).collect();
    assert_eq!(names, ["bare", "impostor", "other"]);
    api.get("/api/v1/tenants/nobody/health").await.expect_error(404, "NotFound");
}

#[tokio::test]
async fn a_hundred_concurrent_requests_make_one_probe() {
    let stopped = stopped_with(&["busy"]).await;
    let store = StoreWriter::open(stopped.data_dir()).await;
    let node = FakeNodeProcess::start(&store.os_ca_dir("busy").await, &["--latency", "500ms"]);
    store.machine("busy", "cp-1", "controlplane", &node.addr().to_string()).await;
    drop(store);
    let server = stopped.restart().await;
    let api = server.api();
    let requests = (0..100).map(|_| health(&api, "busy"));
    let results = futures_util::future::join_all(requests).await;
    assert!(results.iter().all(|result| result == &results[0] && result["reachable"] == true));
    assert_eq!(node.calls_at_least(1).len(), 1, "one probe for 100 requests");
}

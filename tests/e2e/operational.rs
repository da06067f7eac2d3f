//! `/healthz`, `/readyz`, `/version`, request ids, and the data directory.

use std::time::Duration;

use cms_e2e::Server;
use cms_e2e::fixtures::{TENANTS, tenant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operational_endpoints_answer_without_a_token() {
    let server = Server::start().await;
    let api = server.api().with_token(None);

    let health = api.get("/healthz").await;
    assert_eq!(health.status, 200, "{health:?}");
    assert_eq!(health.body.trim_end(), "ok");
    assert!(health.header("content-type").is_some_and(|value| value.starts_with("text/plain")), "{health:?}");

    // Ready once migrations have run; allow the server a moment after binding.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let ready = loop {
        let ready = api.get("/readyz").await;
        if ready.status == 200 || tokio::time::Instant::now() >= deadline {
            break ready;
        }
        ready.expect_error(503, "Unavailable");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(ready.status, 200, "{ready:?}");
    assert_eq!(ready.body.trim_end(), "ready");

    let version = api.get("/version").await.expect(200);
    let fields = version.as_object().expect("a JSON object");
    for field in ["version", "gitCommit", "buildTime"] {
        let value = fields.get(field).and_then(|value| value.as_str());
        assert!(
            value.is_some_and(|value| !value.is_empty()),
            "/version has a non-empty string {field}: {version}"
        );
    }

    // Every response carries a request id, errors included, and they differ.
    let first = api.get(TENANTS).await.header("x-request-id").expect("a request id");
    let second = api.get("/api/v1/nothing").await.header("x-request-id").expect("a request id on errors");
    assert!(!first.is_empty() && first != second, "{first} {second}");

    // Writes land in the data directory the server was given.
    server.api().post(TENANTS, &tenant("rho")).await.expect(201);
    let entries = std::fs::read_dir(server.data_dir().path()).expect("the data directory exists").count();
    assert!(entries > 0, "the store lives in CMS_DATA_DIR");
}

//! `GET /metrics` of the real server, parsed with a Prometheus text-format
//! parser: requests, watch streams, reconciles, tool runs, probes and the
//! certificate expiry gauge move when their events happen; tenant names
//! reach authenticated scrapes only.

use std::time::Duration;

use cms_e2e::Watch;
use prometheus_parse::{Scrape, Value as Sample};

use crate::provisioning::{CONVERGE, Engine, eventually, metal_tenant, provisioned};

/// The parsed scrape; a body the parser rejects fails the test.
pub(crate) async fn scrape(api: &cms_e2e::Api) -> Scrape {
    let reply = api.get("/metrics").await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let content_type = reply.header("content-type").unwrap_or_default();
    assert!(content_type.starts_with("text/plain; version=0.0.4"), "{content_type}");
    Scrape::parse(reply.body.lines().map(|line| Ok(line.to_string()))).expect("the Prometheus text format")
}

/// The sum of the samples of `name` whose labels include `labels`; for a
/// histogram, its count.
pub(crate) fn value(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|sample| sample.metric == name)
        .filter(|sample| labels.iter().all(|(key, want)| sample.labels.get(key) == Some(*want)))
        .map(|sample| match &sample.value {
            Sample::Counter(v) | Sample::Gauge(v) | Sample::Untyped(v) => *v,
            Sample::Histogram(buckets) => buckets.last().map_or(0.0, |bucket| bucket.count),
            Sample::Summary(_) => 0.0,
        })
        .sum()
}

/// Waits until the server ended `passes` more reconciles than it had
/// ended when called: a positive marker that passes went by, before a
/// check that they changed nothing.
pub(crate) async fn reconciled(api: &cms_e2e::Api, passes: u32) {
    let before = value(&scrape(api).await, "cms_reconciles_total", &[]);
    eventually("more reconciles", CONVERGE, || async {
        let now = value(&scrape(api).await, "cms_reconciles_total", &[]);
        (now >= before + f64::from(passes)).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn series_move_when_their_events_happen() {
    let engine = Engine::new();
    // A closed watch is noticed at the next heartbeat.
    let server = engine.options().env("CMS_WATCH_HEARTBEAT", "1s").start().await;
    let api = server.api();
    let before = scrape(&api).await;
    let created = [("route", "/api/v1/tenants"), ("method", "POST"), ("status", "201")];
    assert_eq!(value(&before, "cms_http_requests_total", &created), 0.0);

    api.post("/api/v1/tenants", &metal_tenant("metered", 1, 1)).await.expect(201);
    api.get("/api/v1/tenants/nope").await.expect_error(404, "NotFound");
    provisioned(&api, "metered").await;
    let after = scrape(&api).await;
    assert_eq!(value(&after, "cms_http_requests_total", &created), 1.0);
    let missing = [("route", "/api/v1/tenants/:name"), ("method", "GET"), ("status", "404")];
    assert_eq!(value(&after, "cms_http_requests_total", &missing), 1.0);
    assert!(value(&after, "cms_http_request_duration_seconds", &[("method", "POST")]) >= 1.0);
    assert!(value(&after, "cms_reconciles_total", &[("outcome", "ok")]) >= 1.0);
    assert!(value(&after, "cms_reconcile_duration_seconds", &[]) >= 1.0);
    assert!(value(&after, "cms_tool_runs_total", &[("command", "apply"), ("outcome", "ok")]) >= 1.0);
    assert!(value(&after, "cms_tool_run_duration_seconds", &[("command", "apply")]) >= 1.0);
    // The tenant's CAs were opened to render its hosts' configs.
    let expiry = value(&after, "cms_certificate_expiry_timestamp_seconds", &[]);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    assert!(expiry > now + 300.0 * 86_400.0, "the CAs live for years: {expiry}");

    // A probe of a tenant whose hosts do not answer.
    let probes = value(&after, "cms_probes_total", &[("result", "unreachable")]);
    api.get("/api/v1/tenants/metered/health").await.expect(200);
    let probed = scrape(&api).await;
    assert_eq!(value(&probed, "cms_probes_total", &[("result", "unreachable")]), probes + 1.0);

    // Watch streams are counted while they are open.
    let open = value(&probed, "cms_watch_streams", &[]);
    let mut watch = Watch::open(&api, "", &[]).await;
    watch.initial_burst(Duration::from_secs(10)).await;
    assert_eq!(value(&scrape(&api).await, "cms_watch_streams", &[]), open + 1.0);
    drop(watch);
    eventually("the closed watch to be uncounted", CONVERGE, || async {
        (value(&scrape(&api).await, "cms_watch_streams", &[]) == open).then_some(())
    })
    .await;
}

/// The age of a tenant's newest backup is the series labelled with its
/// name: an anonymous scrape leaves it out, a scrape with a token has it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_scrapes_hold_no_tenant_name() {
    let engine = Engine::new();
    let server = engine.options().start().await;
    let api = server.api();
    let (_bundle, _cluster) = crate::backups::converged_tenant(&server).await;
    api.post("/api/v1/tenants/acme/backups", &serde_json::json!({})).await.expect(201);
    let labelled = |scrape: &Scrape| {
        scrape.samples.iter().any(|sample| {
            sample.metric == "cms_backup_newest_age_seconds" && sample.labels.get("tenant") == Some("acme")
        })
    };
    assert!(labelled(&scrape(&api).await), "the admin's scrape has the tenant's series");
    let anonymous = api.with_token(None);
    let reply = anonymous.get("/metrics").await;
    assert!(!reply.body.contains("acme"), "{}", reply.body);
    assert!(!labelled(&scrape(&anonymous).await));
    assert!(value(&scrape(&anonymous).await, "cms_http_requests_total", &[]) > 0.0, "the rest is served");
}

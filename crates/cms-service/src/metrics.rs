//! Prometheus metrics: the process-wide recorder, `GET /metrics` in the
//! Prometheus text format, and the middleware that counts and times every
//! request by route pattern, method and status.
//!
//! The other crates record through the `metrics` facade (reconciles, tool
//! runs, probes); without the recorder their calls cost next to nothing.
//! Labels never carry paths, only route patterns, so the number of series
//! stays bounded whatever the clients send. The one label with tenant names
//! is the age of each tenant's newest backup, which only tenants with a
//! backup have: series with a `tenant` label are served to authenticated
//! callers, or to anyone when `ServiceOptions::metrics_tenant_labels` is
//! set, and left out for anonymous ones.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Instant;

use actix_web::body::BoxBody;
use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::Method;
use actix_web::http::header::AUTHORIZATION;
use actix_web::http::header::{CONTENT_TYPE, HeaderValue};
use actix_web::middleware::Next;
use actix_web::{HttpMessage, HttpRequest, HttpResponse, web};
use cms_auth::Permission;
use metrics::{
    Counter, Histogram, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram,
};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::error::ApiError;
use crate::routes::Routed;
use crate::state::AppState;

/// Histogram buckets for request latencies, in seconds.
const REQUEST_BUCKETS: [f64; 14] =
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 60.0];
/// Histogram buckets for reconciles and tool runs, in seconds.
const RUN_BUCKETS: [f64; 12] = [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0];

/// Histogram buckets for the entries of a store transaction, up to the
/// most a batch takes.
const BATCH_BUCKETS: [f64; 7] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];

/// The open watch streams.
pub(crate) const WATCHERS: &str = "cms_watch_streams";

/// The recorder's handle, installed on first use. When another recorder is
/// installed already (a test harness's), the handle renders what this one
/// recorded: nothing.
pub fn handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let builder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Prefix("cms_http_".into()), &REQUEST_BUCKETS)
            .and_then(|builder| {
                builder.set_buckets_for_metric(Matcher::Prefix("cms_reconcile_".into()), &RUN_BUCKETS)
            })
            .and_then(|builder| {
                builder.set_buckets_for_metric(Matcher::Prefix("cms_tool_".into()), &RUN_BUCKETS)
            })
            .and_then(|builder| {
                builder.set_buckets_for_metric(Matcher::Full(cms_store::BATCH_SIZE.into()), &BATCH_BUCKETS)
            })
            .expect("the buckets are not empty");
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!(
                "a metrics recorder was installed already; /metrics shows only what it records here"
            );
        }
        describe();
        upkeep(handle.clone());
        handle
    })
}

/// How often the recorded durations are folded into their histograms.
const UPKEEP_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// Folds the recorded durations into their histograms every
/// [`UPKEEP_INTERVAL`], on a thread of its own: the recorder keeps every
/// sample until then, so a server that nobody scrapes would otherwise grow
/// by each request's.
fn upkeep(handle: PrometheusHandle) {
    let started = std::thread::Builder::new().name("cms-metrics-upkeep".into()).spawn(move || {
        loop {
            std::thread::sleep(UPKEEP_INTERVAL);
            handle.run_upkeep();
        }
    });
    if let Err(err) = started {
        tracing::warn!(error = %err, "could not start the metrics upkeep; durations are folded when scraped");
    }
}

fn describe() {
    describe_counter!("cms_http_requests_total", "HTTP requests, by route pattern, method and status.");
    describe_histogram!(
        "cms_http_request_duration_seconds",
        metrics::Unit::Seconds,
        "Time to the response head, by route pattern and method."
    );
    describe_gauge!(WATCHERS, "Watch (SSE) streams open now.");
    describe_counter!(
        crate::audit::ANONYMOUS_REQUESTS,
        "Requests that named nobody (no valid credential, no known user name, a login whose password was not checked), by status: counted here, not kept on the audit log."
    );
    describe_counter!(
        crate::audit::FAILED_LOGINS_NOT_KEPT,
        "Failed logins against a real account past the 5 a minute per user the audit log keeps: counted here, not kept."
    );
    describe_histogram!(
        cms_store::BATCH_SIZE,
        "Writes and audit records committed together by one transaction of the store's writer."
    );
    describe_counter!("cms_reconciles_total", "Reconciles of tenants, by outcome (ok or error).");
    describe_histogram!(
        "cms_reconcile_duration_seconds",
        metrics::Unit::Seconds,
        "Reconcile durations, by outcome."
    );
    describe_counter!("cms_tool_runs_total", "Provisioning tool runs, by command and outcome.");
    describe_histogram!(
        "cms_tool_run_duration_seconds",
        metrics::Unit::Seconds,
        "Provisioning tool run durations, by command."
    );
    describe_counter!(
        "cms_drift_checks_total",
        "Drift checks of tenants, by outcome (clean, drifted, skipped without a plan, failed)."
    );
    describe_counter!("cms_drift_corrections_total", "Applies asked for to correct drifted tenants.");
    describe_gauge!("cms_drift_plans_running", "Drift plans running now on this replica.");
    describe_gauge!("cms_drifted_tenants", "Tenants whose Drifted condition is True.");
    describe_counter!("cms_probes_total", "Health probes of tenants, by result.");
    describe_counter!(cms_backup::TAKEN, "Tenants' etcd backups taken, by trigger (on_demand or scheduled).");
    describe_counter!(cms_backup::FAILED, "Tenants' etcd backups that failed, by trigger.");
    describe_counter!(
        cms_backup::BYTES,
        metrics::Unit::Bytes,
        "Snapshot bytes backed up, before encryption."
    );
    describe_gauge!(
        cms_backup::NEWEST_AGE,
        metrics::Unit::Seconds,
        "Seconds since each tenant's newest successful backup, by tenant; updated every schedule tick."
    );
    describe_gauge!(
        cms_tenancy::CERTIFICATE_EXPIRY_GAUGE,
        metrics::Unit::Seconds,
        "The earliest expiry (Unix time) among the tenant CA certificates this process has opened."
    );
}

/// The label that carries tenant names.
const TENANT_LABEL: &str = "tenant";

/// `GET /metrics`: every series for a caller with a valid bearer token or
/// when the setting allows it; for anonymous callers, the series without a
/// `tenant` label. An invalid token is 401, as on any route.
pub(crate) async fn render(req: HttpRequest, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let text = handle().render();
    let text = match tenant_names_shown(&req, &state).await? {
        true => text,
        false => without_tenant_series(&text),
    };
    Ok(HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8")))
        .body(text))
}

/// Whether the caller of `req` sees tenant names: the setting says so, or
/// it sent a bearer token that authenticates a caller who may read every
/// tenant (every global role may). A caller whose grants give it some
/// tenants gets the series without tenant names, as an anonymous one.
async fn tenant_names_shown(req: &HttpRequest, state: &AppState) -> Result<bool, ApiError> {
    if state.options.metrics_tenant_labels || state.options.insecure_disable_auth {
        return Ok(true);
    }
    if !req.headers().contains_key(AUTHORIZATION) {
        return Ok(false);
    }
    let caller = crate::auth::authenticate(req.headers(), state).await?;
    Ok(caller.holds_everywhere(Permission::Read))
}

/// `text`, in the Prometheus text format, without the samples that have a
/// `tenant` label; comments stay.
fn without_tenant_series(text: &str) -> String {
    let mut kept = String::with_capacity(text.len());
    for line in text.lines().filter(|line| line.starts_with('#') || !has_label(line, TENANT_LABEL)) {
        kept.push_str(line);
        kept.push('\n');
    }
    kept
}

/// Whether the sample `line` (`name{a="x",b="y"} 1`) has the label `wanted`.
/// Values are skipped as the format quotes them (`\"` and `\\` inside), so
/// a value that reads like a label is not taken for one.
fn has_label(line: &str, wanted: &str) -> bool {
    let Some((_, mut rest)) = line.split_once('{') else { return false };
    loop {
        rest = rest.trim_start_matches([',', ' ']);
        let Some((name, value)) = rest.split_once("=\"") else { return false };
        if name.trim() == wanted {
            return true;
        }
        let mut chars = value.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => {
                    chars.next();
                }
                Some((at, '"')) => break at,
                Some(_) => {}
                None => return false,
            }
        };
        rest = &value[end + 1..];
        if rest.starts_with('}') {
            return false;
        }
    }
}

/// Counts and times one request. The route is read once the router has
/// matched it, which is cheap; before, finding it walks the route table.
/// Each worker keeps the series it has recorded to, so that a request
/// neither builds labels nor looks a series up in the shared registry.
pub(crate) async fn record(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let started = Instant::now();
    let method = method_label(req.method());
    let result = next.call(req).await.map(ServiceResponse::map_into_boxed_body);
    let (route, status) = match &result {
        Ok(response) => (Route::of(response.request()), response.status().as_u16()),
        Err(err) => (Route::Matched(None), err.as_response_error().status_code().as_u16()),
    };
    let elapsed = started.elapsed().as_secs_f64();
    SERIES.with_borrow_mut(|series| {
        let key = (route, method, status);
        if let Some((requests, duration)) = series.get(&key) {
            requests.increment(1);
            duration.record(elapsed);
            return;
        }
        let (requests, duration) = request_series(&key.0, method, status);
        requests.increment(1);
        duration.record(elapsed);
        series.insert(key, (requests, duration));
    });
    result
}

/// A route, a method and a status.
type SeriesKey = (Route, &'static str, u16);

/// The route of a request, for its label.
#[derive(Debug, PartialEq, Eq, Hash)]
enum Route {
    /// A route of the table, as its guard noted it.
    Table(Routed),
    /// What the router matched otherwise (the console's pages, a method
    /// the route does not serve), `None` when nothing matched.
    Matched(Option<String>),
}

impl Route {
    fn of(req: &HttpRequest) -> Route {
        let routed = req.extensions().get::<Routed>().copied();
        routed.map_or_else(|| Route::Matched(req.match_pattern()), Route::Table)
    }
}

thread_local! {
    /// The request series this thread has recorded to. Bounded: routes,
    /// methods and statuses are finite.
    static SERIES: RefCell<HashMap<SeriesKey, (Counter, Histogram)>> = RefCell::new(HashMap::new());
}

/// The request counter and duration histogram of one route, method and status.
fn request_series(route: &Route, method: &'static str, status: u16) -> (Counter, Histogram) {
    // Installed before any series is handed out, so that none is a no-op.
    handle();
    let route = match route {
        Route::Table(routed) => route_label(&routed.pattern()),
        Route::Matched(pattern) => pattern.as_deref().map_or_else(|| "unmatched".to_string(), route_label),
    };
    let requests = counter!("cms_http_requests_total", "route" => route.clone(), "method" => method, "status" => status.to_string());
    let duration = histogram!("cms_http_request_duration_seconds", "route" => route, "method" => method);
    (requests, duration)
}

/// A route pattern as a label, its parameters written `:name` rather than
/// `{name}`, which simple text-format parsers take for the end of the labels.
fn route_label(pattern: &str) -> String {
    pattern.replace('{', ":").replace('}', "")
}

/// The method as a label: the standard ones by name, any other as `other`.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// One open watch stream, counted in [`WATCHERS`] while it lives.
#[derive(Debug)]
pub(crate) struct OpenWatch;

impl OpenWatch {
    pub(crate) fn new() -> OpenWatch {
        gauge!(WATCHERS).increment(1.0);
        OpenWatch
    }
}

impl Drop for OpenWatch {
    fn drop(&mut self) {
        gauge!(WATCHERS).decrement(1.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        assert_eq!(route_label("/api/v1/tenants/{name}/machines/{id}"), "/api/v1/tenants/:name/machines/:id");
        assert_eq!(method_label(&Method::from_bytes(b"BREW").unwrap()), "other");
        assert_eq!(method_label(&Method::PUT), "PUT");
    }

    #[test]
    fn tenant_series_are_found_by_their_label_name() {
        let check =
            |line: &str, expected: bool| assert_eq!(has_label(line, TENANT_LABEL), expected, "{line}");
        check(r#"cms_backup_newest_age_seconds{tenant="acme"} 5"#, true);
        check(r#"some_series{kind="a",tenant="acme"} 1"#, true);
        check(r#"some_series{kind="a, tenant=\"acme\"",other="\\"} 1"#, false);
        check(r#"some_series{tenants="acme"} 1"#, false);
        check("cms_watch_streams 0", false);
        check(r#"cms_http_requests_total{route="/api/v1/tenants/:name",method="GET",status="200"} 3"#, false);
        let text = "# HELP a A.\n# TYPE a gauge\na{tenant=\"acme\"} 1\nb{route=\"/\"} 2\n";
        assert_eq!(without_tenant_series(text), "# HELP a A.\n# TYPE a gauge\nb{route=\"/\"} 2\n");
    }
}

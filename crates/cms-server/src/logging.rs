//! Log output and traces: `tracing` events on standard output, as text
//! lines or JSON objects (`CMS_LOG_FORMAT`), and, when `CMS_OTLP_ENDPOINT`
//! is set, spans exported over OTLP/gRPC to an OpenTelemetry collector.
//!
//! Request spans come from `tracing-actix-web` (with the W3C `traceparent`
//! of the caller), and carry the request id; store writes, reconciles and
//! tool runs open spans of their own beneath whatever span is current.

use std::io::IsTerminal;

use anyhow::Context;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The crate whose start-up lines would repeat the bound address.
const QUIET_TARGET: &str = "actix_server";

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line, with the fields of the current spans.
    Json,
}

/// The installed telemetry; [`Telemetry::shutdown`] flushes the spans not
/// yet exported.
pub(crate) struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    pub(crate) fn shutdown(self) {
        if let Some(provider) = self.provider
            && let Err(err) = provider.shutdown()
        {
            tracing::warn!("could not flush the last spans: {err}");
        }
    }
}

/// Installs the subscriber. The filter is `filter` (`CMS_LOG` or `log` in
/// the file) when given, else `RUST_LOG`, else `info`.
///
/// The HTTP server library's own start-up lines are kept at `warn` unless
/// the filter names it, so that exactly one line says `listening on <addr>`.
pub(crate) fn init(
    filter: Option<&str>,
    format: LogFormat,
    otlp_endpoint: Option<&str>,
) -> anyhow::Result<Telemetry> {
    let directives = match filter {
        Some(directives) => directives.to_string(),
        None => std::env::var("RUST_LOG").ok().filter(|value| !value.trim().is_empty()).unwrap_or_default(),
    };
    let directives = if directives.trim().is_empty() { "info".to_string() } else { directives };
    let mut filter = EnvFilter::try_new(&directives).context("invalid log filter (CMS_LOG or RUST_LOG)")?;
    if !directives.contains(QUIET_TARGET) {
        filter = filter.add_directive(format!("{QUIET_TARGET}=warn").parse().context("invalid directive")?);
    }
    let (text, json) = match format {
        LogFormat::Text => {
            (Some(tracing_subscriber::fmt::layer().with_ansi(std::io::stdout().is_terminal())), None)
        }
        LogFormat::Json => (
            None,
            Some(tracing_subscriber::fmt::layer().json().with_current_span(true).with_span_list(false)),
        ),
    };
    let provider = otlp_endpoint.map(tracer_provider).transpose()?;
    let traces = provider
        .as_ref()
        .map(|provider| tracing_opentelemetry::layer().with_tracer(provider.tracer("cms-server")));
    tracing_subscriber::registry()
        .with(filter)
        .with(text)
        .with(json)
        .with(traces)
        .try_init()
        .map_err(|err| anyhow::anyhow!("could not install the log subscriber: {err}"))?;
    if let Some(endpoint) = otlp_endpoint {
        tracing::info!(endpoint, "exporting traces over OTLP");
    }
    Ok(Telemetry { provider })
}

/// Whether requests get root spans: when traces are exported to
/// `otlp_endpoint`, or when the installed filter lets debug lines through,
/// which then show the request's span. Under the default filter, without
/// an exporter, nothing would read them.
pub(crate) fn request_spans(otlp_endpoint: Option<&str>) -> bool {
    otlp_endpoint.is_some() || tracing::level_filters::LevelFilter::current() >= tracing::Level::DEBUG
}

/// An OTLP/gRPC exporter to `endpoint` behind a batch processor, and the
/// W3C trace-context propagator for incoming `traceparent` headers.
fn tracer_provider(endpoint: &str) -> anyhow::Result<SdkTracerProvider> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .build()
        .context("invalid OTLP endpoint (CMS_OTLP_ENDPOINT)")?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(Resource::builder().with_service_name("cms-server").build())
        .build();
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    opentelemetry::global::set_tracer_provider(provider.clone());
    Ok(provider)
}

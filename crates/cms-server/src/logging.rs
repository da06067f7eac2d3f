//! Log output: `tracing` events as text lines on standard output.

use std::io::IsTerminal;

use anyhow::Context;
use tracing_subscriber::EnvFilter;

/// The crate whose start-up lines would repeat the bound address.
const QUIET_TARGET: &str = "actix_server";

/// Installs the subscriber. The filter is `filter` (`CMS_LOG` or `log` in
/// the file) when given, else `RUST_LOG`, else `info`.
///
/// The HTTP server library's own start-up lines are kept at `warn` unless
/// the filter names it, so that exactly one line says `listening on <addr>`.
pub(crate) fn init(filter: Option<&str>) -> anyhow::Result<()> {
    let directives = match filter {
        Some(directives) => directives.to_string(),
        None => std::env::var("RUST_LOG").ok().filter(|value| !value.trim().is_empty()).unwrap_or_default(),
    };
    let directives = if directives.trim().is_empty() { "info".to_string() } else { directives };
    let mut filter = EnvFilter::try_new(&directives).context("invalid log filter (CMS_LOG or RUST_LOG)")?;
    if !directives.contains(QUIET_TARGET) {
        filter = filter.add_directive(format!("{QUIET_TARGET}=warn").parse().context("invalid directive")?);
    }
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stdout().is_terminal())
        .try_init()
        .map_err(|err| anyhow::anyhow!("could not install the log subscriber: {err}"))
}

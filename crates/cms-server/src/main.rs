//! `cms-server`: the Cluster Management Service. It reads its configuration,
//! opens the store and serves the HTTP API until SIGTERM or SIGINT.
//!
//! Where things are: `settings.rs`, layered configuration (defaults, a
//! `--config` TOML file, `CMS_*`); `logging.rs`, tracing to standard output
//! and, with `CMS_OTLP_ENDPOINT`, OTLP; `sealing.rs`, the secrets key and the
//! startup canary; `serve.rs`, the wiring (store, `cms_tenancy::Tenancy`, the
//! prober, the authenticator, the app), `listening on <addr>`, and on SIGTERM
//! closing watch streams and draining requests; `provisioning.rs`, the
//! driver and the controller task over the same store and secrets.

mod logging;
mod provisioning;
mod sealing;
mod serve;
mod settings;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use crate::settings::Settings;

/// The Cluster Management Service.
#[derive(Debug, Parser)]
#[command(name = "cms-server", version)]
struct Args {
    /// A TOML configuration file; `CMS_*` environment variables override it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

fn main() -> ExitCode {
    match cms_service::block_on(run(Args::parse())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let settings = Settings::load(args.config.as_deref(), environment())?;
    let telemetry =
        logging::init(settings.log.as_deref(), settings.log_format, settings.otlp_endpoint.as_deref())?;
    let served = serve::run(settings).await;
    telemetry.shutdown();
    served
}

/// The environment variables that are valid Unicode; others cannot be ours.
fn environment() -> HashMap<String, String> {
    std::env::vars_os()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
        .collect()
}

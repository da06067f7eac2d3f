//! `cms-server`: the Cluster Management Service. It reads its configuration,
//! opens the store and serves the HTTP API until SIGTERM or SIGINT.
//!
//! Where things are: `settings.rs`, layered configuration (defaults, a
//! `--config` TOML file, `CMS_*`); `logging.rs`, tracing to standard output
//! and, with `CMS_OTLP_ENDPOINT`, OTLP; `sealing.rs`, the secrets key and the
//! startup canary; `serve.rs`, the wiring (store, `cms_tenancy::Tenancy`, the
//! prober, the authenticator, the app), `listening on <addr>`, and on SIGTERM
//! closing watch streams and draining requests; `provisioning.rs`, the
//! driver and the controller task over the same store and secrets;
//! `tool_state.rs`, the tool's states checked before it starts (the state
//! key's fingerprint, the state schemas' names on PostgreSQL);
//! `backup.rs`, the `backup` and `restore` commands for the embedded store;
//! `keys.rs`, the `keys status` and `keys rotate` commands; `data_dir.rs`,
//! the umask 077 set first thing and the data directory made or tightened
//! to 0700.

mod autoscaler;
mod backup;
mod data_dir;
mod identity;
mod keys;
mod logging;
mod provisioning;
mod sealing;
mod serve;
mod settings;
mod tool_state;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::settings::Settings;

/// mimalloc rather than the C library's allocator: its per-thread free
/// lists keep the allocations of requests and batches off a shared arena
/// (`docs/performance.md`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The Cluster Management Service.
#[derive(Debug, Parser)]
#[command(name = "cms-server", version)]
struct Args {
    /// A TOML configuration file; `CMS_*` environment variables override it.
    #[arg(long, value_name = "FILE", global = true)]
    config: Option<PathBuf>,
    /// What to do instead of serving.
    #[command(subcommand)]
    command: Option<Command>,
}

/// The commands beside serving, on the store the settings name.
#[derive(Debug, Subcommand)]
enum Command {
    /// Copies the embedded SQLite store to a new file, consistently, while
    /// servers run on it.
    Backup {
        /// The file to write; it must not exist.
        #[arg(long, value_name = "FILE")]
        to: PathBuf,
    },
    /// Replaces the embedded SQLite store with a backup, keeping the
    /// database it replaces; no server may run on it.
    Restore {
        /// The backup to restore.
        #[arg(long, value_name = "FILE")]
        from: PathBuf,
    },
    /// The keys that seal tenant secrets: their status, or a rotation.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
}

/// `cms-server keys ...`
#[derive(Debug, Subcommand)]
enum KeysCommand {
    /// Prints the active key, the configured keys and the sealed blobs per
    /// key, and which keys can be removed.
    Status,
    /// Makes a configured key the active one; running servers follow and
    /// re-seal every stored blob with it in the background.
    Rotate {
        /// The id of the key to make active.
        #[arg(long, value_name = "KEY_ID")]
        to: String,
    },
}

fn main() -> ExitCode {
    // Before any file is made, by any command.
    data_dir::private_umask();
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
    match &args.command {
        Some(Command::Backup { to }) => return backup::backup(&settings, to).await,
        Some(Command::Restore { from }) => return backup::restore(&settings, from).await,
        Some(Command::Keys { command: KeysCommand::Status }) => return keys::status(&settings).await,
        Some(Command::Keys { command: KeysCommand::Rotate { to } }) => {
            return keys::rotate(&settings, to).await;
        }
        None => {}
    }
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn commands_parse() {
        let parse = |args: &[&str]| Args::try_parse_from([&["cms-server"], args].concat());
        let serve = parse(&["--config", "cms.toml"]).unwrap();
        assert!(serve.command.is_none() && serve.config == Some(PathBuf::from("cms.toml")));
        let backup = parse(&["backup", "--to", "/backup/cms.db", "--config", "cms.toml"]).unwrap();
        assert!(matches!(backup.command, Some(Command::Backup { to }) if to == Path::new("/backup/cms.db")));
        assert_eq!(backup.config, Some(PathBuf::from("cms.toml")), "--config goes anywhere");
        let restore = parse(&["restore", "--from", "cms.db"]).unwrap();
        assert!(matches!(restore.command, Some(Command::Restore { from }) if from == Path::new("cms.db")));
        assert!(parse(&["backup"]).is_err(), "a backup needs its target");
        assert!(parse(&["restore", "--to", "x"]).is_err());
    }
}

//! `cms`: the command-line client of the Cluster Management Service.
//!
//! It speaks HTTP only and reads and writes the wire types of `cms-model`.
//! `cli.rs` declares the commands; each module implements a group of them;
//! `failure.rs` maps failures to the exit codes documented in `docs/cli.md`.

mod accounts;
mod apply;
mod autoscaler;
mod backups;
mod cli;
mod client;
mod context;
mod downloads;
mod edit;
mod failure;
mod get;
mod grants;
mod health;
mod kinds;
mod kubeconfig;
mod logs;
mod output;
mod reflector;
mod rotate_ca;
mod sse;
mod sso;
mod support;
#[cfg(test)]
mod table_snapshots;
mod tables;
mod unlock;
mod version;
mod wait;
mod watch;

use std::process::ExitCode;

use anyhow::Result;
use clap::{CommandFactory, Parser};

use crate::cli::{Cli, Command, CreateCommand, MachineCommand};
use crate::client::Client;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(failure::exit_code(&error))
        }
    }
}

fn run(cli: &Cli) -> Result<()> {
    let format = cli.global.output;
    // These two need neither a server nor the context file.
    match &cli.command {
        Command::Completion(args) => return completion(args.shell),
        Command::Version(args) if args.client => return version::client_only(format),
        _ => {}
    }
    let resolved = context::resolve(&cli.global, matches!(cli.command, Command::Login(_)))?;
    let client = Client::new(&resolved.server, resolved.token.clone())?;
    match &cli.command {
        Command::Login(args) => accounts::login(&client, args, &cli.global),
        Command::Get(args) => get::get(&client, args, format),
        Command::Apply(args) => apply::apply(&client, args, format),
        Command::Create(CreateCommand::Grant(args)) => grants::create(&client, args, format),
        Command::Delete(args) => get::delete(&client, args, format),
        Command::Edit(args) => edit::edit(&client, args, format),
        Command::Wait(args) => wait::wait(&client, args),
        Command::Watch(args) => watch::watch(&client, args, format),
        Command::Kubeconfig(args) => downloads::kubeconfig(&client, args),
        Command::Talosconfig(args) => downloads::talosconfig(&client, args),
        Command::Secrets(args) => downloads::secrets(&client, args),
        Command::Support(args) => support::support(&client, args),
        Command::Logs(args) => logs::logs(&client, args),
        Command::Dmesg(args) => logs::dmesg(&client, args),
        Command::Machine(MachineCommand::Config(args)) => downloads::machine_config(&client, args),
        Command::Health(args) => health::health(&client, args.tenant.as_deref(), format),
        Command::Unlock(args) => unlock::unlock(&client, args, format),
        Command::RotateCa(args) => rotate_ca::rotate_ca(&client, args, format),
        Command::AutoscalerIdentity(args) => autoscaler::autoscaler_identity(&client, args),
        Command::Backup(command) => backups::backup(&client, command, format),
        Command::Users(command) => accounts::users(&client, command, format),
        Command::Tokens(command) => accounts::tokens(&client, command, &resolved, format),
        Command::Version(_) => version::both(&client, format),
        Command::Completion(args) => completion(args.shell),
    }
}

/// Prints the completion script of `shell`.
fn completion(shell: clap_complete::Shell) -> Result<()> {
    let mut text = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "cms", &mut text);
    output::out(&String::from_utf8_lossy(&text))
}

//! `cargo xtask`: the project's automation, written in Rust so that it runs
//! wherever cargo does.
//!
//! - `ci`: everything CI runs (format, lints, invariants, tests), each step timed.
//! - `test`: builds the binaries once, then runs every test of the workspace.
//! - `e2e`: builds `cms-server` and runs the end-to-end tests against it.
//! - `fuzz-api`: schemathesis against the real server's `/openapi.json`, as admin and viewer.
//! - `invariants`: checks the dependency rules and test rules of `ARCHITECTURE.md`.
//! - `bench`: measures throughput against a bare actix-web baseline.
//! - `soak`: mixed load with `kill -9` and restarts, checked for lost writes,
//!   linearizability, watch-stream consistency and leaks.

// xtask orchestrates cargo, the server and test processes; spawning them is its job.
#![allow(clippy::disallowed_methods)]
// xtask is a command-line tool whose output to its user is the report.
#![allow(clippy::print_stdout)]

mod bench;
mod ci;
mod fuzz_api;
mod invariants;
mod shell;
mod soak;
mod testing;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "cargo xtask", about = "Project automation for cms")]
struct Cli {
    #[command(subcommand)]
    command: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Runs everything CI runs: fmt, clippy, invariants, then the tests.
    Ci,
    /// Builds the workspace binaries, then runs every test.
    Test,
    /// Builds cms-server, then runs the end-to-end tests against it.
    E2e {
        /// Extra arguments for the test runner, such as a test-name filter.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Fuzzes the API with schemathesis against the real server, from its OpenAPI document.
    FuzzApi,
    /// Checks the dependency and test invariants.
    Invariants,
    /// Measures throughput of the API against a bare actix-web hello endpoint.
    Bench(bench::BenchOptions),
    /// Mixed load with periodic kill -9 and restart, checked for lost writes,
    /// linearizability, watch consistency and descriptor or memory leaks.
    Soak(soak::SoakOptions),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Task::Ci => ci::run(),
        Task::Test => testing::run_all().map(|timings| timings.print_summary("test steps")),
        Task::E2e { args } => testing::run_e2e(&args),
        Task::FuzzApi => fuzz_api::run(),
        Task::Invariants => invariants::run(),
        Task::Bench(options) => bench::run(&options),
        Task::Soak(options) => soak::run(&options),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

//! `cargo xtask test` and `cargo xtask e2e`: building once, then running tests
//! with cargo-nextest when it is installed and `cargo test` otherwise.

use std::time::Duration;

use anyhow::Result;

use crate::shell::{Timings, cargo, on_path};

/// The longest a build may take.
const BUILD_LIMIT: Duration = Duration::from_secs(40 * 60);
/// The longest a test run may take.
const TEST_LIMIT: Duration = Duration::from_secs(40 * 60);

/// Builds every binary of the workspace (the end-to-end tests need
/// `cms-server`), then runs every test: `cargo test --doc` for the doctests
/// and nextest for the rest, or `cargo test` alone without nextest.
pub(crate) fn run_all() -> Result<Timings> {
    let mut timings = Timings::default();
    timings.run("build binaries", &mut cargo(["build", "--workspace", "--bins"]), BUILD_LIMIT)?;
    if on_path("cargo-nextest") {
        // Doctests first, so that the run closes on nextest's summary of every test.
        timings.run("doctests", &mut cargo(["test", "--workspace", "--doc"]), TEST_LIMIT)?;
        timings.run(
            "tests (nextest)",
            &mut cargo(["nextest", "run", "--workspace", "--no-fail-fast"]),
            TEST_LIMIT,
        )?;
    } else {
        println!("cargo-nextest is not on PATH; running the tests with cargo test");
        timings.run(
            "tests (cargo test)",
            &mut cargo(["test", "--workspace", "--no-fail-fast"]),
            TEST_LIMIT,
        )?;
    }
    Ok(timings)
}

/// Builds `cms-server`, then runs only the end-to-end test binary, passing
/// `args` to the test runner.
pub(crate) fn run_e2e(args: &[String]) -> Result<()> {
    let mut timings = Timings::default();
    timings.run(
        "build cms-server",
        &mut cargo(["build", "-p", "cms-server", "--bin", "cms-server"]),
        BUILD_LIMIT,
    )?;
    let mut command = if on_path("cargo-nextest") {
        cargo(["nextest", "run", "-p", "cms-e2e", "--test", "e2e", "--no-fail-fast"])
    } else {
        cargo(["test", "-p", "cms-e2e", "--test", "e2e", "--no-fail-fast", "--"])
    };
    command.args(args);
    let result = timings.run("end-to-end tests", &mut command, TEST_LIMIT);
    timings.print_summary("e2e steps");
    result
}

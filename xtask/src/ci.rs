//! `cargo xtask ci`: everything CI runs, in order, each step timed: format,
//! lints, the library docs (`cargo doc`, warnings denied), invariants, the fake cloud providers' self-test, the tests, a reduced soak (one minute, two `kill -9`s,
//! every consistency checker), then schemathesis against the real server.

use std::time::Duration;

use anyhow::Result;

use crate::shell::{Timings, cargo};
use crate::{fuzz_api, invariants, soak, testing};

/// The longest a lint or format step may take.
const CHECK_LIMIT: Duration = Duration::from_secs(40 * 60);

/// Runs fmt, clippy, the docs, the invariant checks, the tests, the soak and the API fuzzing.
pub(crate) fn run() -> Result<()> {
    let mut timings = Timings::default();
    let result = steps(&mut timings);
    timings.print_summary("ci steps");
    result
}

fn steps(timings: &mut Timings) -> Result<()> {
    timings.run("fmt", &mut cargo(["fmt", "--all", "--", "--check"]), CHECK_LIMIT)?;
    timings.run(
        "clippy",
        &mut cargo(["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]),
        CHECK_LIMIT,
    )?;
    // The library docs other tools read: every link resolves.
    let mut docs = cargo(["doc", "--workspace", "--no-deps"]);
    docs.env("RUSTDOCFLAGS", "-D warnings");
    timings.run("docs", &mut docs, CHECK_LIMIT)?;
    timings.measure("invariants", invariants::check)?;
    // The fake cloud providers against the real engine: force-new
    // replacements, ignore_changes, the clouds' refusals.
    let mut fakes = std::process::Command::new("bash");
    fakes.arg("tests/providers/selftest.sh").current_dir(crate::shell::workspace_root());
    timings.run("fake providers", &mut fakes, Duration::from_secs(10 * 60))?;
    timings.extend(testing::run_all()?);
    // The binaries are built by the tests' step; the soak reuses them.
    timings.measure("soak (60s, 2 kill -9s)", || soak::soak(&soak::SoakOptions::ci()))?;
    fuzz_api::steps(timings)
}

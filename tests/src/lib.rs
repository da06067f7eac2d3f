//! Test support for driving the real `cms-server` binary over HTTP.
//!
//! [`Server`] starts the binary with a fresh data directory on a free port of
//! the loopback interface and stops it with SIGTERM or SIGKILL; a stopped
//! server restarts on the same data directory. [`Api`] is a small HTTP client
//! whose replies check statuses and error bodies, [`Watch`] reads the tenant
//! watch stream frame by frame, [`fixtures`] builds request bodies,
//! [`cli::Cli`] runs the real `cms` client binary against a server, and
//! [`commands::server_command`] runs `cms-server`'s one-shot commands
//! (`backup`, `restore`) on a data directory.
//!
//! [`parse_listening`] (with [`strip_ansi`]) finds the address in a server's
//! `listening on <addr>` log line, for anything that starts a server.
//!
//! [`nodes`] runs fake Talos nodes (`cms-fake-node`) and writes machines into
//! a stopped server's store, as the reconciler would; [`cluster`] runs a
//! fake cluster in this process: fake nodes sharing an etcd, and a fake
//! Kubernetes API server they register with; [`cloud::FakeCloud`] is the
//! datacenter behind the fake cloud providers, whose instances boot as fake
//! nodes.
//!
//! [`s3::MotoServer`] runs moto's S3 API for the S3 backup store's tests,
//! [`oidc::OidcProvider`] an OpenID Connect provider for the single sign-on
//! tests, both from PyPI on a free loopback port; [`issuer::WorkloadIssuer`]
//! serves a trusted workload issuer's keys.
//!
//! [`browser::Browser`] drives headless Chromium through chromedriver, for
//! the web console's tests, with accessibility checks by a vendored axe-core.
//!
//! Every wait is bounded: a server that does not start, answer or stop in time
//! fails the test with its log attached, never hangs it.

mod api;
mod binary;
pub mod browser;
pub mod cli;
pub mod cloud;
pub mod cluster;
pub mod commands;
pub mod fixtures;
pub mod issuer;
mod loopback;
pub mod nodes;
pub mod oidc;
pub mod raw;
pub mod s3;
mod server;
mod watch;

pub use api::{Api, REQUEST_TIMEOUT, Reply};
pub use binary::{cli_binary, server_binary};
pub use server::{
    ADMIN_PASSWORD, ADMIN_USER, DataDir, START_TIMEOUT, STOP_TIMEOUT, Server, ServerOptions, Stopped,
    parse_listening, strip_ansi,
};
pub use watch::{Frame, OpenFailure, Watch};

pub use reqwest::Method;

/// The repository's root, read when the tests run (cargo sets
/// `CARGO_MANIFEST_DIR` for them), so that a build reused from a checkout
/// elsewhere still reads this checkout's files.
pub fn repository() -> std::path::PathBuf {
    let tests = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    std::path::Path::new(&tests).parent().expect("tests/ lives in the repository").to_path_buf()
}

//! Accessibility checks in the page with the vendored axe-core, its
//! SHA-256 checked before use.

use std::fmt;
use std::path::PathBuf;
use std::sync::OnceLock;

use fantoccini::Client;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::COMMAND_TIMEOUT;

/// The axe-core release vendored under `tests/assets/axe-core`.
pub const AXE_VERSION: &str = "4.14.1";
/// The SHA-256 of `tests/assets/axe-core/axe.min.js`, as its README records.
const AXE_SHA256: &str = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c";

/// One accessibility rule that a page breaks, as axe-core reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The rule, such as `color-contrast`.
    pub id: String,
    /// `serious` or `critical`.
    pub impact: String,
    /// What the rule asks for.
    pub help: String,
    /// CSS selectors of the offending elements.
    pub targets: Vec<String>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}, at {}", self.id, self.impact, self.help, self.targets.join(", "))
    }
}

/// Runs the vendored axe-core on the current page of `client` (injecting it
/// when the page does not have it yet) and returns its violations of impact
/// `serious` or `critical`. The script is checked against its recorded
/// SHA-256 first.
pub async fn axe(client: &Client) -> Vec<Violation> {
    const RUN: &str = "const done = arguments[arguments.length - 1];
        window.axe.run(document, {resultTypes: ['violations']})
          .then((results) => done({violations: results.violations
            .filter((rule) => rule.impact === 'serious' || rule.impact === 'critical')
            .map((rule) => ({id: rule.id, impact: rule.impact, help: rule.help,
              targets: rule.nodes.map((node) => node.target.flat(Infinity).join(' '))}))}))
          .catch((error) => done({error: String(error)}));";
    let present = client.execute("return window.axe ? window.axe.version : null", Vec::new()).await;
    if present.ok().as_ref().and_then(Value::as_str) != Some(AXE_VERSION) {
        let script = format!("{}\nreturn window.axe ? window.axe.version : null;", axe_source());
        let version = client
            .execute(&script, Vec::new())
            .await
            .unwrap_or_else(|err| panic!("axe-core could not be injected: {err}"));
        assert_eq!(version.as_str(), Some(AXE_VERSION), "axe-core did not load into the page");
    }
    let reply = tokio::time::timeout(COMMAND_TIMEOUT, client.execute_async(RUN, Vec::new()))
        .await
        .unwrap_or_else(|_| panic!("axe-core did not finish within {COMMAND_TIMEOUT:?}"))
        .unwrap_or_else(|err| panic!("axe-core could not run: {err}"));
    if let Some(error) = reply.get("error") {
        panic!("axe-core failed in the page: {error}");
    }
    let text = |value: &Value| value.as_str().unwrap_or_default().to_string();
    reply["violations"]
        .as_array()
        .expect("axe-core reports a list of violations")
        .iter()
        .map(|rule| Violation {
            id: text(&rule["id"]),
            impact: text(&rule["impact"]),
            help: text(&rule["help"]),
            targets: rule["targets"].as_array().into_iter().flatten().map(text).collect(),
        })
        .collect()
}

/// The vendored `axe.min.js`, read once and checked against [`AXE_SHA256`].
fn axe_source() -> &'static str {
    static SOURCE: OnceLock<String> = OnceLock::new();
    SOURCE.get_or_init(|| {
        let path = axe_path();
        let bytes =
            std::fs::read(&path).unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
        let digest = format!("{:x}", Sha256::digest(&bytes));
        assert_eq!(
            digest,
            AXE_SHA256,
            "{} is not the vendored axe-core {AXE_VERSION}: its SHA-256 differs from the one recorded \
             in tests/assets/axe-core/README.md; restore the file or vendor a release anew",
            path.display()
        );
        String::from_utf8(bytes).expect("axe.min.js is UTF-8")
    })
}

/// Where the vendored axe-core lives in this checkout.
fn axe_path() -> PathBuf {
    crate::repository().join("tests/assets/axe-core/axe.min.js")
}

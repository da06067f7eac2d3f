//! `cms-support`: a tenant's support bundle, a zip streamed as it is made
//! ([`support_bundle`]). It holds:
//!
//! - `tenant.json`, `node-groups/<name>.json`, `configpatches/<name>.json`:
//!   the resources with their status and conditions;
//! - `machines/<id>/machine.json`, and from each machine's node
//!   `version.txt` (its Talos version), `services.json` (`ServiceList`),
//!   `logs/<service>.log` (each service's last lines) and `dmesg.log`;
//! - `kubernetes/nodes.json` and `kubernetes/events.json` (the newest
//!   core/v1 Events first);
//! - `tool/apply.log` and `tool/plan.log` (and `tool/destroy.log`): the
//!   provisioning tool's last run of each, as the reconciler recorded it;
//! - `errors.txt`: each part that could not be read, and why; an
//!   unreachable node or cluster never fails the bundle;
//! - `TRUNCATED.txt`, once the bound on the content is reached.
//!
//! No secret goes in: no machine config, client config or secrets bundle
//! is read; of the config patches (pieces of machine config) and the node
//! groups' `providerConfig` only the shape goes in, every string replaced
//! (`conceal.rs`); and every entry passes through `redact.rs`, which replaces
//! every PEM block and the base64 of one, and every value of the tenant's
//! secrets (its tokens, and each line of its keys and certificates). The bundle is bounded: logs by
//! lines and bytes each, the whole content by [`SupportOptions::max_bytes`].
//! `archive.rs` writes the zip without seeking, handing it on through a
//! bounded channel, so memory holds a few pieces of it at most;
//! `bundle.rs` says what goes in, in order.

mod archive;
mod bundle;
mod conceal;
mod redact;

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use cms_store::{Key, Store};
use cms_tenancy::{KubeClient, NodeClient, Secrets, TenancyError};
use futures_util::Stream;
use tokio::sync::mpsc;

pub use redact::REDACTED;

/// Where a bundle's parts come from. A missing client leaves its parts
/// out, with a line in `errors.txt`.
#[derive(Clone)]
pub struct Sources {
    pub store: Arc<dyn Store>,
    /// Opens the tenant's secrets, whose values are then replaced wherever
    /// they appear; without it only PEM blocks are.
    pub secrets: Option<Arc<Secrets>>,
    pub nodes: Option<Arc<dyn NodeClient>>,
    pub kube: Option<Arc<dyn KubeClient>>,
}

impl std::fmt::Debug for Sources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sources")
            .field("nodes", &self.nodes.is_some())
            .field("kube", &self.kube.is_some())
            .finish_non_exhaustive()
    }
}

/// The bounds of a bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupportOptions {
    /// The most bytes of content in all: past it, the rest is left out and
    /// `TRUNCATED.txt` says so.
    pub max_bytes: u64,
    /// The last lines asked of each service's log.
    pub log_lines: u32,
    /// The most bytes kept of one log.
    pub log_bytes: usize,
    /// The services of one node whose logs are read.
    pub max_services: usize,
    /// The newest Kubernetes events kept.
    pub events: usize,
    /// How long one call (or the next piece of a log) may take.
    pub call_timeout: Duration,
}

impl Default for SupportOptions {
    fn default() -> SupportOptions {
        SupportOptions {
            max_bytes: 64 * 1024 * 1024,
            log_lines: 2000,
            log_bytes: 4 * 1024 * 1024,
            max_services: 32,
            events: 500,
            call_timeout: Duration::from_secs(15),
        }
    }
}

/// A bundle's bytes as they are made. It ends with an error when the
/// archive could not be written, so that no broken zip looks whole.
pub type BundleStream = Pin<Box<dyn Stream<Item = io::Result<Bytes>> + Send>>;

/// How many pieces of the archive wait for the reader at most.
const PIECES: usize = 8;

/// Starts the support bundle of `tenant`, built by a task of its own as it
/// is read; dropping the stream stops it. [`TenancyError::NotFound`] when
/// there is no such tenant.
pub fn support_bundle(
    sources: Sources,
    tenant: &str,
    options: SupportOptions,
) -> Result<BundleStream, TenancyError> {
    if sources.store.get(&Key::tenant(tenant)).is_none() {
        return Err(TenancyError::NotFound(format!("tenant {tenant}")));
    }
    let (sender, receiver) = mpsc::channel(PIECES);
    let archive = archive::Archive::new(sender, options.max_bytes, Utc::now());
    let builder = bundle::Builder {
        sources,
        options,
        tenant: tenant.to_string(),
        archive,
        errors: Vec::new(),
        known: redact::Known::default(),
    };
    let tenant = tenant.to_string();
    tokio::spawn(async move {
        match builder.build().await {
            Ok(entries) => tracing::info!(tenant, entries, "wrote a support bundle"),
            Err(archive::Gone) => tracing::info!(tenant, "a support bundle was not read to its end"),
        }
    });
    Ok(Box::pin(futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|piece| (piece, receiver))
    })))
}

/// The bundle's file name: `<tenant>-support-<UTC time>.zip`, such as
/// `acme-support-20260102T030405Z.zip`.
pub fn bundle_file_name(tenant: &str, at: DateTime<Utc>) -> String {
    format!("{}-support-{}.zip", bundle::safe(tenant), at.format("%Y%m%dT%H%M%SZ"))
}

#[cfg(test)]
mod tests;

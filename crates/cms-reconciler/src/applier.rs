//! The seam to the node API: after an apply, each `metal` host gets its
//! machine config over the node API (port 50000). The client lives with the
//! node API work; until the server wires it, [`PendingApplier`] stands in
//! and says so: the machines stay `provisioning`, never falsely `ready`.

use async_trait::async_trait;

/// One machine whose config is to be applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyTarget {
    pub tenant: String,
    pub machine: String,
    /// `IP:50000`.
    pub management_address: String,
}

/// What applying a machine config did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyOutcome {
    /// The node accepted its config.
    Applied,
    /// The config is not applied yet, for the reason given.
    Pending(String),
}

/// Applies machine configs over the node API.
#[cfg_attr(any(test, feature = "testsuite"), mockall::automock)]
#[async_trait]
pub trait MachineConfigApplier: Send + Sync + 'static {
    async fn apply(&self, target: ApplyTarget) -> ApplyOutcome;
}

/// The applier used while no node API client is wired: it applies nothing
/// and reports every machine as pending.
#[derive(Debug, Default, Clone, Copy)]
pub struct PendingApplier;

/// The reason [`PendingApplier`] gives.
pub const NO_NODE_API_CLIENT: &str = "no node API client is configured to apply the machine config";

#[async_trait]
impl MachineConfigApplier for PendingApplier {
    async fn apply(&self, _target: ApplyTarget) -> ApplyOutcome {
        ApplyOutcome::Pending(NO_NODE_API_CLIENT.to_string())
    }
}

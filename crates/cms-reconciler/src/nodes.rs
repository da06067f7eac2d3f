//! The seam to the machines' node API (port 50000): applying a machine
//! config, and asking a node which Talos version it runs. The server wires
//! the real client (`cms-nodeapi`, with each tenant's credentials); tests
//! use the mock.

use async_trait::async_trait;

/// One machine's node API endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRef {
    pub tenant: String,
    pub machine: String,
    /// `IP:50000`.
    pub management_address: String,
}

/// The node API calls the reconciler makes.
#[cfg_attr(any(test, feature = "testsuite"), mockall::automock)]
#[async_trait]
pub trait NodeClient: Send + Sync + 'static {
    /// `ApplyConfiguration` with `config` (YAML). A node that has never
    /// taken a config of this tenant (`configured` false) is a host in
    /// maintenance mode, asked without a client certificate; a configured
    /// one is asked with the tenant's credentials, to apply without a
    /// reboot. Each falls back to the other, since a host may have been
    /// reset or configured meanwhile.
    async fn apply_config(&self, node: &NodeRef, config: &str, configured: bool) -> Result<(), String>;

    /// `Version`, with the tenant's credentials: the Talos version the node
    /// runs, such as `1.14.0`.
    async fn version(&self, node: &NodeRef) -> Result<String, String>;

    /// `Upgrade` to Talos `version` (such as `1.14.1`) with the installer
    /// image of that version, in place, with the tenant's credentials.
    async fn upgrade(&self, node: &NodeRef, version: &str) -> Result<(), String>;
}

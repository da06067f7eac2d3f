//! Where a probe gets a tenant's node API credentials.

use async_trait::async_trait;
use cms_nodeapi::NodeCredentials;

/// A tenant's credentials for its nodes: mTLS with its OS CA and a client
/// certificate that CA signs. The service opens the sealed bundle.
#[cfg_attr(any(test, feature = "testsuite"), mockall::automock)]
#[async_trait]
pub trait TenantCredentials: Send + Sync + 'static {
    /// The tenant's credentials, or `None` when it has none (or they cannot
    /// be opened; the implementation logs why).
    async fn credentials(&self, tenant: &str) -> Option<NodeCredentials>;
}

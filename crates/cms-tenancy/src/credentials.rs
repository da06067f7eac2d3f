//! A tenant's node API credentials: its sealed bundle, opened with the
//! service's sealer, and a short-lived admin client certificate from its
//! OS CA. [`TenantCredentials`] is the seam of the prober and of
//! [`crate::TenantNodeClient`]; [`SealedCredentials`] is the real one.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cms_model::UserRole;
use cms_nodeapi::NodeCredentials;
use cms_store::Store;

use crate::error::TenancyError;
use crate::secrets::Secrets;

/// How long the client certificate of one set of credentials lives.
const CERT_TTL: Duration = Duration::from_secs(600);

/// A tenant's credentials for its nodes: mTLS with its OS CA and a client
/// certificate that CA signs.
#[cfg_attr(any(test, feature = "testsuite"), mockall::automock)]
#[async_trait]
pub trait TenantCredentials: Send + Sync + 'static {
    /// The tenant's credentials: [`TenancyError::NoSecrets`] when it has
    /// none, another error when they cannot be made now.
    async fn credentials(&self, tenant: &str) -> Result<NodeCredentials, TenancyError>;
}

/// [`TenantCredentials`] from each tenant's sealed bundle.
pub struct SealedCredentials {
    store: Arc<dyn Store>,
    secrets: Arc<Secrets>,
}

impl SealedCredentials {
    pub fn new(store: Arc<dyn Store>, secrets: Arc<Secrets>) -> SealedCredentials {
        SealedCredentials { store, secrets }
    }
}

impl fmt::Debug for SealedCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SealedCredentials").finish_non_exhaustive()
    }
}

#[async_trait]
impl TenantCredentials for SealedCredentials {
    async fn credentials(&self, tenant: &str) -> Result<NodeCredentials, TenancyError> {
        let bundle = self.secrets.open(self.store.as_ref(), tenant).await?;
        NodeCredentials::for_tenant(&bundle, UserRole::Admin, CERT_TTL)
            .map_err(|err| TenancyError::Credentials(err.to_string()))
    }
}

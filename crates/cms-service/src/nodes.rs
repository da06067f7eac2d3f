//! The reconciler's node client on the real node API: each tenant's
//! credentials come from its sealed bundle (a short-lived admin client
//! certificate from its OS CA), and metal hosts that have no config yet
//! are asked in maintenance mode.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use cms_nodeapi::{
    ApplyMode, ApplyRequest, NodeApi, NodeCredentials, NodeTarget, UpgradeRequest, installer_image,
};
use cms_prober::TenantCredentials;
use cms_reconciler::{NodeClient, NodeRef};
use cms_store::Store;

use crate::Secrets;
use crate::health::SealedCredentials;

/// The reason given for a tenant whose credentials cannot be made.
const NO_CREDENTIALS: &str = "no credentials";

/// [`NodeClient`] on a [`NodeApi`] with the tenants' sealed credentials.
pub struct TenantNodeClient {
    api: Arc<dyn NodeApi>,
    credentials: SealedCredentials,
}

impl fmt::Debug for TenantNodeClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TenantNodeClient").finish_non_exhaustive()
    }
}

impl TenantNodeClient {
    pub fn new(api: Arc<dyn NodeApi>, store: Arc<dyn Store>, secrets: Arc<Secrets>) -> TenantNodeClient {
        TenantNodeClient { api, credentials: SealedCredentials { store, secrets } }
    }

    async fn tenant_credentials(&self, tenant: &str) -> Result<NodeCredentials, String> {
        self.credentials.credentials(tenant).await.ok_or_else(|| NO_CREDENTIALS.to_string())
    }

    /// Applies `config`: in maintenance mode as Talos decides (it installs
    /// and reboots), on a configured node without a reboot.
    async fn apply_with(
        &self,
        target: &NodeTarget,
        credentials: Result<NodeCredentials, String>,
        config: &str,
        mode: ApplyMode,
    ) -> Result<(), String> {
        let request = ApplyRequest { config: config.as_bytes().to_vec(), mode, dry_run: false };
        self.api
            .apply_configuration(target, &credentials?, request)
            .await
            .map(|_| ())
            .map_err(|err| err.to_string())
    }
}

#[async_trait]
impl NodeClient for TenantNodeClient {
    async fn apply_config(&self, node: &NodeRef, config: &str, configured: bool) -> Result<(), String> {
        let target = NodeTarget::parse(&node.management_address).map_err(|err| err.to_string())?;
        let maintenance = || async { Ok(NodeCredentials::maintenance()) };
        let tenant = || self.tenant_credentials(&node.tenant);
        let with_tenant = (tenant().await, ApplyMode::NoReboot, "with the tenant's credentials");
        let in_maintenance = (maintenance().await, ApplyMode::Auto, "in maintenance mode");
        let (first, second) =
            if configured { (with_tenant, in_maintenance) } else { (in_maintenance, with_tenant) };
        let names = (first.2, second.2);
        let Err(first_error) = self.apply_with(&target, first.0, config, first.1).await else {
            return Ok(());
        };
        match self.apply_with(&target, second.0, config, second.1).await {
            Ok(()) => Ok(()),
            Err(second_error) => Err(format!("{}: {first_error}; {}: {second_error}", names.0, names.1)),
        }
    }

    async fn upgrade(&self, node: &NodeRef, version: &str) -> Result<(), String> {
        let target = NodeTarget::parse(&node.management_address).map_err(|err| err.to_string())?;
        let credentials = self.tenant_credentials(&node.tenant).await?;
        let request =
            UpgradeRequest { image: installer_image(version), preserve: true, stage: false, force: false };
        self.api.upgrade(&target, &credentials, request).await.map(|_| ()).map_err(|err| err.to_string())
    }

    async fn version(&self, node: &NodeRef) -> Result<String, String> {
        let target = NodeTarget::parse(&node.management_address).map_err(|err| err.to_string())?;
        let credentials = self.tenant_credentials(&node.tenant).await?;
        let version = self.api.version(&target, &credentials).await.map_err(|err| err.to_string())?;
        Ok(version.talos_version().to_string())
    }
}

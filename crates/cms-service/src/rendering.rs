//! Machine configs for the reconciler: the user data that cloud instances
//! boot with, rendered exactly as `GET .../machines/{id}/config` renders
//! them (one function does both, in `machine_config`).

use std::sync::Arc;

use async_trait::async_trait;
use cms_model::{Role, Tenant};
use cms_reconciler::MachineConfigs;
use cms_store::{Key, Store};

use crate::Secrets;

/// Renders machine configs from the store and the tenants' sealed secrets.
pub struct StoreMachineConfigs {
    store: Arc<dyn Store>,
    secrets: Arc<Secrets>,
}

impl std::fmt::Debug for StoreMachineConfigs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreMachineConfigs").finish_non_exhaustive()
    }
}

impl StoreMachineConfigs {
    pub fn new(store: Arc<dyn Store>, secrets: Arc<Secrets>) -> StoreMachineConfigs {
        StoreMachineConfigs { store, secrets }
    }
}

#[async_trait]
impl MachineConfigs for StoreMachineConfigs {
    async fn render(&self, tenant: String, group: String, role: Role) -> Result<String, String> {
        let object =
            self.store.get(&Key::tenant(&tenant)).ok_or_else(|| format!("tenant {tenant:?} is gone"))?;
        let tenant: Tenant =
            object.parse().map_err(|err| format!("tenant {tenant:?} is unreadable: {err}"))?;
        let groups = tenant.spec.node_groups.as_deref().unwrap_or_default();
        let group = groups.iter().find(|candidate| candidate.name == group);
        crate::machine_config::render(self.store.as_ref(), &self.secrets, &tenant, group, role)
            .await
            .map_err(|err| err.to_string())
    }
}

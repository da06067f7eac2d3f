//! The documents built from a tenant's secrets bundle: kubeconfig and
//! talosconfig, whose client certificate follows the caller's role (see
//! `cms_talos::kubernetes_identity` and `cms_talos::talos_role`), the
//! whole bundle for break-glass access, and a machine's complete config.
//! None of them is logged here; callers log who read what, never the content.

use std::time::Duration;

use cms_model::{Kind, Machine, Role, UserRole};
use cms_store::Key;

use crate::control_plane;
use crate::error::TenancyError;
use crate::tenancy::Tenancy;

impl Tenancy {
    /// The tenant's Kubernetes API as `role`, at the control-plane endpoint,
    /// with a client certificate that lives `ttl`.
    pub async fn kubeconfig(
        &self,
        tenant: &str,
        role: UserRole,
        ttl: Duration,
    ) -> Result<String, TenancyError> {
        self.kubeconfig_as(tenant, &cms_talos::KubeIdentity::of_role(role), ttl).await
    }

    /// The tenant's Kubernetes API as `identity`: a user from an identity
    /// provider carries its own name and groups.
    pub async fn kubeconfig_as(
        &self,
        tenant: &str,
        identity: &cms_talos::KubeIdentity<'_>,
        ttl: Duration,
    ) -> Result<String, TenancyError> {
        let resource = self.tenant(tenant)?;
        let addresses = control_plane::addresses(self.store().as_ref(), &resource)?;
        let server = control_plane::endpoint(&resource, &addresses)?;
        let bundle = self.secrets().open(self.store().as_ref(), tenant).await?;
        Ok(cms_talos::kubeconfig_for(&bundle, tenant, &server, identity, ttl)?)
    }

    /// The tenant's node API as `role`. Its endpoints are the control-plane
    /// machines' addresses once they exist, else the host of the
    /// control-plane endpoint.
    pub async fn talosconfig(
        &self,
        tenant: &str,
        role: UserRole,
        ttl: Duration,
    ) -> Result<String, TenancyError> {
        let resource = self.tenant(tenant)?;
        let mut endpoints = control_plane::addresses(self.store().as_ref(), &resource)?;
        if endpoints.is_empty() {
            let endpoint = control_plane::endpoint(&resource, &endpoints)?;
            endpoints.push(cms_talos::endpoint_host(&endpoint));
        }
        let bundle = self.secrets().open(self.store().as_ref(), tenant).await?;
        Ok(cms_talos::talosconfig(&bundle, tenant, &endpoints, &[], role, ttl)?)
    }

    /// The whole bundle in `talosctl gen secrets` form.
    pub async fn secrets_yaml(&self, tenant: &str) -> Result<String, TenancyError> {
        self.find(&Key::tenant(tenant))?;
        let bundle = self.secrets().open(self.store().as_ref(), tenant).await?;
        Ok(bundle.to_secrets_yaml()?)
    }

    /// The complete config of machine `id` of `tenant`, and the role it was
    /// rendered for. A machine whose node group is gone, or that names no
    /// group and reports no role, is a conflict with the stored state.
    pub async fn machine_config(&self, tenant: &str, id: &str) -> Result<(String, Role), TenancyError> {
        let key = Key::child(Kind::Machine, tenant, id);
        let machine: Machine = self.find(&key)?.parse().map_err(TenancyError::corrupt(&key))?;
        let resource = self.tenant(tenant)?;
        let groups = resource.spec.node_groups.as_deref().unwrap_or_default();
        let group = match &machine.spec.node_group {
            Some(name) => Some(groups.iter().find(|group| group.name == *name).ok_or_else(|| {
                TenancyError::Conflict(format!(
                    "machine {id:?} belongs to node group {name:?}, which does not exist"
                ))
            })?),
            None => None,
        };
        let role = machine.role(groups).ok_or_else(|| {
            TenancyError::Conflict(format!("machine {id:?} names no node group and reports no role"))
        })?;
        let yaml = crate::render::render(self.store().as_ref(), self.secrets(), &resource, group, role, None)
            .await?;
        Ok((yaml, role))
    }
}

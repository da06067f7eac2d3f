//! Machine configs: a machine's complete Talos config, rendered for its
//! node group's role and Talos version from the tenant's secrets bundle,
//! with the tenant's config patch refs and then the group's applied in
//! order (decisions §4). The API serves it; the reconciler boots cloud
//! instances with it through the [`MachineConfigs`] seam. One function
//! renders both.
//!
//! A ref to a missing patch, or a patch that does not apply, is a conflict
//! with the stored state; a tenant with no control-plane endpoint yet is
//! not ready.

use std::sync::Arc;

use async_trait::async_trait;
use cms_model::{ConfigPatch, Kind, NodeGroupSpec, Role, Tenant};
use cms_store::{Key, Store};
use cms_talos::{RenderInput, ResolvedPatch, SecretsBundle};

use crate::control_plane;
use crate::error::TenancyError;
use crate::secrets::Secrets;

/// Renders the machine config that cloud instances boot with (their user
/// data). The reconciler's seam; [`StoreMachineConfigs`] is the real one.
#[cfg_attr(any(test, feature = "testsuite"), mockall::automock)]
#[async_trait]
pub trait MachineConfigs: Send + Sync + 'static {
    /// The complete config of a machine of `group` with `role` in `tenant`;
    /// with `kubernetes`, naming those Kubernetes versions instead of the
    /// tenant's `kubernetesVersion`.
    async fn render(
        &self,
        tenant: String,
        group: String,
        role: Role,
        kubernetes: Option<KubernetesVersions>,
    ) -> Result<String, TenancyError>;
}

/// The Kubernetes versions a machine's config names while an upgrade rolls
/// through the cluster: the control-plane components move first, node by
/// node, then the kubelets.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KubernetesVersions {
    /// The API server's, controller manager's, scheduler's and kube-proxy's.
    pub components: String,
    /// The kubelet's.
    pub kubelet: String,
}

/// The complete config of a machine of `role` in `group` of `tenant`: the
/// generated base, then the tenant's and the group's config patches.
pub(crate) async fn render(
    store: &dyn Store,
    secrets: &Secrets,
    tenant: &Tenant,
    group: Option<&NodeGroupSpec>,
    role: Role,
    kubernetes: Option<&KubernetesVersions>,
) -> Result<String, TenancyError> {
    let tenant_name = tenant.metadata.name.clone();
    let addresses = control_plane::addresses(store, tenant)?;
    control_plane::endpoint(tenant, &addresses)?;

    let group_refs = group.map(|group| group.config_patches.as_slice()).unwrap_or_default();
    let mut available = std::collections::BTreeMap::new();
    for reference in tenant.spec.config_patches.iter().chain(group_refs) {
        let Some(object) = store.get(&Key::child(Kind::ConfigPatch, &tenant_name, &reference.name)) else {
            continue;
        };
        let patch: ConfigPatch = object.parse().map_err(TenancyError::corrupt(&object.key))?;
        available.insert(reference.name.clone(), patch.spec);
    }
    let resolution = cms_talos::resolve_patches(&tenant.spec.config_patches, group_refs, &available);
    if !resolution.missing.is_empty() {
        return Err(TenancyError::Conflict(format!(
            "the config of a {} machine refers to config patches that do not exist: {}",
            role.as_str(),
            resolution.missing.iter().map(|name| format!("{name:?}")).collect::<Vec<_>>().join(", ")
        )));
    }

    let bundle = secrets.open(store, &tenant_name).await?;
    let endpoint = control_plane::set_endpoint(tenant);
    let mut input = render_input(tenant, group, role, endpoint, addresses, &bundle, resolution.patches);
    if let Some(versions) = kubernetes {
        input.kubernetes_version = versions.components.clone();
        input.kubelet_version = Some(versions.kubelet.clone());
    }
    Ok(cms_talos::render(&input)?)
}

/// What the config of a machine of `role` in `group` of `tenant` is
/// rendered from: the endpoint set on the tenant (or a stand-in), its
/// control-plane addresses, its bundle and the patches, resolved in order.
/// The Talos version is the group's, else the tenant's, else the bundle's;
/// the install image is [`cms_model::installer_image`]'s for that version.
pub(crate) fn render_input<'a>(
    tenant: &Tenant,
    group: Option<&NodeGroupSpec>,
    role: Role,
    endpoint: Option<String>,
    addresses: Vec<String>,
    bundle: &'a SecretsBundle,
    patches: Vec<ResolvedPatch>,
) -> RenderInput<'a> {
    let talos_version = group
        .and_then(|group| group.talos_version.clone())
        .or_else(|| tenant.spec.talos_version.clone())
        .unwrap_or_else(|| bundle.talos_version().to_string());
    let install_image = cms_model::installer_image(&tenant.spec, group, &talos_version);
    RenderInput {
        cluster_name: tenant.metadata.name.clone(),
        role,
        talos_version,
        kubernetes_version: tenant.spec.kubernetes_version.clone(),
        kubelet_version: None,
        control_plane_endpoint: endpoint,
        control_plane_addresses: addresses,
        pod_networks: tenant.spec.pod_network.clone(),
        service_networks: tenant.spec.service_network.clone(),
        cert_sans: Vec::new(),
        install_image: Some(install_image),
        bundle,
        patches,
    }
}

/// [`MachineConfigs`] from the store and the tenants' sealed secrets.
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
    async fn render(
        &self,
        tenant: String,
        group: String,
        role: Role,
        kubernetes: Option<KubernetesVersions>,
    ) -> Result<String, TenancyError> {
        let key = Key::tenant(&tenant);
        let object = self.store.get(&key).ok_or_else(|| TenancyError::NotFound(key.to_string()))?;
        let tenant: Tenant = object.parse().map_err(TenancyError::corrupt(&key))?;
        let groups = tenant.spec.node_groups.as_deref().unwrap_or_default();
        let group = groups.iter().find(|candidate| candidate.name == group);
        render(self.store.as_ref(), &self.secrets, &tenant, group, role, kubernetes.as_ref()).await
    }
}

//! The desired workspace of a tenant: one machine per index of each node
//! group ([`cms_model::NodeGroupSpec::indexes`]), with the stable id
//! `<group>-<index>`. Scaling a group down drops its highest indexes, the
//! newest machines, first, but for the machines a named scale-down lists in
//! `removedMachines`, which leave in their place.
//!
//! A tenant whose first control-plane group is on a cloud and which sets no
//! `controlPlaneEndpoint` gets one made: a load balancer (`oci_network.rs` and
//! `openstack_network.rs` of `cms-tofu`). Its machine configs need its address, so until the tenant
//! carries it ([`MADE_ENDPOINT_ANNOTATION`]) the workspace holds the
//! network alone, its instances held back; once made, the load balancer
//! stays whatever the spec says later.

use cms_model::{Provider, Role, Tenant};
use cms_tenancy::{MADE_ENDPOINT_ANNOTATION, MachineConfigs};
use cms_tofu::{MachinePlan, Network, WorkspacePlan};

use crate::ReconcileError;
use crate::rollout::KubernetesRollout;

/// The tenant annotation naming (space-separated) the OCI regions the
/// tenant ever had machines in: the workspace keeps their provider blocks,
/// which what the state holds there needs to be destroyed.
pub const OCI_REGIONS_ANNOTATION: &str = "service.io/oci-regions";

/// The regions of [`OCI_REGIONS_ANNOTATION`].
pub(crate) fn recorded_regions(tenant: &Tenant) -> Vec<String> {
    let recorded = tenant.metadata.annotations.get(OCI_REGIONS_ANNOTATION);
    recorded.into_iter().flat_map(|list| list.split_whitespace()).map(str::to_string).collect()
}

pub use cms_model::machine_id;

/// The workspace `tenant` should have, with the network settings of
/// `network` (its `load_balancer` and `instances_held` are decided here).
/// `has_instances` says whether the tenant has cloud instances already: an
/// endpoint is made only for a tenant that has none, since its instances
/// would be held back, and so destroyed, while it is made, and the
/// configs they run name the endpoint they have.
pub async fn desired(
    tenant: &Tenant,
    configs: Option<&dyn MachineConfigs>,
    network: &Network,
    has_instances: bool,
) -> Result<WorkspacePlan, ReconcileError> {
    let name = tenant.metadata.name.clone();
    let groups = tenant.spec.node_groups.as_deref().unwrap_or_default();
    let first_control_plane = groups.iter().find(|group| group.role == Role::ControlPlane);
    let cloud_control_planes = first_control_plane
        .and_then(|group| group.provider_class().ok())
        .is_some_and(|class| class.provider != Provider::Metal);
    let made = tenant.metadata.annotations.contains_key(MADE_ENDPOINT_ANNOTATION);
    let load_balancer =
        made || cloud_control_planes && tenant.spec.control_plane_endpoint.is_none() && !has_instances;
    let network = Network { load_balancer, instances_held: load_balancer && !made, ..network.clone() };
    let held = network.instances_held;
    let mut plan = WorkspacePlan { tenant: name.clone(), machines: Vec::new(), network };
    for group in groups {
        let class = group
            .provider_class()
            .map_err(|message| ReconcileError::Invalid(format!("node group {:?}: {message}", group.name)))?;
        let hosts = group.metal_hosts();
        let indexes = group.indexes();
        let hosts_needed = indexes.last().map_or(0, |&highest| highest as usize + 1);
        if class.provider == Provider::Metal && hosts.len() < hosts_needed {
            return Err(ReconcileError::Invalid(format!(
                "node group {:?} needs {hosts_needed} metal hosts (machine <group>-<i> takes hosts[i]) \
                 but lists {}",
                group.name,
                hosts.len()
            )));
        }
        let user_data = match class.provider {
            Provider::Metal => None,
            // No config before the endpoint is made.
            Provider::Oci | Provider::OpenStack if held => None,
            Provider::Oci | Provider::OpenStack => {
                let configs = configs.ok_or_else(|| {
                    ReconcileError::Invalid(format!(
                        "node group {:?}: this server renders no machine configs for cloud instances",
                        group.name
                    ))
                })?;
                // Where the cluster's Kubernetes is, while an upgrade rolls.
                let versions = Some(KubernetesRollout::of(tenant).starting());
                let config = configs
                    .render(name.clone(), group.name.clone(), group.role, versions)
                    .await
                    .map_err(|source| ReconcileError::Render { group: group.name.clone(), source })?;
                Some(config)
            }
        };
        for index in indexes {
            plan.machines.push(MachinePlan {
                id: machine_id(&group.name, index),
                group: group.name.clone(),
                index,
                role: group.role,
                provider: class.provider,
                shape: class.shape.clone(),
                provider_config: group.provider_config.clone(),
                host: hosts.get(index as usize).cloned(),
                user_data: user_data.clone(),
            });
        }
    }
    let mut regions = recorded_regions(tenant);
    for region in plan.oci_regions() {
        if !regions.contains(&region) {
            regions.push(region);
        }
    }
    plan.network.oci_regions = regions;
    Ok(plan)
}

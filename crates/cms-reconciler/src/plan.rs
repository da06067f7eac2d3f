//! The desired workspace of a tenant: one machine per index of each node
//! group, with the stable id `<group>-<index>`. Scaling a group down drops
//! its highest indexes, the newest machines, first.
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

/// The machine id of index `index` in `group`.
pub fn machine_id(group: &str, index: u32) -> String {
    format!("{group}-{index}")
}

/// The workspace `tenant` should have, with the network settings of
/// `network` (its `load_balancer` and `instances_held` are decided here).
pub async fn desired(
    tenant: &Tenant,
    configs: Option<&dyn MachineConfigs>,
    network: &Network,
) -> Result<WorkspacePlan, ReconcileError> {
    let name = tenant.metadata.name.clone();
    let groups = tenant.spec.node_groups.as_deref().unwrap_or_default();
    let first_control_plane = groups.iter().find(|group| group.role == Role::ControlPlane);
    let cloud_control_planes = first_control_plane
        .and_then(|group| group.provider_class().ok())
        .is_some_and(|class| class.provider != Provider::Metal);
    let made = tenant.metadata.annotations.contains_key(MADE_ENDPOINT_ANNOTATION);
    let load_balancer = made || cloud_control_planes && tenant.spec.control_plane_endpoint.is_none();
    let network = Network { load_balancer, instances_held: load_balancer && !made, ..network.clone() };
    let held = network.instances_held;
    let mut plan = WorkspacePlan { tenant: name.clone(), machines: Vec::new(), network };
    for group in groups {
        let class = group
            .provider_class()
            .map_err(|message| ReconcileError::Invalid(format!("node group {:?}: {message}", group.name)))?;
        let hosts = group.metal_hosts();
        if class.provider == Provider::Metal && hosts.len() < group.count as usize {
            return Err(ReconcileError::Invalid(format!(
                "node group {:?} asks for {} machines but lists {} metal hosts",
                group.name,
                group.count,
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
                let config = configs
                    .render(name.clone(), group.name.clone(), group.role)
                    .await
                    .map_err(|source| ReconcileError::Render { group: group.name.clone(), source })?;
                Some(config)
            }
        };
        for index in 0..group.count {
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
    Ok(plan)
}

//! The desired workspace of a tenant: one machine per index of each node
//! group, with the stable id `<group>-<index>`. Scaling a group down drops
//! its highest indexes, the newest machines, first.

use cms_model::{Provider, Tenant};
use cms_tenancy::MachineConfigs;
use cms_tofu::{MachinePlan, WorkspacePlan};

use crate::ReconcileError;

/// The machine id of index `index` in `group`.
pub fn machine_id(group: &str, index: u32) -> String {
    format!("{group}-{index}")
}

/// The workspace `tenant` should have.
pub async fn desired(
    tenant: &Tenant,
    configs: Option<&dyn MachineConfigs>,
) -> Result<WorkspacePlan, ReconcileError> {
    let name = tenant.metadata.name.clone();
    let mut plan = WorkspacePlan { tenant: name.clone(), machines: Vec::new() };
    for group in tenant.spec.node_groups.as_deref().unwrap_or_default() {
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

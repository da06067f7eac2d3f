//! `openstack`: an `openstack_compute_instance_v2` per machine; the flavor
//! is the shape. The provider reads the standard `OS_*` variables from the
//! tool's environment; each instance's user data is the machine config as
//! text, decoded from the sensitive variable that carries it
//! (`user_data.rs`).
//!
//! User data sets an instance's first config only: it is in
//! `ignore_changes`, and every later config goes over the node API. So are
//! the image, the flavor and the placement, so that a change of them never
//! replaces the instances of a group at once. The security groups are the
//! tenant's (`openstack_network.rs`) and those the operator names; with
//! several availability zones, the machines of a group spread over them.

use cms_model::OpenStackConfig;
use serde_json::{Value, json};

use crate::providers::{Setup, openstack_network};
use crate::template::{Block, Expression};
use crate::{MachinePlan, TofuError, WorkspacePlan, user_data};

/// What `ignore_changes` keeps from an existing instance.
const KEPT: [&str; 5] = ["user_data", "image_id", "flavor_name", "availability_zone", "network"];

pub(crate) fn config(machine: &MachinePlan) -> Result<OpenStackConfig, TofuError> {
    serde_json::from_value(Value::Object(machine.provider_config.clone()))
        .map_err(|err| TofuError::Invalid(format!("node group {}: {err}", machine.group)))
}

/// The provider requirement and its (empty) block: everything comes from
/// `OS_*`; and the tenant's network.
pub(crate) fn setup(plan: &WorkspacePlan, machine: &MachinePlan, setup: &mut Setup) -> Result<(), TofuError> {
    let config = config(machine)?;
    setup.required.insert("openstack".into(), json!({ "source": "terraform-provider-openstack/openstack" }));
    setup.providers.entry("openstack").or_default().entry(String::new()).or_default();
    openstack_network::setup(plan, machine, &config, setup);
    Ok(())
}

/// The availability zone of `machine`: the group's, or one of its list by
/// the machine's index.
fn availability_zone(machine: &MachinePlan, config: &OpenStackConfig) -> Option<String> {
    let zones = config.zones();
    (!zones.is_empty()).then(|| zones[machine.index as usize % zones.len()].clone())
}

/// The instance of one machine.
pub(crate) fn instance(plan: &WorkspacePlan, machine: &MachinePlan) -> Result<Block, TofuError> {
    let config = config(machine)?;
    let tenant = &plan.tenant;
    let mut body = Block::plain(json!({
        "name": format!("{tenant}-{}", machine.id),
        "flavor_name": machine.shape,
        "image_id": config.image_id,
        "network": [{ "uuid": config.network_id }],
        "metadata": { "cms-tenant": tenant, "cms-machine": machine.id },
    }));
    if let Some(zone) = availability_zone(machine, &config) {
        body.set("availability_zone", json!(zone));
    }
    let security_groups = Expression::list(
        vec![format!("${{{}.name}}", openstack_network::SECURITY_GROUP_ADDRESS)],
        &config.security_groups,
    );
    let mut lifecycle = user_data::precondition(machine);
    lifecycle["ignore_changes"] = json!(KEPT);
    Ok(body
        .expression(&["security_groups"], security_groups)
        .expression(&["user_data"], Expression::new(user_data::decoded_reference(machine)))
        .expression(&["lifecycle"], Expression::new(lifecycle)))
}

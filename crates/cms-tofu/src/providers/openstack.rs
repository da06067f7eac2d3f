//! `openstack`: an `openstack_compute_instance_v2` per machine; the flavor
//! is the shape. The provider reads the standard `OS_*` variables from the
//! tool's environment; each instance's user data is the machine config as
//! text, decoded from the sensitive variable that carries it
//! (`user_data.rs`), as it was when it was written in the file, so that an
//! existing instance sees no change. The settings of the node group are
//! plain values; the user data is the only expression.

use cms_model::OpenStackConfig;
use serde_json::{Value, json};

use crate::providers::Setup;
use crate::template::{Block, Expression};
use crate::{MachinePlan, TofuError, user_data};

/// The provider requirement and its (empty) block: everything comes from `OS_*`.
pub(crate) fn setup(setup: &mut Setup) {
    setup.required.insert("openstack".into(), json!({ "source": "terraform-provider-openstack/openstack" }));
    setup.providers.entry("openstack").or_default();
}

/// The instance of one machine.
pub(crate) fn instance(tenant: &str, machine: &MachinePlan) -> Result<Block, TofuError> {
    let config: OpenStackConfig = serde_json::from_value(Value::Object(machine.provider_config.clone()))
        .map_err(|err| TofuError::Invalid(format!("node group {}: {err}", machine.group)))?;
    let mut body = Block::plain(json!({
        "name": format!("{tenant}-{}", machine.id),
        "flavor_name": machine.shape,
        "image_id": config.image_id,
        "network": [{ "uuid": config.network_id }],
        "metadata": { "cms-tenant": tenant, "cms-machine": machine.id },
    }));
    if let Some(zone) = &config.availability_zone {
        body.set("availability_zone", json!(zone));
    }
    if !config.security_groups.is_empty() {
        body.set("security_groups", json!(config.security_groups));
    }
    Ok(body
        .expression(&["user_data"], Expression::new(user_data::decoded_reference(machine)))
        .expression(&["lifecycle"], Expression::new(user_data::precondition(machine))))
}

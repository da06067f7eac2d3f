//! `openstack`: an `openstack_compute_instance_v2` per machine; the flavor
//! is the shape. The provider reads the standard `OS_*` variables from the
//! tool's environment; each instance's user data is the machine config as
//! text, decoded from the sensitive variable that carries it
//! (`user_data.rs`), as it was when it was written in the file, so that an
//! existing instance sees no change.

use cms_model::OpenStackConfig;
use serde_json::{Map, Value, json};

use crate::{MachinePlan, TofuError, user_data};

/// The provider requirement and its (empty) block: everything comes from `OS_*`.
pub(crate) fn setup(providers: &mut Map<String, Value>, required: &mut Map<String, Value>) {
    required.insert("openstack".into(), json!({ "source": "terraform-provider-openstack/openstack" }));
    providers.entry("openstack").or_insert_with(|| json!({}));
}

/// The instance of one machine.
pub(crate) fn instance(tenant: &str, machine: &MachinePlan) -> Result<Value, TofuError> {
    let config: OpenStackConfig = serde_json::from_value(Value::Object(machine.provider_config.clone()))
        .map_err(|err| TofuError::Invalid(format!("node group {}: {err}", machine.group)))?;
    let mut body = json!({
        "name": format!("{tenant}-{}", machine.id),
        "flavor_name": machine.shape,
        "image_id": config.image_id,
        "network": [{ "uuid": config.network_id }],
        "user_data": user_data::decoded_reference(&machine.id),
        "metadata": { "cms-tenant": tenant, "cms-machine": machine.id },
        "lifecycle": user_data::precondition(&machine.id),
    });
    if let Some(zone) = &config.availability_zone {
        body["availability_zone"] = json!(zone);
    }
    if !config.security_groups.is_empty() {
        body["security_groups"] = json!(config.security_groups);
    }
    Ok(body)
}

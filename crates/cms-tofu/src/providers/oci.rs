//! `oci`: an `oci_core_instance` per machine. The credentials reach the
//! provider as sensitive variables, set through `TF_VAR_*` in the tool's
//! environment, so that no file holds them; so does each instance's user
//! data, which `metadata.user_data` takes as base64, as the variable holds
//! it (`user_data.rs`). The settings of the node group are plain values;
//! the variable references, the availability-domain lookup and the user
//! data are the only expressions.

use cms_model::OciConfig;
use serde_json::{Value, json};

use crate::providers::Setup;
use crate::template::{Block, Expression};
use crate::{MachinePlan, TofuError, user_data};

/// The variables that carry the credentials, with the service environment
/// variable each one comes from.
pub(crate) const CREDENTIAL_VARIABLES: [(&str, &str); 4] = [
    ("oci_user_ocid", "OCI_CLI_USER"),
    ("oci_tenancy_ocid", "OCI_CLI_TENANCY"),
    ("oci_fingerprint", "OCI_CLI_FINGERPRINT"),
    ("oci_private_key", "OCI_CLI_KEY_CONTENT"),
];

/// The provider arguments that take each credential variable.
const CREDENTIAL_ARGUMENTS: [(&str, &str); 4] = [
    ("user_ocid", "${var.oci_user_ocid}"),
    ("tenancy_ocid", "${var.oci_tenancy_ocid}"),
    ("fingerprint", "${var.oci_fingerprint}"),
    ("private_key", "${var.oci_private_key}"),
];

fn config(machine: &MachinePlan) -> Result<OciConfig, TofuError> {
    serde_json::from_value(Value::Object(machine.provider_config.clone()))
        .map_err(|err| TofuError::Invalid(format!("node group {}: {err}", machine.group)))
}

/// The provider block, its variables and the availability-domain lookup.
pub(crate) fn setup(machine: &MachinePlan, setup: &mut Setup) -> Result<(), TofuError> {
    let config = config(machine)?;
    setup.required.insert("oci".into(), json!({ "source": "oracle/oci" }));
    setup.providers.entry("oci").or_insert_with(|| {
        CREDENTIAL_ARGUMENTS
            .into_iter()
            .fold(Block::plain(json!({ "region": config.region })), |block, (argument, reference)| {
                block.expression(&[argument], Expression::new(reference))
            })
    });
    for (variable, _) in CREDENTIAL_VARIABLES {
        setup.variables.insert(variable.into(), json!({ "type": "string", "sensitive": true }));
    }
    if config.availability_domain.is_none() {
        setup.data.entry("oci_identity_availability_domains").or_default().insert(
            machine.group.clone(),
            Block::plain(json!({ "compartment_id": config.compartment_ocid })),
        );
    }
    Ok(())
}

/// The instance of one machine.
pub(crate) fn instance(tenant: &str, machine: &MachinePlan) -> Result<Block, TofuError> {
    let config = config(machine)?;
    let mut body = Block::plain(json!({
        "display_name": format!("{tenant}-{}", machine.id),
        "compartment_id": config.compartment_ocid,
        "shape": machine.shape,
        "shape_config": { "ocpus": config.ocpus, "memory_in_gbs": config.memory_gb },
        "create_vnic_details": { "subnet_id": config.subnet_id, "assign_public_ip": false },
        "freeform_tags": { "cms-tenant": tenant, "cms-machine": machine.id },
    }));
    if let Some(image) = &config.image_id {
        body.set("source_details", json!({ "source_type": "image", "source_id": image }));
    }
    body = match &config.availability_domain {
        Some(domain) => {
            body.set("availability_domain", json!(domain));
            body
        }
        None => body.expression(
            &["availability_domain"],
            Expression::new(format!(
                "${{data.oci_identity_availability_domains.{}.availability_domains[0].name}}",
                machine.group
            )),
        ),
    };
    Ok(body
        .expression(&["metadata", "user_data"], Expression::new(user_data::reference(machine)))
        .expression(&["lifecycle"], Expression::new(user_data::precondition(machine))))
}

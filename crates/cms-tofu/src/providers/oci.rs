//! `oci`: an `oci_core_instance` per machine. The credentials reach the
//! provider as sensitive variables, set through `TF_VAR_*` in the tool's
//! environment, so that no file holds them; so does each instance's user
//! data, which `metadata.user_data` takes as base64, as the variable holds
//! it (`user_data.rs`).

use cms_model::OciConfig;
use serde_json::{Map, Value, json};

use crate::{MachinePlan, TofuError, user_data};

/// The variables that carry the credentials, with the service environment
/// variable each one comes from.
pub(crate) const CREDENTIAL_VARIABLES: [(&str, &str); 4] = [
    ("oci_user_ocid", "OCI_CLI_USER"),
    ("oci_tenancy_ocid", "OCI_CLI_TENANCY"),
    ("oci_fingerprint", "OCI_CLI_FINGERPRINT"),
    ("oci_private_key", "OCI_CLI_KEY_CONTENT"),
];

fn config(machine: &MachinePlan) -> Result<OciConfig, TofuError> {
    serde_json::from_value(Value::Object(machine.provider_config.clone()))
        .map_err(|err| TofuError::Invalid(format!("node group {}: {err}", machine.group)))
}

/// The provider block, its variables and the availability-domain lookup.
pub(crate) fn setup(
    machine: &MachinePlan,
    providers: &mut Map<String, Value>,
    required: &mut Map<String, Value>,
    variables: &mut Map<String, Value>,
    data: &mut Map<String, Value>,
) -> Result<(), TofuError> {
    let config = config(machine)?;
    required.insert("oci".into(), json!({ "source": "oracle/oci" }));
    providers.entry("oci").or_insert_with(|| {
        json!({
            "region": config.region,
            "user_ocid": "${var.oci_user_ocid}",
            "tenancy_ocid": "${var.oci_tenancy_ocid}",
            "fingerprint": "${var.oci_fingerprint}",
            "private_key": "${var.oci_private_key}",
        })
    });
    for (variable, _) in CREDENTIAL_VARIABLES {
        variables.insert(variable.into(), json!({ "type": "string", "sensitive": true }));
    }
    if config.availability_domain.is_none() {
        let lookups = data.entry("oci_identity_availability_domains").or_insert_with(|| json!({}));
        if let Value::Object(lookups) = lookups {
            lookups.insert(machine.group.clone(), json!({ "compartment_id": config.compartment_ocid }));
        }
    }
    Ok(())
}

/// The instance of one machine.
pub(crate) fn instance(tenant: &str, machine: &MachinePlan) -> Result<Value, TofuError> {
    let config = config(machine)?;
    let availability_domain = config.availability_domain.clone().unwrap_or_else(|| {
        format!("${{data.oci_identity_availability_domains.{}.availability_domains[0].name}}", machine.group)
    });
    let mut body = json!({
        "display_name": format!("{tenant}-{}", machine.id),
        "availability_domain": availability_domain,
        "compartment_id": config.compartment_ocid,
        "shape": machine.shape,
        "shape_config": { "ocpus": config.ocpus, "memory_in_gbs": config.memory_gb },
        "create_vnic_details": { "subnet_id": config.subnet_id, "assign_public_ip": false },
        "metadata": { "user_data": user_data::reference(&machine.id) },
        "freeform_tags": { "cms-tenant": tenant, "cms-machine": machine.id },
        "lifecycle": user_data::precondition(&machine.id),
    });
    if let Some(image) = &config.image_id {
        body["source_details"] = json!({ "source_type": "image", "source_id": image });
    }
    Ok(body)
}

//! `oci`: an `oci_core_instance` per machine, with one provider block per
//! region (aliased `r_<region>`; the default block keeps the first
//! region, for resources made before aliases). The credentials reach the
//! provider as sensitive variables, set through `TF_VAR_*` in the tool's
//! environment, so that no file holds them; so does each instance's user
//! data, which `metadata.user_data` takes as base64, as the variable holds
//! it (`user_data.rs`).
//!
//! User data sets an instance's first config only: `metadata` is in
//! `ignore_changes`, and every later config goes over the node API. So are
//! the image, the shape and the placement, so that a change of them never
//! replaces the instances of a group at once: it reaches new instances,
//! and existing ones when they are replaced one at a time
//! ([`crate::WorkspacePlan::outdated`]). Flex shapes get a `shape_config`,
//! fixed ones none. The image must fit the shape: a precondition checks
//! the shape against the image's compatible shapes. Without a named
//! availability domain, the machines of a group spread over the region's.

use cms_model::OciConfig;
use serde_json::{Value, json};

use crate::providers::{Setup, oci_network};
use crate::template::{Block, Expression};
use crate::workspace::resource_name;
use crate::{MachinePlan, TofuError, WorkspacePlan, user_data};

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

/// What `ignore_changes` keeps from an existing instance.
/// The network security groups are not: they change in place.
const KEPT: [&str; 7] = [
    "metadata",
    "source_details",
    "shape",
    "shape_config",
    "availability_domain",
    "create_vnic_details[0].subnet_id",
    "create_vnic_details[0].assign_public_ip",
];

pub(crate) fn config(machine: &MachinePlan) -> Result<OciConfig, TofuError> {
    serde_json::from_value(Value::Object(machine.provider_config.clone()))
        .map_err(|err| TofuError::Invalid(format!("node group {}: {err}", machine.group)))
}

/// The provider alias of `region`, `r_<region>` with `_` for `-`. Region
/// names are lowercase letters, digits and dashes; anything else is refused
/// here, since the alias is a name the tool reads.
pub(crate) fn alias(region: &str) -> Result<String, TofuError> {
    let valid = !region.is_empty()
        && region.len() <= 63
        && region.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !valid {
        return Err(TofuError::Invalid(format!(
            "OCI region {region:?}: a region is 1 to 63 lowercase letters, digits and '-'"
        )));
    }
    Ok(format!("r_{}", region.replace('-', "_")))
}

/// The `provider` meta-argument of a block in `region`.
pub(crate) fn provider(region: &str) -> Result<String, TofuError> {
    Ok(format!("oci.{}", alias(region)?))
}

/// The provider blocks of the machine's region, the credentials'
/// variables, the availability-domain lookup, the image's shapes, and the
/// network of the region.
pub(crate) fn setup(plan: &WorkspacePlan, machine: &MachinePlan, setup: &mut Setup) -> Result<(), TofuError> {
    let config = config(machine)?;
    provider_blocks(&config.region, setup)?;
    let group = resource_name(&machine.group);
    let provider = provider(&config.region)?;
    if config.domains().is_empty() {
        setup.data_source(
            "oci_identity_availability_domains",
            group.clone(),
            Block::plain(json!({ "compartment_id": config.compartment_ocid, "provider": provider })),
        );
    }
    setup.data_source(
        "oci_core_image_shapes",
        group.clone(),
        Block::plain(json!({ "image_id": config.image_id, "provider": provider })),
    );
    setup.locals.insert(format!("shape_{group}"), json!(machine.shape));
    oci_network::setup(plan, machine, &config, setup)
}

/// The provider blocks of `region`: the default one (the first region's,
/// for resources made before aliases) and `r_<region>`, with the
/// credentials' variables. Also for a region whose machines are gone,
/// whose resources in the state still need it to be destroyed.
pub(crate) fn provider_blocks(region: &str, setup: &mut Setup) -> Result<(), TofuError> {
    let alias = alias(region)?;
    setup.required.insert("oci".into(), json!({ "source": "oracle/oci" }));
    let blocks = setup.providers.entry("oci").or_default();
    let block = |alias: Option<&str>| {
        let mut plain = json!({ "region": region });
        if let Some(alias) = alias {
            plain["alias"] = json!(alias);
        }
        CREDENTIAL_ARGUMENTS.into_iter().fold(Block::plain(plain), |block, (argument, reference)| {
            block.expression(&[argument], Expression::new(reference))
        })
    };
    blocks.entry(String::new()).or_insert_with(|| block(None));
    blocks.entry(alias.clone()).or_insert_with(|| block(Some(&alias)));
    for (variable, _) in CREDENTIAL_VARIABLES {
        setup.variables.insert(variable.into(), json!({ "type": "string", "sensitive": true }));
    }
    Ok(())
}

/// The availability domain of `machine`: the group's, or one of its list
/// or of the region's by the machine's index, as an expression or a plain
/// value.
fn availability_domain(machine: &MachinePlan, config: &OciConfig) -> Result<Value, Expression> {
    let domains = config.domains();
    if !domains.is_empty() {
        return Ok(json!(domains[machine.index as usize % domains.len()]));
    }
    let domains = format!(
        "data.oci_identity_availability_domains.{}.availability_domains",
        resource_name(&machine.group)
    );
    Err(Expression::new(format!("${{{domains}[{} % length({domains})].name}}", machine.index)))
}

/// The instance of one machine.
pub(crate) fn instance(plan: &WorkspacePlan, machine: &MachinePlan) -> Result<Block, TofuError> {
    let config = config(machine)?;
    let tenant = &plan.tenant;
    let image = config.image_id.clone();
    if image.is_empty() {
        return Err(TofuError::Invalid(format!(
            "node group {}: an oci node group needs providerConfig.imageId, the OCID of a Talos image",
            machine.group
        )));
    }
    let mut body = Block::plain(json!({
        "display_name": format!("{tenant}-{}", machine.id),
        "compartment_id": config.compartment_ocid,
        "shape": machine.shape,
        "source_details": { "source_type": "image", "source_id": image },
        "create_vnic_details": {
            "subnet_id": config.subnet_id,
            "assign_public_ip": plan.network.public_addresses,
        },
        "freeform_tags": { "cms-tenant": tenant, "cms-machine": machine.id },
        "provider": provider(&config.region)?,
    }));
    if let Some((ocpus, memory)) = config.flex(&machine.shape) {
        body.set("shape_config", json!({ "ocpus": ocpus, "memory_in_gbs": memory }));
    }
    body = match availability_domain(machine, &config) {
        Ok(domain) => {
            body.set("availability_domain", domain);
            body
        }
        Err(expression) => body.expression(&["availability_domain"], expression),
    };
    let group = resource_name(&machine.group);
    let security_groups = Expression::list(
        vec![format!("${{{}.id}}", oci_network::security_group(&config.region)?)],
        &config.network_security_group_ids,
    );
    let mut lifecycle = user_data::precondition(machine);
    lifecycle["precondition"].as_array_mut().into_iter().for_each(|conditions| {
        conditions.push(json!({
            "condition": format!(
                "${{contains(data.oci_core_image_shapes.{group}.image_shape_compatibilities[*].shape, local.shape_{group})}}"
            ),
            "error_message": format!("the image of node group {} does not run on its shape", machine.group),
        }))
    });
    lifecycle["ignore_changes"] = json!(KEPT);
    Ok(body
        .expression(&["create_vnic_details", "nsg_ids"], security_groups)
        .expression(&["metadata", "user_data"], Expression::new(user_data::reference(machine)))
        .expression(&["lifecycle"], Expression::new(lifecycle)))
}

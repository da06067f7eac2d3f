//! What the service reads back from the state after an apply: the address
//! of the load balancer it made for the control-plane endpoint, and the
//! machines whose instances no longer match their node group's image,
//! shape or placement (which `ignore_changes` keeps as they were made, so
//! that no change replaces a group's instances at once).

use cms_model::{OciConfig, OpenStackConfig, Provider};
use serde_json::Value;

use crate::WorkspacePlan;
use crate::providers::{oci, openstack};
use crate::state::StateResource;
use crate::workspace::{resource_name, resource_type};

/// The resource types of the endpoint's load balancers.
pub(crate) const BALANCERS: [&str; 2] =
    ["oci_network_load_balancer_network_load_balancer", "openstack_lb_loadbalancer_v2"];

/// The address of a load balancer resource: an OCI network load
/// balancer's public address when it has one, else its first; an Octavia
/// load balancer's VIP.
pub(crate) fn balancer_address(resource: &StateResource) -> Option<String> {
    let values = &resource.values;
    match resource.tf_type.as_str() {
        "oci_network_load_balancer_network_load_balancer" => {
            let addresses = values.get("ip_addresses").and_then(Value::as_array)?;
            let address = |entry: &Value| entry.get("ip_address").and_then(Value::as_str).map(str::to_string);
            let public = addresses.iter().find(|entry| entry.get("is_public") == Some(&Value::Bool(true)));
            public.and_then(address).or_else(|| addresses.iter().find_map(address))
        }
        "openstack_lb_loadbalancer_v2" => text(values, "vip_address"),
        _ => None,
    }
}

fn text(values: &Value, field: &str) -> Option<String> {
    values.get(field).and_then(Value::as_str).filter(|text| !text.is_empty()).map(str::to_string)
}

/// The IP address of the control-plane endpoint the workspace made: the
/// floating IP of the load balancer when it has one, else the load
/// balancer's own address. `None` when the state holds no load balancer,
/// or it has no address yet.
pub fn endpoint_address(resources: &[StateResource]) -> Option<String> {
    let managed = |kind: &str| {
        resources.iter().find(|resource| {
            resource.mode == "managed" && resource.tf_type == kind && resource.name == "endpoint"
        })
    };
    if let Some(floating) = managed("openstack_networking_floatingip_v2") {
        return text(&floating.values, "address");
    }
    BALANCERS.iter().find_map(|kind| managed(kind)).and_then(balancer_address)
}

/// The first object of a nested block as `show -json` prints it (a list of one).
fn block<'a>(values: &'a Value, field: &str) -> Option<&'a Value> {
    let value = values.get(field)?;
    value.as_array().map_or(Some(value), |items| items.first())
}

impl WorkspacePlan {
    /// The cloud machines whose instance in the state was made with another
    /// image, shape (or Flex size) or placement than their node group now
    /// asks for, with what differs. Such an instance changes only when it
    /// is replaced, one at a time.
    pub fn outdated(&self, resources: &[StateResource]) -> Vec<(String, String)> {
        let mut outdated = Vec::new();
        for machine in &self.machines {
            let kind = resource_type(machine.provider);
            let name = resource_name(&machine.id);
            let Some(state) =
                resources.iter().find(|r| r.mode == "managed" && r.tf_type == kind && r.name == name)
            else {
                continue;
            };
            let values = &state.values;
            let mut differs: Vec<&str> = Vec::new();
            match machine.provider {
                Provider::Metal => {}
                Provider::Oci => {
                    let Ok(config) = oci::config(machine) else { continue };
                    differs.extend(oci_differences(values, &machine.shape, &config));
                }
                Provider::OpenStack => {
                    let Ok(config) = openstack::config(machine) else { continue };
                    differs.extend(openstack_differences(values, &machine.shape, &config));
                }
            }
            if !differs.is_empty() {
                outdated.push((machine.id.clone(), differs.join(", ")));
            }
        }
        outdated
    }
}

fn oci_differences(values: &Value, shape: &str, config: &OciConfig) -> Vec<&'static str> {
    let mut differs = Vec::new();
    if text(values, "shape").as_deref() != Some(shape) {
        differs.push("shape");
    }
    let image = block(values, "source_details").and_then(|details| text(details, "source_id"));
    if image.is_some_and(|image| image != config.image_id) {
        differs.push("image");
    }
    if let Some((ocpus, memory)) = config.flex(shape) {
        let sized = block(values, "shape_config");
        let number = |field: &str| sized.and_then(|c| c.get(field)).and_then(Value::as_f64);
        if number("ocpus") != Some(ocpus) || number("memory_in_gbs") != Some(memory) {
            differs.push("size");
        }
    }
    let subnet = block(values, "create_vnic_details").and_then(|vnic| text(vnic, "subnet_id"));
    if subnet.is_some_and(|subnet| subnet != config.subnet_id) {
        differs.push("subnet");
    }
    if let [domain] = config.domains()
        && text(values, "availability_domain").as_deref() != Some(domain.as_str())
    {
        differs.push("availability domain");
    }
    differs
}

fn openstack_differences(values: &Value, flavor: &str, config: &OpenStackConfig) -> Vec<&'static str> {
    let mut differs = Vec::new();
    if text(values, "flavor_name").as_deref() != Some(flavor) {
        differs.push("flavor");
    }
    if text(values, "image_id").is_some_and(|image| image != config.image_id) {
        differs.push("image");
    }
    let network = block(values, "network").and_then(|network| text(network, "uuid"));
    if network.is_some_and(|network| network != config.network_id) {
        differs.push("network");
    }
    if let [zone] = config.zones()
        && text(values, "availability_zone").as_deref() != Some(zone.as_str())
    {
        differs.push("availability zone");
    }
    differs
}

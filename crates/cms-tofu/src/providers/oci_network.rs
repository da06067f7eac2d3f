//! The network the service makes for a tenant's `oci` machines: a network
//! security group per region (in the VCN of the region's first node group's
//! subnet) with the rules of `ports.rs` and open egress, which every
//! instance joins beside the groups the operator names; and, for a tenant
//! whose endpoint is made, a network load balancer in the subnet of the
//! first control-plane group: listeners on 6443 (health check `/readyz`
//! over HTTPS) and 50000, and one backend per control plane on each,
//! which come and go with the control planes.

use cms_model::{OciConfig, Role};
use serde_json::json;

use crate::providers::Setup;
use crate::providers::oci::{alias, provider};
use crate::providers::ports::{self, RULES, Source};
use crate::template::{Block, Expression};
use crate::workspace::resource_name;
use crate::{MachinePlan, TofuError, WorkspacePlan};

const SECURITY_GROUP: &str = "oci_core_network_security_group";
const RULE: &str = "oci_core_network_security_group_security_rule";
const BALANCER: &str = "oci_network_load_balancer_network_load_balancer";
const BACKEND_SET: &str = "oci_network_load_balancer_backend_set";
const LISTENER: &str = "oci_network_load_balancer_listener";
const BACKEND: &str = "oci_network_load_balancer_backend";

/// The load balancer's resource name.
pub(crate) const ENDPOINT: &str = "endpoint";

/// The listeners: name, port, and the health check of its backends.
const LISTENERS: [(&str, u16); 2] = [("kubernetes", 6443), ("talos", 50000)];

/// The address of the region's security group, `<type>.<alias>`.
pub(crate) fn security_group(region: &str) -> Result<String, TofuError> {
    Ok(format!("{SECURITY_GROUP}.{}", alias(region)?))
}

/// The security group of the machine's region (once per region), and the
/// load balancer with a backend for the machine when it is a control plane
/// of a tenant whose endpoint is made.
pub(crate) fn setup(
    plan: &WorkspacePlan,
    machine: &MachinePlan,
    config: &OciConfig,
    setup: &mut Setup,
) -> Result<(), TofuError> {
    let region = alias(&config.region)?;
    let provider = provider(&config.region)?;
    let tags = json!({ "cms-tenant": plan.tenant });
    if !setup.resources.get(SECURITY_GROUP).is_some_and(|groups| groups.contains_key(&region)) {
        setup.data_source(
            "oci_core_subnet",
            region.clone(),
            Block::plain(json!({ "subnet_id": config.subnet_id, "provider": provider })),
        );
        let group = Block::plain(json!({
            "compartment_id": config.compartment_ocid,
            "display_name": format!("{}-nodes", plan.tenant),
            "freeform_tags": tags,
            "provider": provider,
        }))
        .expression(&["vcn_id"], Expression::new(format!("${{data.oci_core_subnet.{region}.vcn_id}}")));
        setup.resource(SECURITY_GROUP, region.clone(), group);
        rules(plan, &region, &provider, setup);
    }
    let first = plan.first_control_plane().is_some_and(|first| first.id == machine.id);
    if plan.network.load_balancer && first {
        balancer(plan, config, &provider, &region, setup);
    }
    let balanced = plan.network.load_balancer
        && plan.first_control_plane().is_some_and(|first| first.provider == machine.provider);
    if balanced && machine.role == Role::ControlPlane && !plan.network.instances_held {
        backends(machine, &provider, setup);
    }
    Ok(())
}

/// The rules of the region's security group.
fn rules(plan: &WorkspacePlan, region: &str, provider: &str, setup: &mut Setup) {
    let group_id = format!("${{{SECURITY_GROUP}.{region}.id}}");
    let admin = ports::admin_cidrs(&plan.network.admin_cidrs);
    for rule in &RULES {
        let protocol = match rule.protocol {
            ports::Protocol::Tcp => "tcp_options",
            ports::Protocol::Udp => "udp_options",
        };
        for (name, cidr) in ports::instances(rule, &admin) {
            let mut block = Block::plain(json!({
                "direction": "INGRESS",
                "protocol": rule.protocol.number(),
                "stateless": false,
                "description": format!("cms: {}", rule.name),
                "provider": provider,
                protocol: { "destination_port_range": { "min": rule.ports.0, "max": rule.ports.1 } },
            }));
            match (rule.source, cidr) {
                (Source::Admin, Some(cidr)) => {
                    block.set("source_type", json!("CIDR_BLOCK"));
                    block.set("source", json!(cidr));
                }
                _ => {
                    block.set("source_type", json!("NETWORK_SECURITY_GROUP"));
                    block = block.expression(&["source"], Expression::new(group_id.clone()));
                }
            }
            let block = block.expression(&["network_security_group_id"], Expression::new(group_id.clone()));
            setup.resource(RULE, format!("{region}_{name}"), block);
        }
    }
    let egress = Block::plain(json!({
        "direction": "EGRESS",
        "protocol": "all",
        "destination_type": "CIDR_BLOCK",
        "destination": "0.0.0.0/0",
        "stateless": false,
        "description": "cms: egress",
        "provider": provider,
    }))
    .expression(&["network_security_group_id"], Expression::new(group_id));
    setup.resource(RULE, format!("{region}_egress"), egress);
}

/// The load balancer, its backend sets and its listeners.
fn balancer(plan: &WorkspacePlan, config: &OciConfig, provider: &str, region: &str, setup: &mut Setup) {
    let balancer = Block::plain(json!({
        "compartment_id": config.compartment_ocid,
        "display_name": format!("{}-api", plan.tenant),
        "subnet_id": config.subnet_id,
        "is_private": !plan.network.public_addresses,
        "is_preserve_source_destination": false,
        "freeform_tags": { "cms-tenant": plan.tenant },
        "provider": provider,
    }))
    .expression(
        &["network_security_group_ids"],
        Expression::new(json!([format!("${{{SECURITY_GROUP}.{region}.id}}")])),
    );
    setup.resource(BALANCER, ENDPOINT, balancer);
    let balancer_id = format!("${{{BALANCER}.{ENDPOINT}.id}}");
    for (name, port) in LISTENERS {
        let health = match name {
            "kubernetes" => {
                json!({ "protocol": "HTTPS", "port": port, "url_path": "/readyz", "return_code": 200 })
            }
            _ => json!({ "protocol": "TCP", "port": port }),
        };
        let set = Block::plain(json!({
            "name": name,
            "policy": "FIVE_TUPLE",
            "is_preserve_source": false,
            "health_checker": health,
            "provider": provider,
        }))
        .expression(&["network_load_balancer_id"], Expression::new(balancer_id.clone()));
        setup.resource(BACKEND_SET, name, set);
        let listener =
            Block::plain(json!({ "name": name, "port": port, "protocol": "TCP", "provider": provider }))
                .expression(&["network_load_balancer_id"], Expression::new(balancer_id.clone()))
                .expression(
                    &["default_backend_set_name"],
                    Expression::new(format!("${{{BACKEND_SET}.{name}.name}}")),
                );
        setup.resource(LISTENER, name, listener);
    }
}

/// A control plane's backend on each backend set.
fn backends(machine: &MachinePlan, provider: &str, setup: &mut Setup) {
    let instance = resource_name(&machine.id);
    for (name, port) in LISTENERS {
        let backend = Block::plain(json!({ "port": port, "provider": provider }))
            .expression(
                &["network_load_balancer_id"],
                Expression::new(format!("${{{BALANCER}.{ENDPOINT}.id}}")),
            )
            .expression(&["backend_set_name"], Expression::new(format!("${{{BACKEND_SET}.{name}.name}}")))
            .expression(
                &["ip_address"],
                Expression::new(format!("${{oci_core_instance.{instance}.private_ip}}")),
            );
        setup.resource(BACKEND, format!("{instance}_{name}"), backend);
    }
}

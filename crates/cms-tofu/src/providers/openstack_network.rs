//! The network the service makes for a tenant's `openstack` machines: a
//! security group with the rules of `ports.rs` (OpenStack adds open egress
//! to every group), which every instance joins beside the groups the
//! operator names; and, for a tenant whose endpoint is made, an Octavia
//! load balancer on the first control-plane group's network: listeners on
//! 6443 (an HTTPS health monitor on `/readyz`) and 50000 (a TCP monitor),
//! one pool member per control plane on each, and a floating IP from
//! [`crate::Network::floating_ip_pool`] when one is set.

use cms_model::{OpenStackConfig, Role};
use serde_json::json;

use crate::providers::Setup;
use crate::providers::ports::{self, RULES, Source};
use crate::template::{Block, Expression};
use crate::workspace::resource_name;
use crate::{MachinePlan, WorkspacePlan};

const SECURITY_GROUP: &str = "openstack_networking_secgroup_v2";
const RULE: &str = "openstack_networking_secgroup_rule_v2";
const BALANCER: &str = "openstack_lb_loadbalancer_v2";
const LISTENER: &str = "openstack_lb_listener_v2";
const POOL: &str = "openstack_lb_pool_v2";
const MONITOR: &str = "openstack_lb_monitor_v2";
const MEMBER: &str = "openstack_lb_member_v2";
const FLOATING_IP: &str = "openstack_networking_floatingip_v2";
const ASSOCIATION: &str = "openstack_networking_floatingip_associate_v2";

/// The tenant's security group.
pub(crate) const SECURITY_GROUP_ADDRESS: &str = "openstack_networking_secgroup_v2.nodes";

/// The load balancer's (and its floating IP's) resource name.
pub(crate) const ENDPOINT: &str = "endpoint";

/// The listeners: name and port.
const LISTENERS: [(&str, u16); 2] = [("kubernetes", 6443), ("talos", 50000)];

/// The tag that names the tenant on what the service makes.
fn tag(plan: &WorkspacePlan) -> String {
    format!("cms-tenant={}", plan.tenant)
}

/// The security group (once), the load balancer (with the first control
/// plane), and the machine's members when it is a control plane of a
/// tenant whose endpoint is made.
pub(crate) fn setup(
    plan: &WorkspacePlan,
    machine: &MachinePlan,
    config: &OpenStackConfig,
    setup: &mut Setup,
) {
    if !setup.resources.get(SECURITY_GROUP).is_some_and(|groups| groups.contains_key("nodes")) {
        let group = Block::plain(json!({
            "name": format!("{}-nodes", plan.tenant),
            "description": format!("cms: the nodes of tenant {}", plan.tenant),
            "tags": [tag(plan)],
        }));
        setup.resource(SECURITY_GROUP, "nodes", group);
        rules(plan, setup);
    }
    let first = plan.first_control_plane().is_some_and(|first| first.id == machine.id);
    if plan.network.load_balancer && first {
        balancer(plan, config, setup);
    }
    let balanced = plan.network.load_balancer
        && plan.first_control_plane().is_some_and(|first| first.provider == machine.provider);
    if balanced && machine.role == Role::ControlPlane && !plan.network.instances_held {
        members(machine, setup);
    }
}

fn rules(plan: &WorkspacePlan, setup: &mut Setup) {
    let group_id = format!("${{{SECURITY_GROUP_ADDRESS}.id}}");
    let admin = ports::admin_cidrs(&plan.network.admin_cidrs);
    for rule in &RULES {
        for (name, cidr) in ports::instances(rule, &admin) {
            let mut block = Block::plain(json!({
                "direction": "ingress",
                "ethertype": if cidr.as_deref().is_some_and(|cidr| cidr.contains(':')) { "IPv6" } else { "IPv4" },
                "protocol": rule.protocol.name(),
                "port_range_min": rule.ports.0,
                "port_range_max": rule.ports.1,
                "description": format!("cms: {}", rule.name),
            }));
            match (rule.source, cidr) {
                (Source::Admin, Some(cidr)) => block.set("remote_ip_prefix", json!(cidr)),
                _ => block = block.expression(&["remote_group_id"], Expression::new(group_id.clone())),
            }
            let block = block.expression(&["security_group_id"], Expression::new(group_id.clone()));
            setup.resource(RULE, name, block);
        }
    }
}

/// The load balancer, its listeners, pools and monitors, and its floating IP.
fn balancer(plan: &WorkspacePlan, config: &OpenStackConfig, setup: &mut Setup) {
    let balancer = Block::plain(json!({
        "name": format!("{}-api", plan.tenant),
        "description": format!("cms: the control-plane endpoint of tenant {}", plan.tenant),
        "vip_network_id": config.network_id,
        "tags": [tag(plan)],
    }))
    .expression(
        &["security_group_ids"],
        Expression::new(json!([format!("${{{SECURITY_GROUP_ADDRESS}.id}}")])),
    );
    setup.resource(BALANCER, ENDPOINT, balancer);
    for (name, port) in LISTENERS {
        let listener = Block::plain(
            json!({ "name": format!("{}-{name}", plan.tenant), "protocol": "TCP", "protocol_port": port }),
        )
        .expression(&["loadbalancer_id"], Expression::new(format!("${{{BALANCER}.{ENDPOINT}.id}}")));
        setup.resource(LISTENER, name, listener);
        let pool = Block::plain(json!({ "name": format!("{}-{name}", plan.tenant), "protocol": "TCP", "lb_method": "ROUND_ROBIN" }))
            .expression(&["listener_id"], Expression::new(format!("${{{LISTENER}.{name}.id}}")));
        setup.resource(POOL, name, pool);
        let check = match name {
            "kubernetes" => json!({ "type": "HTTPS", "url_path": "/readyz", "expected_codes": "200" }),
            _ => json!({ "type": "TCP" }),
        };
        let mut monitor = Block::plain(json!({ "delay": 10, "timeout": 5, "max_retries": 3 }));
        for (key, value) in check.as_object().into_iter().flatten() {
            monitor.set(key, value.clone());
        }
        let monitor = monitor.expression(&["pool_id"], Expression::new(format!("${{{POOL}.{name}.id}}")));
        setup.resource(MONITOR, name, monitor);
    }
    if let Some(pool) = &plan.network.floating_ip_pool {
        setup.resource(FLOATING_IP, ENDPOINT, Block::plain(json!({ "pool": pool, "tags": [tag(plan)] })));
        let association = Block::default()
            .expression(&["floating_ip"], Expression::new(format!("${{{FLOATING_IP}.{ENDPOINT}.address}}")))
            .expression(&["port_id"], Expression::new(format!("${{{BALANCER}.{ENDPOINT}.vip_port_id}}")));
        setup.resource(ASSOCIATION, ENDPOINT, association);
    }
}

/// A control plane's member of each pool.
fn members(machine: &MachinePlan, setup: &mut Setup) {
    let instance = resource_name(&machine.id);
    for (name, port) in LISTENERS {
        let member = Block::plain(json!({ "protocol_port": port }))
            .expression(&["pool_id"], Expression::new(format!("${{{POOL}.{name}.id}}")))
            .expression(
                &["address"],
                Expression::new(format!("${{openstack_compute_instance_v2.{instance}.access_ip_v4}}")),
            );
        setup.resource(MEMBER, format!("{instance}_{name}"), member);
    }
}

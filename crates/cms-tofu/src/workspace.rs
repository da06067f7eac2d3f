//! A tenant's workspace as data: the machines it should hold, turned into
//! `main.tf.json` by the provider modules. Nothing here is templated text;
//! every file is a `serde_json` value, and every user string in it is
//! escaped so that the tool reads it as a literal (`template.rs`).

use std::collections::BTreeMap;

use cms_model::{MetalHost, Provider, Role};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::providers::{Setup, metal, oci, openstack};
use crate::template::Block;
use crate::{TofuError, user_data};

/// The name of the generated configuration file.
pub const MAIN_FILE: &str = "main.tf.json";

/// One machine the workspace should hold. Its `Debug` leaves the user
/// data out.
#[derive(Clone, PartialEq)]
pub struct MachinePlan {
    /// The machine id, `<group>-<index>`: stable, URL-safe, and the
    /// resource name in the workspace.
    pub id: String,
    pub group: String,
    pub index: u32,
    pub role: Role,
    pub provider: Provider,
    pub shape: String,
    /// The node group's `providerConfig`.
    pub provider_config: Map<String, Value>,
    /// For `metal`: the host this machine is.
    pub host: Option<MetalHost>,
    /// For cloud providers: the rendered machine config, the instance's
    /// user data. It never enters `main.tf.json`: the tool gets it in its
    /// environment (`user_data.rs`).
    pub user_data: Option<String>,
}

impl std::fmt::Debug for MachinePlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MachinePlan")
            .field("id", &self.id)
            .field("group", &self.group)
            .field("index", &self.index)
            .field("role", &self.role)
            .field("provider", &self.provider)
            .field("shape", &self.shape)
            .field("provider_config", &self.provider_config)
            .field("host", &self.host)
            .field("user_data", &self.user_data.as_ref().map(|_| crate::REDACTED))
            .finish()
    }
}

/// What one tenant's workspace should hold.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WorkspacePlan {
    pub tenant: String,
    pub machines: Vec<MachinePlan>,
    /// What the service makes around the cloud machines.
    pub network: Network,
}

/// The network the service makes around a tenant's cloud machines: a
/// security group per cloud (and OCI region) that admits what Talos and
/// Kubernetes need (`providers/ports.rs`), and the load balancer of the
/// control-plane endpoint.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Network {
    /// Makes the control-plane endpoint, a load balancer before the control
    /// planes, on the cloud of the first control-plane group: for a tenant
    /// without a `controlPlaneEndpoint`.
    pub load_balancer: bool,
    /// Applies the network alone and holds the instances back: the first
    /// run of a tenant whose endpoint is made, whose machine configs need
    /// the endpoint the run makes.
    pub instances_held: bool,
    /// OCI: instances and the load balancer get public addresses, which the
    /// service uses; else private ones.
    pub public_addresses: bool,
    /// Where the service and the tenant's users reach the node API and the
    /// Kubernetes API from; `0.0.0.0/0` when empty.
    pub admin_cidrs: Vec<String>,
    /// OpenStack: the external network a floating IP of the load balancer
    /// comes from; none keeps its private address.
    pub floating_ip_pool: Option<String>,
    /// OCI regions the tenant had machines in: their provider blocks stay,
    /// so that what the state holds there can be destroyed once the
    /// region's node groups are gone.
    pub oci_regions: Vec<String>,
}

impl WorkspacePlan {
    /// The resource address of a machine, as `-replace` takes it.
    pub fn address(&self, id: &str) -> Option<String> {
        let machine = self.machines.iter().find(|machine| machine.id == id)?;
        Some(format!("{}.{}", resource_type(machine.provider), resource_name(&machine.id)))
    }

    /// The OCI regions of the plan's machines, in order, once each.
    pub fn oci_regions(&self) -> Vec<String> {
        let mut regions: Vec<String> = Vec::new();
        for machine in self.machines.iter().filter(|machine| machine.provider == Provider::Oci) {
            if let Some(region) = machine.provider_config.get("region").and_then(Value::as_str)
                && !regions.iter().any(|known| known == region)
            {
                regions.push(region.to_string());
            }
        }
        regions
    }

    /// The first control-plane machine, whose group places the load balancer.
    pub(crate) fn first_control_plane(&self) -> Option<&MachinePlan> {
        self.machines.iter().find(|machine| machine.role == Role::ControlPlane)
    }

    /// The generated `main.tf.json`. It refers to the machines' user data
    /// through a variable and holds none of it. Every block comes from a
    /// provider module as a `template::Block`, whose user strings are escaped here
    /// (`template.rs`), so that no user string is read as a template; the
    /// machine ids and group names, which the service's own expressions
    /// name, must hold the characters of DNS labels only (a group name of
    /// 63 characters makes longer machine ids).
    pub fn render(&self) -> Result<Value, TofuError> {
        let mut setup = Setup::default();
        let mut resources: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
        let held = self.network.instances_held;
        for machine in &self.machines {
            for (what, name) in [("id", &machine.id), ("group", &machine.group)] {
                if !is_label_text(name) {
                    return Err(TofuError::Invalid(format!(
                        "machine {what} {name:?}: only lowercase letters, digits and '-' may name a machine"
                    )));
                }
            }
            let body = match machine.provider {
                Provider::Metal => metal::instance(machine)?,
                Provider::Oci => {
                    oci::setup(self, machine, &mut setup)?;
                    oci::instance(self, machine)?
                }
                Provider::OpenStack => {
                    openstack::setup(self, machine, &mut setup)?;
                    openstack::instance(self, machine)?
                }
            };
            if machine.provider != Provider::Metal {
                setup.variables.insert(user_data::variable(&machine.group), user_data::declaration());
            }
            if held && machine.provider != Provider::Metal {
                continue;
            }
            resources
                .entry(resource_type(machine.provider))
                .or_default()
                .insert(resource_name(&machine.id), body.render());
        }
        for region in &self.network.oci_regions {
            oci::provider_blocks(region, &mut setup)?;
        }
        for (kind, blocks) in std::mem::take(&mut setup.resources) {
            let rendered = resources.entry(kind.to_string()).or_default();
            rendered.extend(blocks.into_iter().map(|(name, block)| (name, block.render())));
        }
        let Setup { providers, required, variables, locals, data, .. } = setup;
        let mut root = Map::new();
        if !required.is_empty() {
            root.insert("terraform".into(), json!({ "required_providers": required }));
        }
        if !providers.is_empty() {
            let providers: Map<String, Value> = providers
                .into_iter()
                .map(|(name, blocks)| {
                    let mut blocks: Vec<Value> = blocks.into_values().map(Block::render).collect();
                    // One block is an object, several (aliases) a list.
                    let value = if blocks.len() == 1 { blocks.remove(0) } else { Value::Array(blocks) };
                    (name.to_string(), value)
                })
                .collect();
            root.insert("provider".into(), Value::Object(providers));
        }
        if !variables.is_empty() {
            root.insert("variable".into(), Value::Object(variables));
        }
        if !locals.is_empty() {
            // Plain values: user strings, escaped.
            root.insert("locals".into(), Block::plain(Value::Object(locals)).render());
        }
        if !data.is_empty() {
            let data: Map<String, Value> = data
                .into_iter()
                .map(|(kind, blocks)| {
                    let blocks = blocks.into_iter().map(|(name, block)| (name, block.render())).collect();
                    (kind.to_string(), Value::Object(blocks))
                })
                .collect();
            root.insert("data".into(), Value::Object(data));
        }
        if !resources.is_empty() {
            let resources =
                resources.into_iter().map(|(kind, blocks)| (kind, Value::Object(blocks))).collect();
            root.insert("resource".into(), Value::Object(resources));
        }
        Ok(Value::Object(root))
    }
}

/// The resource name of machine `id` in the workspace: the id, with a
/// leading `_` when it starts with a digit (such as a group named `1st`),
/// since the tool's names start with a letter or `_`.
pub fn resource_name(id: &str) -> String {
    if id.starts_with(|c: char| c.is_ascii_digit()) { format!("_{id}") } else { id.to_string() }
}

/// The machine id a resource name stands for: [`resource_name`] undone.
pub(crate) fn machine_of(name: &str) -> &str {
    name.strip_prefix('_').unwrap_or(name)
}

/// Whether `name` holds DNS labels' characters only, and at least one: the
/// machine ids and group names that the service's expressions name.
fn is_label_text(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// The resource type that stands for a machine of `provider`.
pub fn resource_type(provider: Provider) -> String {
    match provider {
        Provider::Metal => "terraform_data",
        Provider::Oci => "oci_core_instance",
        Provider::OpenStack => "openstack_compute_instance_v2",
    }
    .to_string()
}

/// The hash of a rendered workspace together with the digest of the user
/// data it is applied with (empty for none) and the fingerprint of the
/// credentials it runs with: equal hashes need no run. A workspace without
/// user data hashes as it did before user data left the file.
pub fn inputs_hash(rendered: &[u8], user_data_digest: &str, credentials_fingerprint: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(rendered);
    hasher.update(b"\0");
    hasher.update(credentials_fingerprint.as_bytes());
    if !user_data_digest.is_empty() {
        hasher.update(b"\0user data\0");
        hasher.update(user_data_digest.as_bytes());
    }
    hex::encode(hasher.finalize())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A string the user sent, marked so that it can be found again.
    const USER: &str = r#"USER${file("../../secrets.key")}%{ if true }x%{ endif }"#;

    fn machine(group: &str, provider: Provider, config: Value) -> MachinePlan {
        MachinePlan {
            id: format!("{group}-0"),
            group: group.into(),
            index: 0,
            role: Role::Worker,
            provider,
            shape: USER.into(),
            provider_config: config.as_object().cloned().unwrap_or_default(),
            host: (provider == Provider::Metal)
                .then(|| MetalHost { address: USER.into(), provider_id: Some(USER.into()) }),
            user_data: Some("machine: {}\n".into()),
        }
    }

    /// Every string and key of `value`.
    fn texts(value: &Value, into: &mut Vec<String>) {
        match value {
            Value::String(text) => into.push(text.clone()),
            Value::Array(items) => items.iter().for_each(|item| texts(item, into)),
            Value::Object(map) => map.iter().for_each(|(key, value)| {
                into.push(key.clone());
                texts(value, into);
            }),
            _ => {}
        }
    }

    #[test]
    fn every_user_string_is_escaped_and_only_the_services_expressions_are_templates() {
        // A region names a provider alias: it is checked, not escaped.
        let oci = json!({"region": "eu-frankfurt-1", "compartmentOcid": USER, "subnetId": USER, "ocpus": 1, "memoryGb": 2, "imageId": USER, "networkSecurityGroupIds": [USER]});
        let openstack =
            json!({"imageId": USER, "networkId": USER, "availabilityZone": USER, "securityGroups": [USER]});
        let plan = WorkspacePlan {
            tenant: USER.into(),
            network: Network { load_balancer: true, admin_cidrs: vec![USER.into()], ..Network::default() },
            machines: vec![
                MachinePlan { role: Role::ControlPlane, ..machine("cp", Provider::Oci, oci.clone()) },
                machine("domain", Provider::Oci, {
                    let mut oci = oci;
                    oci["availabilityDomain"] = json!(USER);
                    oci
                }),
                machine("os", Provider::OpenStack, openstack),
                machine("metal", Provider::Metal, json!({})),
            ],
        };
        let rendered = plan.render().unwrap();
        let mut all = Vec::new();
        texts(&rendered, &mut all);
        let escaped = r#"USER$${file("../../secrets.key")}%%{ if true }x%%{ endif }"#;
        let user: Vec<&String> = all.iter().filter(|text| text.contains("USER")).collect();
        assert!(user.len() >= 20, "{user:?}");
        for text in user {
            assert!(text.contains(escaped), "{text}");
            let bare = text.replace("$${", "").replace("%%{", "");
            assert!(!bare.contains("${") && !bare.contains("%{"), "{text}");
        }
        let oci = &rendered["resource"]["oci_core_instance"];
        assert_eq!(oci["cp-0"]["shape"], escaped);
        assert_eq!(oci["cp-0"]["display_name"], format!("{escaped}-cp-0"));
        let domains = "data.oci_identity_availability_domains.cp.availability_domains";
        assert_eq!(oci["cp-0"]["availability_domain"], format!("${{{domains}[0 % length({domains})].name}}"));
        assert_eq!(oci["cp-0"]["create_vnic_details"]["nsg_ids"][1], escaped);
        assert_eq!(oci["domain-0"]["availability_domain"], escaped);
        assert!(oci["cp-0"]["metadata"]["user_data"].as_str().unwrap().starts_with("${var."));
        assert_eq!(rendered["provider"]["oci"][0]["region"], "eu-frankfurt-1");
        assert_eq!(rendered["provider"]["oci"][1]["alias"], "r_eu_frankfurt_1");
        assert_eq!(rendered["provider"]["oci"][0]["user_ocid"], "${var.oci_user_ocid}");
        let rules = &rendered["resource"]["oci_core_network_security_group_security_rule"];
        assert_eq!(rules["r_eu_frankfurt_1_talos_api_admin_0"]["source"], escaped);
        let balancer = &rendered["resource"]["oci_network_load_balancer_network_load_balancer"]["endpoint"];
        assert_eq!(balancer["subnet_id"], escaped);
        let openstack_rules = &rendered["resource"]["openstack_networking_secgroup_rule_v2"];
        assert_eq!(openstack_rules["kubernetes_api_admin_0"]["remote_ip_prefix"], escaped);
        assert_eq!(rendered["data"]["oci_identity_availability_domains"]["cp"]["compartment_id"], escaped);
        let openstack = &rendered["resource"]["openstack_compute_instance_v2"]["os-0"];
        assert_eq!(
            openstack["security_groups"],
            json!(["${openstack_networking_secgroup_v2.nodes.name}", escaped])
        );
        assert!(openstack["user_data"].as_str().unwrap().starts_with("${try(base64decode(var."));
        let metal = &rendered["resource"]["terraform_data"]["metal-0"]["input"];
        assert_eq!(metal["providerId"], escaped);
    }

    #[test]
    fn a_region_that_cannot_name_a_provider_is_refused() {
        for region in ["", "EU", "eu_1", "eu-${x}", &"r".repeat(64)] {
            let plan = WorkspacePlan {
                tenant: "acme".into(),
                machines: vec![machine(
                    "cp",
                    Provider::Oci,
                    json!({"region": region, "compartmentOcid": "c", "subnetId": "s", "imageId": "i"}),
                )],
                ..WorkspacePlan::default()
            };
            assert!(matches!(plan.render(), Err(TofuError::Invalid(_))), "{region}");
        }
    }

    #[test]
    fn names_in_the_services_expressions_must_be_dns_labels() {
        for (id, group) in [("cp-0", "c\"p"), ("x}-0", "cp"), ("", "cp"), ("cp-0", "")] {
            let mut machine = machine("cp", Provider::Metal, json!({}));
            (machine.id, machine.group) = (id.into(), group.into());
            let plan = WorkspacePlan { tenant: "acme".into(), machines: vec![machine], ..Default::default() };
            assert!(matches!(plan.render(), Err(TofuError::Invalid(_))), "{id} {group}");
        }
    }

    #[test]
    fn a_group_of_63_characters_makes_machines_of_longer_ids() {
        let group = "g".repeat(63);
        let mut machine = machine("cp", Provider::Metal, json!({}));
        (machine.id, machine.group) = (format!("{group}-10"), group);
        let plan = WorkspacePlan { tenant: "acme".into(), machines: vec![machine], ..Default::default() };
        let rendered = plan.render().unwrap();
        assert!(rendered["resource"]["terraform_data"].get(format!("{}-10", "g".repeat(63))).is_some());
    }
}

//! Snapshots of generated workspaces: the `oci` and `openstack` modules
//! cannot run here without a cloud, so their output is pinned. The machines'
//! user data is no part of it: the snapshots show the variable references.

use cms_model::{MetalHost, Provider, Role};
use serde_json::{Map, Value, json};

use crate::{MachinePlan, Network, WorkspacePlan};

fn config(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn machine(
    group: &str,
    index: u32,
    role: Role,
    provider: Provider,
    shape: &str,
    provider_config: Value,
) -> MachinePlan {
    MachinePlan {
        id: format!("{group}-{index}"),
        group: group.into(),
        index,
        role,
        provider,
        shape: shape.into(),
        provider_config: config(provider_config),
        host: None,
        user_data: Some(format!("machine: {group}-{index}\n")),
    }
}

/// The rendered workspace, checked to hold no machine's user data, in the
/// clear or as base64.
fn rendered(plan: &WorkspacePlan) -> String {
    use base64::Engine;
    let text = serde_json::to_string_pretty(&plan.render().unwrap()).unwrap();
    for machine in &plan.machines {
        let Some(config) = &machine.user_data else { continue };
        let encoded = base64::engine::general_purpose::STANDARD.encode(config);
        assert!(!text.contains(config.trim()) && !text.contains(&encoded), "{} in {text}", machine.id);
    }
    text
}

#[test]
fn oci_workspace() {
    let oci = json!({"region": "eu-frankfurt-1", "compartmentOcid": "ocid1.compartment.oc1..c", "subnetId": "ocid1.subnet.oc1..s", "ocpus": 2, "memoryGb": 8, "imageId": "ocid1.image.oc1..talos-arm64"});
    let fixed = json!({"region": "us-ashburn-1", "compartmentOcid": "ocid1.compartment.oc1..c", "subnetId": "ocid1.subnet.oc1..w", "imageId": "ocid1.image.oc1..talos-amd64", "availabilityDomains": ["AD-1", "AD-2"], "networkSecurityGroupIds": ["ocid1.nsg.oc1..own"]});
    let plan = WorkspacePlan {
        tenant: "acme".into(),
        machines: vec![
            machine("cp", 0, Role::ControlPlane, Provider::Oci, "VM.Standard.A1.Flex", oci.clone()),
            machine("cp", 1, Role::ControlPlane, Provider::Oci, "VM.Standard.A1.Flex", oci),
            machine("1st", 1, Role::Worker, Provider::Oci, "VM.Standard2.1", fixed),
        ],
        network: Network {
            load_balancer: true,
            admin_cidrs: vec!["10.1.0.0/16".into()],
            ..Network::default()
        },
    };
    insta::assert_snapshot!(rendered(&plan));
    assert_eq!(plan.address("1st-1").as_deref(), Some("oci_core_instance._1st-1"));
}

#[test]
fn openstack_workspace() {
    let os = json!({"imageId": "img-talos", "networkId": "net-1", "availabilityZones": ["az-1", "az-2"], "securityGroups": ["talos"]});
    let plan = WorkspacePlan {
        tenant: "acme".into(),
        machines: vec![
            machine("cp", 0, Role::ControlPlane, Provider::OpenStack, "m1.large", os.clone()),
            machine("cp", 1, Role::ControlPlane, Provider::OpenStack, "m1.large", os),
        ],
        network: Network {
            load_balancer: true,
            floating_ip_pool: Some("public".into()),
            ..Network::default()
        },
    };
    insta::assert_snapshot!(rendered(&plan));
}

#[test]
fn metal_workspace() {
    let mut plan = WorkspacePlan { tenant: "acme".into(), machines: Vec::new(), ..Default::default() };
    for index in 0..2 {
        let mut m = machine("cp", index, Role::ControlPlane, Provider::Metal, "bare", json!({}));
        m.user_data = None;
        m.host = Some(MetalHost {
            address: format!("10.0.0.{}", index + 1),
            provider_id: (index == 0).then(|| "rack1-a".to_string()),
        });
        plan.machines.push(m);
    }
    insta::assert_snapshot!(rendered(&plan));
    assert_eq!(plan.address("cp-1").as_deref(), Some("terraform_data.cp-1"));
}

#[test]
fn invalid_provider_config_is_an_error() {
    let plan = WorkspacePlan {
        tenant: "acme".into(),
        machines: vec![machine("cp", 0, Role::ControlPlane, Provider::Oci, "x", json!({"region": 1}))],
        ..Default::default()
    };
    assert!(plan.render().is_err());
}

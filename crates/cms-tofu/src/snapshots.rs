//! Snapshots of generated workspaces: the `oci` and `openstack` modules
//! cannot run here without a cloud, so their output is pinned. The machines'
//! user data is no part of it: the snapshots show the variable references.

use cms_model::{MetalHost, Provider, Role};
use serde_json::{Map, Value, json};

use crate::{MachinePlan, WorkspacePlan};

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
    let oci = json!({"region": "eu-frankfurt-1", "compartmentOcid": "ocid1.compartment.oc1..c", "subnetId": "ocid1.subnet.oc1..s", "ocpus": 2, "memoryGb": 8});
    let plan = WorkspacePlan {
        tenant: "acme".into(),
        machines: vec![
            machine("cp", 0, Role::ControlPlane, Provider::Oci, "VM.Standard.A1.Flex", oci.clone()),
            machine("workers", 0, Role::Worker, Provider::Oci, "VM.Standard.E4.Flex", {
                let mut oci = oci;
                oci["imageId"] = json!("ocid1.image.oc1..talos");
                oci["availabilityDomain"] = json!("AD-1");
                oci
            }),
        ],
    };
    insta::assert_snapshot!(rendered(&plan));
}

#[test]
fn openstack_workspace() {
    let os = json!({"imageId": "img-talos", "networkId": "net-1", "availabilityZone": "nova", "securityGroups": ["talos"]});
    let plan = WorkspacePlan {
        tenant: "acme".into(),
        machines: vec![
            machine("cp", 0, Role::ControlPlane, Provider::OpenStack, "m1.large", os.clone()),
            machine("cp", 1, Role::ControlPlane, Provider::OpenStack, "m1.large", os),
        ],
    };
    insta::assert_snapshot!(rendered(&plan));
}

#[test]
fn metal_workspace() {
    let mut plan = WorkspacePlan { tenant: "acme".into(), machines: Vec::new() };
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
    };
    assert!(plan.render().is_err());
}

use serde_json::{Value, json};

use super::*;
use crate::validate::Validate;

fn spec(body: Value) -> NodeGroupSpec {
    serde_json::from_value(body).expect("parses")
}

fn workers(count: u32, removed: &[&str]) -> NodeGroupSpec {
    spec(json!({"name": "workers", "role": "worker", "count": count, "providerClass": "openstack:m1",
                "providerConfig": {"imageId": "i", "networkId": "n"}, "removedMachines": removed}))
}

fn normalized(mut group: NodeGroupSpec) -> Result<NodeGroupSpec, FieldError> {
    group.normalize("spec.nodeGroups[0]").map(|_| group)
}

fn metal(count: u32, hosts: usize, removed: &[&str], autoscaling: Option<Value>) -> NodeGroupSpec {
    let hosts: Vec<Value> = (1..=hosts).map(|i| json!({"address": format!("10.0.0.{i}")})).collect();
    let mut body = json!({"name": "workers", "role": "worker", "count": count, "providerClass": "metal:bare",
                          "providerConfig": {"hosts": hosts}, "removedMachines": removed});
    if let Some(autoscaling) = autoscaling {
        body["autoscaling"] = autoscaling;
    }
    spec(body)
}

#[test]
fn the_machines_are_the_first_count_indexes_not_removed() {
    let plain = workers(3, &[]);
    assert_eq!(plain.indexes(), vec![0, 1, 2]);
    assert_eq!(plain.machine_ids(), vec!["workers-0", "workers-1", "workers-2"]);
    let named = workers(2, &["workers-1"]);
    assert_eq!(named.indexes(), vec![0, 2]);
    assert_eq!(named.machine_ids(), vec!["workers-0", "workers-2"]);
    let two = workers(3, &["workers-3", "workers-0"]);
    assert_eq!(two.machine_ids(), vec!["workers-1", "workers-2", "workers-4"]);
    assert_eq!(machine_id("workers", 7), "workers-7");
}

#[test]
fn normalize_sorts_the_removed_machines_and_keeps_those_past_the_highest_index() {
    let mut group = normalized(workers(2, &["workers-10", "workers-1", "workers-9", "workers-0"])).unwrap();
    // Indexes 0 and 1 are removed: the machines are 2 and 3; 9 and 10 stay
    // removed, so that growing the group never brings them back early.
    assert_eq!(group.removed_machines, vec!["workers-0", "workers-1", "workers-9", "workers-10"]);
    assert_eq!(group.machine_ids(), vec!["workers-2", "workers-3"]);
    group.count = 9;
    assert_eq!(group.indexes(), [2, 3, 4, 5, 6, 7, 8, 11, 12]);
    let untouched = normalized(workers(3, &["workers-1"])).unwrap();
    assert_eq!(untouched.removed_machines, vec!["workers-1"]);
    assert_eq!(untouched.machine_ids(), vec!["workers-0", "workers-2", "workers-3"]);
}

#[test]
fn removed_machines_must_be_this_groups_ids_once() {
    for (bad, position) in [
        (vec!["workers-1", "others-1"], 1),
        (vec!["workers-01"], 0),
        (vec!["workers-"], 0),
        (vec!["workers-+1"], 0),
        (vec!["workers-4294967296"], 0),
        (vec!["workers1"], 0),
        (vec!["workers-1-2"], 0),
    ] {
        let err = normalized(workers(2, &bad)).expect_err(&format!("{bad:?}"));
        assert_eq!(err.field, format!("spec.nodeGroups[0].removedMachines[{position}]"), "{bad:?}");
        assert!(err.message.contains("\"workers-\""), "{}", err.message);
    }
    let err = normalized(workers(2, &["workers-1", "workers-1"])).unwrap_err();
    assert_eq!(err.field, "spec.nodeGroups[0].removedMachines");
    assert!(err.message.contains("twice"), "{}", err.message);
    let many: Vec<String> = (0..=MAX_REMOVED_MACHINES).map(|i| machine_id("workers", i as u32)).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let err = normalized(workers(2, &many)).unwrap_err();
    assert_eq!(err.field, "spec.nodeGroups[0].removedMachines");
    assert!(err.message.contains("over the limit of 1000"), "{}", err.message);
    let err = normalized(workers(u32::MAX, &["workers-0", "workers-1"])).unwrap_err();
    assert_eq!(err.field, "spec.nodeGroups[0].count");
}

#[test]
fn autoscaling_keeps_count_within_its_range() {
    let with = |min: u32, max: u32, count: u32| {
        let mut group = workers(count, &[]);
        group.autoscaling = Some(Autoscaling { min_count: min, max_count: max, ..Autoscaling::default() });
        normalized(group)
    };
    with(1, 4, 2).expect("in range");
    with(2, 2, 2).expect("at both ends");
    assert_eq!(with(0, 4, 2).unwrap_err().field, "spec.nodeGroups[0].autoscaling.minCount");
    assert_eq!(with(3, 4, 2).unwrap_err().field, "spec.nodeGroups[0].autoscaling.minCount");
    assert_eq!(with(1, 1, 2).unwrap_err().field, "spec.nodeGroups[0].autoscaling.maxCount");
    let mut control_plane = workers(1, &[]);
    control_plane.role = Role::ControlPlane;
    control_plane.autoscaling = Some(Autoscaling { min_count: 1, max_count: 3, ..Autoscaling::default() });
    let err = normalized(control_plane).unwrap_err();
    assert_eq!(err.field, "spec.nodeGroups[0].autoscaling");
    assert!(err.message.contains("control-plane groups are never autoscaled"), "{}", err.message);
    let unknown = serde_json::from_value::<NodeGroupSpec>(json!({"role": "worker", "count": 1,
        "providerClass": "metal:bare", "autoscaling": {"minCount": 1, "maxCount": 2, "step": 1}}));
    assert!(unknown.is_err(), "unknown autoscaling fields are refused");
}

#[test]
fn a_metal_group_needs_a_host_for_its_highest_index_and_its_max_count() {
    normalized(metal(2, 3, &["workers-1"], None)).expect("workers-2 takes hosts[2]");
    let err = normalized(metal(2, 2, &["workers-1"], None)).unwrap_err();
    assert_eq!(err.field, "spec.nodeGroups[0].providerConfig.hosts");
    assert!(err.message.contains("lists 2 hosts but its machines need 3"), "{}", err.message);
    normalized(metal(2, 3, &[], Some(json!({"minCount": 1, "maxCount": 3})))).expect("max at the hosts");
    let err = normalized(metal(2, 3, &[], Some(json!({"minCount": 1, "maxCount": 4})))).unwrap_err();
    assert_eq!(err.field, "spec.nodeGroups[0].autoscaling.maxCount");
}

#[test]
fn the_new_fields_round_trip_in_camel_case_and_are_left_out_when_unset() {
    let group = normalized(metal(2, 3, &["workers-1"], Some(json!({"minCount": 1, "maxCount": 3})))).unwrap();
    let value = serde_json::to_value(&group).unwrap();
    assert_eq!(value["autoscaling"], json!({"minCount": 1, "maxCount": 3}));
    assert_eq!(value["removedMachines"], json!(["workers-1"]));
    let plain = serde_json::to_value(normalized(workers(1, &[])).unwrap()).unwrap();
    assert!(plain.get("autoscaling").is_none() && plain.get("removedMachines").is_none(), "{plain}");
}

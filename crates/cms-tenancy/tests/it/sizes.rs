//! The caps on sizes: a node group's `count` (and metal hosts) checked by
//! `Tenancy`, a tenant's machines by the store inside the write; both are
//! field errors, as the API's 422.

use cms_model::{Kind, NodeGroup, Tenant};
use cms_store::{Key, StoreOptions};

use super::{field_error, parse, tenancy, tenancy_with, tenant};

fn group(name: &str, count: u32) -> NodeGroup {
    metal_group(name, count, count, None)
}

/// A metal node group of `count` machines over `hosts` hosts, at
/// `version` when it replaces a stored one.
fn metal_group(name: &str, count: u32, hosts: u32, version: Option<u64>) -> NodeGroup {
    let mut group: NodeGroup =
        parse(&format!(r#"{{"metadata":{{"name":"{name}"}},"spec":{}}}"#, metal_spec(None, count, hosts, 0)));
    group.metadata.resource_version = version;
    group
}

/// The spec of a metal group, named when inline, over hosts 10.0.`net`.x.
fn metal_spec(name: Option<&str>, count: u32, hosts: u32, net: u32) -> String {
    let hosts: Vec<String> = (0..hosts).map(|i| format!(r#"{{"address":"10.0.{net}.{}"}}"#, i + 1)).collect();
    let name = name.map(|name| format!(r#""name":"{name}","#)).unwrap_or_default();
    format!(
        r#"{{{name}"role":"worker","count":{count},"providerClass":"metal:bare","providerConfig":{{"hosts":[{}]}}}}"#,
        hosts.join(",")
    )
}

#[tokio::test]
async fn counts_over_the_caps_are_field_errors() {
    let (tenancy, _dir) =
        tenancy_with(|options| StoreOptions { max_machines_per_tenant: 5, ..options }).await;
    let tenancy = tenancy.with_max_group_count(3);
    tenancy.create_tenant(tenant("1.9.6", "")).await.expect("a tenant with no groups");

    let (field, message) = field_error(tenancy.create_child("acme", group("big", 4)).await);
    assert_eq!(field, "spec.count");
    assert!(message.contains("over the limit of 3 machines per node group"), "{message}");
    tenancy.create_child("acme", group("a", 3)).await.expect("at the group cap");
    let (field, message) = field_error(tenancy.create_child("acme", group("b", 3)).await);
    assert_eq!(field, "spec.count", "3 + 3 machines are over the tenant's 5");
    assert!(message.contains("would have 6 machines"), "{message}");
    assert!(tenancy.store().get(&Key::child(cms_model::Kind::NodeGroup, "acme", "b")).is_none());
    tenancy.create_child("acme", group("b", 2)).await.expect("3 + 2 fit");

    let inline = r#","nodeGroups":[{"name":"w","role":"worker","count":4,"providerClass":"oci:VM.Standard.A1.Flex",
        "providerConfig":{"region":"r","compartmentOcid":"c","subnetId":"s","imageId":"i","ocpus":2,"memoryGb":8}}]"#;
    let mut other = tenant("1.9.6", inline);
    other.metadata.name = "other".into();
    let (field, _) = field_error(tenancy.create_tenant(other).await);
    assert_eq!(field, "spec.nodeGroups[0].count");
}

#[tokio::test]
async fn a_group_over_a_lowered_cap_may_be_rewritten_or_shrunk_but_not_grown() {
    let (tenancy, _dir) = tenancy().await;
    let before = tenancy.clone().with_max_group_count(5);
    let inline = format!(r#","nodeGroups":[{}]"#, metal_spec(Some("w"), 5, 5, 1));
    before.create_tenant(tenant("1.9.6", &inline)).await.expect("at the cap of 5");
    before.create_child("acme", group("big", 5)).await.expect("at the cap of 5");
    // The cap is lowered under both groups.
    let tenancy = tenancy.with_max_group_count(3);
    let key = Key::child(Kind::NodeGroup, "acme", "big");
    let version = || tenancy.find(&key).expect("stored").resource_version;

    // A node group: rewritten as stored, with an annotation (what the
    // console's rollout resume writes), then shrunk; growing is refused.
    let mut same: NodeGroup = tenancy.find(&key).unwrap().parse().expect("parses");
    same.metadata.annotations.insert("team".into(), "storage".into());
    tenancy.update_child("acme", same).await.expect("unchanged sizes pass the lowered cap");
    tenancy.update_child("acme", metal_group("big", 4, 5, Some(version()))).await.expect("shrunk");
    let (field, message) =
        field_error(tenancy.update_child("acme", metal_group("big", 5, 5, Some(version()))).await);
    assert_eq!(field, "spec.count", "4 to 5 grows past the cap of 3");
    assert!(message.contains("over the limit of 3 machines per node group"), "{message}");
    assert!(message.contains("may stay at 4 or shrink"), "{message}");
    let (field, _) =
        field_error(tenancy.update_child("acme", metal_group("big", 4, 6, Some(version()))).await);
    assert_eq!(field, "spec.providerConfig.hosts", "5 hosts to 6 grows past the cap");
    tenancy.update_child("acme", metal_group("big", 3, 3, Some(version()))).await.expect("under the cap");
    let (field, _) =
        field_error(tenancy.update_child("acme", metal_group("big", 4, 4, Some(version()))).await);
    assert_eq!(field, "spec.count", "a group at the cap cannot pass it again");

    // A tenant's inline group, compared with the stored group of its name.
    let stored = || tenancy.tenant("acme").expect("stored");
    let mut same: Tenant = stored();
    same.metadata.annotations.insert("team".into(), "storage".into());
    tenancy.update_tenant(same).await.expect("unchanged inline groups pass the lowered cap");
    let inline_tenant = |spec: String| {
        let mut replacement = tenant("1.9.6", &format!(r#","nodeGroups":[{spec}]"#));
        replacement.metadata.resource_version = stored().metadata.resource_version;
        replacement
    };
    let (field, _) = field_error(tenancy.update_tenant(inline_tenant(metal_spec(Some("w"), 6, 6, 1))).await);
    assert_eq!(field, "spec.nodeGroups[0].count");
    let (field, _) = field_error(tenancy.update_tenant(inline_tenant(metal_spec(Some("x"), 5, 5, 1))).await);
    assert_eq!(field, "spec.nodeGroups[0].count", "another name is a new group, held to the cap");
    tenancy.update_tenant(inline_tenant(metal_spec(Some("w"), 4, 5, 1))).await.expect("shrunk");
}

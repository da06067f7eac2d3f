//! The caps on sizes: a node group's `count` (and metal hosts) checked by
//! `Tenancy`, a tenant's machines by the store inside the write; both are
//! field errors, as the API's 422.

use cms_model::NodeGroup;
use cms_store::{Key, StoreOptions};

use super::{field_error, parse, tenancy_with, tenant};

fn group(name: &str, count: u32) -> NodeGroup {
    let hosts: Vec<String> = (0..count).map(|i| format!(r#"{{"address":"10.0.0.{}"}}"#, i + 1)).collect();
    parse(&format!(
        r#"{{"metadata":{{"name":"{name}"}},"spec":{{"role":"worker","count":{count},"providerClass":"metal:bare",
            "providerConfig":{{"hosts":[{}]}}}}}}"#,
        hosts.join(",")
    ))
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
        "providerConfig":{"region":"r","compartmentOcid":"c","subnetId":"s","ocpus":2,"memoryGb":8}}]"#;
    let mut other = tenant("1.9.6", inline);
    other.metadata.name = "other".into();
    let (field, _) = field_error(tenancy.create_tenant(other).await);
    assert_eq!(field, "spec.nodeGroups[0].count");
}

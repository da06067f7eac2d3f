//! The rules of each provider's `providerConfig`, through a node group's
//! checks, so the field paths are the ones a request sees.

use serde_json::{Value, json};

use super::*;
use crate::{NodeGroupSpec, TenantSpec, Validate, parse_json};

const FLEX: &str = "oci:VM.Standard.A1.Flex";
const FIXED: &str = "oci:VM.Standard2.1";

/// A valid `oci` config for a flexible shape.
fn oci() -> Value {
    json!({"region": "eu-frankfurt-1", "compartmentOcid": "ocid1.compartment.oc1..c",
           "subnetId": "ocid1.subnet.oc1.eu-frankfurt-1.s", "imageId": "ocid1.image.oc1..i",
           "ocpus": 2, "memoryGb": 8})
}

/// A valid `openstack` config.
fn openstack() -> Value {
    json!({"imageId": "0b5d4d3e-6f5b-4c1e-9a0e-2f7c3d1b9e42", "networkId": "net-1",
           "securityGroups": ["talos", "allow ssh"]})
}

/// Checks a node-group resource's spec of `class` with `config`.
fn check(class: &str, config: &Value) -> Result<NodeGroupSpec, FieldError> {
    let body = json!({"role": "worker", "count": 1, "providerClass": class, "providerConfig": config});
    let mut spec: NodeGroupSpec = serde_json::from_value(body).map_err(|err| FieldError::new("body", err))?;
    spec.normalize("spec").map(|_| spec)
}

/// The field and message of the refusal of `config`.
fn refused(class: &str, config: &Value) -> FieldError {
    check(class, config).expect_err("refused")
}

/// `oci()` with `key` set to `value`, or removed when `value` is null.
fn oci_with(key: &str, value: Value) -> Value {
    with(oci(), key, value)
}

fn with(mut config: Value, key: &str, value: Value) -> Value {
    match value {
        Value::Null => config.as_object_mut().unwrap().remove(key),
        value => config.as_object_mut().unwrap().insert(key.to_string(), value),
    };
    config
}

#[test]
fn oci_groups_are_checked() {
    check(FLEX, &oci()).expect("valid");
    assert_eq!(refused(FLEX, &oci_with("ocpus", json!(0))).field, "spec.providerConfig.ocpus");
    assert_eq!(refused(FLEX, &oci_with("memoryGb", json!(-1.5))).field, "spec.providerConfig.memoryGb");
    let err = refused(FLEX, &json!({"region": "r"}));
    assert_eq!(err.field, "spec.providerConfig");
    assert!(err.message.contains("compartmentOcid"), "{err}");
    let err = refused(FLEX, &oci_with("regoin", json!("r")));
    assert!(err.message.contains("regoin"), "{err}");
}

#[test]
fn an_oci_image_is_required_and_the_message_says_where_one_comes_from() {
    for config in
        [oci_with("imageId", Value::Null), oci_with("imageId", json!("")), oci_with("imageId", json!(" "))]
    {
        let err = refused(FLEX, &config);
        assert_eq!(err.field, "spec.providerConfig.imageId", "{config}");
        assert!(err.message.contains("Talos publishes no OCI image"), "{err}");
        assert!(err.message.contains("oracle-amd64") && err.message.contains("OCID"), "{err}");
    }
    let group = json!({"name": "w", "role": "worker", "count": 1, "providerClass": FLEX,
                       "providerConfig": oci_with("imageId", Value::Null)});
    let body = json!({"kubernetesVersion": "1.31.0", "nodeGroups": [group]});
    let mut spec: TenantSpec = parse_json(body.to_string().as_bytes()).expect("parses");
    let err = spec.normalize("spec").expect_err("no image");
    assert_eq!(err.field, "spec.nodeGroups[0].providerConfig.imageId");
}

#[test]
fn flexible_shapes_need_ocpus_and_memory_and_fixed_shapes_refuse_them() {
    assert!(is_flex_shape("VM.Standard.E4.Flex") && is_flex_shape("VM.Standard.A1.Flex"));
    assert!(!is_flex_shape("VM.Standard2.1") && !is_flex_shape("BM.Standard3.64") && !is_flex_shape("Flex"));

    for key in ["ocpus", "memoryGb"] {
        let err = refused(FLEX, &oci_with(key, Value::Null));
        assert_eq!(err.field, format!("spec.providerConfig.{key}"));
        assert!(err.message.contains("is required") && err.message.contains("VM.Standard.A1.Flex"), "{err}");
    }
    let err = refused(FIXED, &oci());
    assert_eq!(err.field, "spec.providerConfig.ocpus");
    assert!(err.message.contains("fixed shape VM.Standard2.1 takes no ocpus"), "{err}");
    let err = refused(FIXED, &oci_with("ocpus", Value::Null));
    assert_eq!(err.field, "spec.providerConfig.memoryGb");
    assert!(err.message.contains("takes no memoryGb"), "{err}");
    let fixed = with(oci_with("ocpus", Value::Null), "memoryGb", Value::Null);
    check(FIXED, &fixed).expect("a fixed shape without a shape config");

    let flex: OciConfig = serde_json::from_value(oci()).unwrap();
    assert_eq!(flex.flex("VM.Standard.A1.Flex"), Some((2.0, 8.0)));
    let fixed: OciConfig = serde_json::from_value(fixed).unwrap();
    assert_eq!(fixed.flex("VM.Standard2.1"), None);
}

#[test]
fn oci_regions_are_region_identifiers() {
    for good in ["eu-frankfurt-1", "us-ashburn-1", "me-dcc-muscat-1", "x", &"a".repeat(63)] {
        check(FLEX, &oci_with("region", json!(good))).unwrap_or_else(|err| panic!("{good}: {err}"));
    }
    for bad in [
        "",
        "EU-FRANKFURT-1",
        "eu_frankfurt_1",
        "-eu",
        "eu-",
        "eu--1",
        "eu frankfurt",
        "eu.1",
        &"a".repeat(64),
    ] {
        let err = refused(FLEX, &oci_with("region", json!(bad)));
        assert_eq!(err.field, "spec.providerConfig.region", "{bad:?}");
    }
    let err = refused(FLEX, &oci_with("region", json!("EU-1")));
    assert!(err.message.contains("eu-frankfurt-1"), "{err}");
}

#[test]
fn availability_domains_are_one_or_a_list() {
    let domains = json!(["Uocm:EU-FRANKFURT-1-AD-1", "Uocm:EU-FRANKFURT-1-AD-2"]);
    let listed = check(FLEX, &oci_with("availabilityDomains", domains.clone())).expect("a list");
    let config: OciConfig = serde_json::from_value(Value::Object(listed.provider_config)).unwrap();
    assert_eq!(config.domains(), ["Uocm:EU-FRANKFURT-1-AD-1", "Uocm:EU-FRANKFURT-1-AD-2"]);
    let one = check(FLEX, &oci_with("availabilityDomain", json!("AD-1"))).expect("one");
    let config: OciConfig = serde_json::from_value(Value::Object(one.provider_config)).unwrap();
    assert_eq!(config.domains(), ["AD-1"]);
    let config: OciConfig = serde_json::from_value(oci()).unwrap();
    assert!(config.domains().is_empty());

    let both = with(oci_with("availabilityDomain", json!("AD-1")), "availabilityDomains", domains);
    let err = refused(FLEX, &both);
    assert_eq!(err.field, "spec.providerConfig.availabilityDomains");
    assert!(err.message.contains("not both"), "{err}");
    let field = |list: Value| refused(FLEX, &oci_with("availabilityDomains", list)).field;
    assert_eq!(field(json!([])), "spec.providerConfig.availabilityDomains");
    assert_eq!(field(json!(["AD-1", "AD-1"])), "spec.providerConfig.availabilityDomains[1]");
    assert_eq!(field(json!(["AD-1", "${x}"])), "spec.providerConfig.availabilityDomains[1]");
    assert_eq!(field(json!("AD-1")), "spec.providerConfig.availabilityDomains");
}

#[test]
fn availability_zones_are_one_or_a_list() {
    let listed = check("openstack:m1.large", &with(openstack(), "availabilityZones", json!(["az1", "az2"])))
        .expect("a list");
    let config: OpenStackConfig = serde_json::from_value(Value::Object(listed.provider_config)).unwrap();
    assert_eq!(config.zones(), ["az1", "az2"]);
    let both =
        with(with(openstack(), "availabilityZone", json!("nova")), "availabilityZones", json!(["az1"]));
    let err = refused("openstack:m1.large", &both);
    assert_eq!(err.field, "spec.providerConfig.availabilityZones");
    assert!(err.message.contains("availabilityZone or availabilityZones, not both"), "{err}");
    let field =
        |list: Value| refused("openstack:m1.large", &with(openstack(), "availabilityZones", list)).field;
    assert_eq!(field(json!([])), "spec.providerConfig.availabilityZones");
    assert_eq!(field(json!(["az1", "az1"])), "spec.providerConfig.availabilityZones[1]");
    assert_eq!(field(json!(["a b"])), "spec.providerConfig.availabilityZones[0]");
    let twice = with(openstack(), "securityGroups", json!(["talos", "talos"]));
    assert_eq!(refused("openstack:m1.large", &twice).field, "spec.providerConfig.securityGroups[1]");
}

#[test]
fn network_security_groups_are_ids_and_at_most_four() {
    let ids = |count: usize| {
        json!((1..=count).map(|i| format!("ocid1.networksecuritygroup.oc1..n{i}")).collect::<Vec<_>>())
    };
    let config = check(FLEX, &oci_with("networkSecurityGroupIds", ids(4))).expect("four");
    let config: OciConfig = serde_json::from_value(Value::Object(config.provider_config)).unwrap();
    assert_eq!(config.network_security_group_ids.len(), 4);
    let err = refused(FLEX, &oci_with("networkSecurityGroupIds", ids(5)));
    assert_eq!(err.field, "spec.providerConfig.networkSecurityGroupIds");
    assert!(err.message.contains("lists 5 groups"), "{err}");
    let field = |list: Value| refused(FLEX, &oci_with("networkSecurityGroupIds", list)).field;
    assert_eq!(field(json!(["a", "a"])), "spec.providerConfig.networkSecurityGroupIds[1]");
    assert_eq!(field(json!(["a", "%{x}"])), "spec.providerConfig.networkSecurityGroupIds[1]");
    assert_eq!(field(json!([""])), "spec.providerConfig.networkSecurityGroupIds[0]");
}

#[test]
fn metal_hosts_are_checked() {
    let config = |hosts: Value| json!({"hosts": hosts});
    let ok = check("metal:bare", &config(json!([{"address": "10.0.0.1", "providerId": "rack1-a"}]))).unwrap();
    assert_eq!(ok.metal_hosts()[0].address, "10.0.0.1");
    let body = json!({"role": "worker", "count": 2, "providerClass": "metal:bare",
                      "providerConfig": config(json!([{"address": "10.0.0.1"}]))});
    let mut short: NodeGroupSpec = serde_json::from_value(body).unwrap();
    assert_eq!(short.normalize("spec").unwrap_err().field, "spec.providerConfig.hosts");
    let bad = refused("metal:bare", &config(json!([{"address": "nope"}])));
    assert_eq!(bad.field, "spec.providerConfig.hosts[0].address");
}

#[test]
fn template_characters_are_refused_in_every_string_the_tool_reads() {
    let oci = with(oci(), "availabilityDomain", json!("Uocm:EU-FRANKFURT-1-AD-1"));
    let openstack = with(openstack(), "availabilityZone", json!("nova"));
    let metal = json!({"hosts": [{"address": "10.0.0.1", "providerId": "rack1-a"}]});
    check(FLEX, &oci).expect("valid");
    check("openstack:m1.large", &openstack).expect("valid");
    check("metal:bare", &metal).expect("valid");
    let attack = json!(r#"${file("../../secrets.key")}"#);
    let host = |key: &str| json!({"hosts": [with(metal["hosts"][0].clone(), key, attack.clone())]});
    let cases = [
        (format!("metal:{}", attack.as_str().unwrap()), metal.clone(), "spec.providerClass"),
        ("metal:bare".into(), host("providerId"), "spec.providerConfig.hosts[0].providerId"),
        ("metal:bare".into(), host("address"), "spec.providerConfig.hosts[0].address"),
        (
            FLEX.into(),
            with(oci.clone(), "region", json!("%{ if true }x%{ endif }")),
            "spec.providerConfig.region",
        ),
        (
            FLEX.into(),
            with(oci.clone(), "compartmentOcid", attack.clone()),
            "spec.providerConfig.compartmentOcid",
        ),
        (FLEX.into(), with(oci.clone(), "subnetId", json!("a\nb")), "spec.providerConfig.subnetId"),
        (FLEX.into(), with(oci.clone(), "imageId", json!("a\\b")), "spec.providerConfig.imageId"),
        (
            FLEX.into(),
            with(oci.clone(), "availabilityDomain", json!("a'b")),
            "spec.providerConfig.availabilityDomain",
        ),
        (
            "openstack:x".into(),
            with(openstack.clone(), "imageId", attack.clone()),
            "spec.providerConfig.imageId",
        ),
        (
            "openstack:x".into(),
            with(openstack.clone(), "networkId", json!("{x}")),
            "spec.providerConfig.networkId",
        ),
        (
            "openstack:x".into(),
            with(openstack.clone(), "availabilityZone", json!("z".repeat(256))),
            "spec.providerConfig.availabilityZone",
        ),
        (
            "openstack:x".into(),
            with(openstack.clone(), "securityGroups", json!(["talos", "a$b"])),
            "spec.providerConfig.securityGroups[1]",
        ),
    ];
    for (class, config, field) in cases {
        let err = refused(&class, &config);
        assert_eq!(err.field, field, "{class} {config}: {err}");
    }
}

#[test]
fn each_cloud_has_its_user_data_limit() {
    assert_eq!(Provider::Oci.user_data_limit(), Some(32_000));
    assert_eq!(Provider::OpenStack.user_data_limit(), Some(65_535));
    assert_eq!(Provider::Metal.user_data_limit(), None);
}

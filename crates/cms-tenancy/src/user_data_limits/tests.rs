//! The size math, the patch named, and the field of each kind of write,
//! on configs rendered from a real bundle.

use std::sync::OnceLock;

use cms_model::{OCI_USER_DATA_LIMIT, OPENSTACK_USER_DATA_LIMIT, parse_json};
use serde_json::{Value, json};

use super::*;

/// One bundle for every test: its service-account key takes a while.
fn bundle() -> &'static SecretsBundle {
    static BUNDLE: OnceLock<SecretsBundle> = OnceLock::new();
    BUNDLE.get_or_init(|| SecretsBundle::generate("1.14.0").expect("a bundle"))
}

const OCI: &str = "oci:VM.Standard.A1.Flex";
const OPENSTACK: &str = "openstack:m1.large";

fn provider_config(class: &str) -> Value {
    match class.split(':').next() {
        Some("oci") => json!({"region": "eu-frankfurt-1", "compartmentOcid": "c", "subnetId": "s",
                              "imageId": "ocid1.image.oc1..i", "ocpus": 2, "memoryGb": 8}),
        Some("openstack") => json!({"imageId": "img", "networkId": "net"}),
        _ => json!({"hosts": [{"address": "10.0.0.1"}, {"address": "10.0.0.2"}]}),
    }
}

/// A node group of `class` named `name` with refs to `patches`.
fn group(name: &str, role: &str, class: &str, patches: &[&str]) -> Value {
    let refs: Vec<Value> = patches.iter().map(|name| json!({"name": name})).collect();
    json!({"name": name, "role": role, "count": 1, "providerClass": class,
           "providerConfig": provider_config(class), "configPatches": refs})
}

/// A tenant `acme` with `groups`, tenant-wide refs to `patches`, and more of
/// its spec from `extra`.
fn tenant(groups: Vec<Value>, patches: &[&str], extra: Value) -> Tenant {
    let refs: Vec<Value> = patches.iter().map(|name| json!({"name": name})).collect();
    let mut spec = json!({"kubernetesVersion": "1.31.0", "nodeGroups": groups, "configPatches": refs});
    spec.as_object_mut().unwrap().extend(extra.as_object().cloned().unwrap_or_default());
    let mut tenant: Tenant =
        parse_json(json!({"metadata": {"name": "acme"}, "spec": spec}).to_string().as_bytes())
            .expect("parses");
    tenant.prepare().expect("valid");
    tenant
}

/// A config patch `name` that writes a file of `bytes` bytes.
fn file_patch(name: &str, bytes: usize) -> ConfigPatch {
    let file = json!({"content": "x".repeat(bytes), "path": format!("/var/{name}"), "op": "create", "permissions": 420});
    let body = json!({"metadata": {"name": name}, "spec": {"format": "strategic", "patches": [{"machine": {"files": [file]}}]}});
    parse_json(body.to_string().as_bytes()).expect("parses")
}

fn sources(tenant: Tenant, patches: &[&ConfigPatch]) -> Sources {
    let patches = patches.iter().map(|patch| (patch.metadata.name.clone(), patch.spec.clone())).collect();
    Sources { tenant, patches }
}

/// The user-data size of the config of group `name` in `sources`.
fn size(sources: &Sources, name: &str) -> usize {
    sources.size_of(bundle(), name).expect("renders")
}

#[test]
fn sizes_are_the_lengths_of_the_base64() {
    let cases =
        [(0, 0), (1, 4), (2, 4), (3, 4), (4, 8), (24_000, 32_000), (24_001, 32_004), (49_151, 65_536)];
    for (len, encoded) in cases {
        assert_eq!(user_data_size(len), encoded, "{len}");
    }
    assert!(user_data_size(49_149) <= OPENSTACK_USER_DATA_LIMIT);
}

#[test]
fn the_first_patch_after_which_the_config_is_over_is_found() {
    let sizes = [100, 200, 300, 400];
    let of = |applied: usize| Some(sizes[applied]);
    assert_eq!(first_over(3, 250, of), Some(2));
    assert_eq!(first_over(3, 50, of), Some(0), "over with no patch");
    assert_eq!(first_over(3, 400, of), None, "at the limit is within it");
    // A patch that shrinks the config does not hide the one before it.
    let shrinking = [100, 300, 200, 260];
    assert_eq!(first_over(3, 250, |applied| Some(shrinking[applied])), Some(1));
    // A prefix that does not render is skipped.
    let broken = [Some(100), None, Some(300)];
    assert_eq!(first_over(2, 250, |applied| broken[applied]), Some(2));
}

#[test]
fn a_base_config_fits_every_cloud() {
    let plain = sources(
        tenant(vec![group("cp", "controlplane", OCI, &[]), group("w", "worker", OCI, &[])], &[], json!({})),
        &[],
    );
    let (control_plane, worker) = (size(&plain, "cp"), size(&plain, "w"));
    assert!(worker < control_plane, "workers carry no CA keys: {worker} against {control_plane}");
    assert!(control_plane < OCI_USER_DATA_LIMIT / 2, "{control_plane}");
    check(bundle(), None, &plain, ConfigChange::Tenant(&plain.tenant)).expect("fits");
}

#[test]
fn the_stand_in_endpoint_is_as_long_as_a_made_one() {
    let with = |endpoint: &str| {
        let tenant = tenant(
            vec![group("cp", "controlplane", OCI, &[])],
            &[],
            json!({"controlPlaneEndpoint": endpoint}),
        );
        size(&sources(tenant, &[]), "cp")
    };
    let unset =
        size(&sources(tenant(vec![group("cp", "controlplane", OCI, &[])], &[], json!({})), &[]), "cp");
    assert_eq!(unset, with(STAND_IN_ENDPOINT));
    assert!(unset >= with("https://10.0.0.1:6443"), "the stand-in bounds an IPv4 endpoint");
}

#[test]
fn a_patch_that_takes_a_cloud_group_over_is_named_and_metal_has_no_limit() {
    let small = file_patch("small", 100);
    let big = file_patch("big", 40_000);
    let groups = vec![
        group("cp", "controlplane", OCI, &[]),
        group("metal", "worker", "metal:bare", &["big"]),
        group("w", "worker", OCI, &["big"]),
    ];
    let after = sources(tenant(groups, &["small"], json!({})), &[&small, &big]);
    let err = check(bundle(), None, &after, ConfigChange::ConfigPatch(&big)).expect_err("over");
    assert_eq!(err.field, "spec.patches");
    let limit = OCI_USER_DATA_LIMIT.to_string();
    for says in ["node group \"w\"", "config patch \"big\"", &size(&after, "w").to_string(), &limit, "oci"] {
        assert!(err.message.contains(says), "{says}: {err}");
    }

    // The same patch on metal groups only, and on none: nothing to check.
    let metal =
        vec![group("cp", "controlplane", "metal:bare", &[]), group("w", "worker", "metal:bare", &["big"])];
    let after = sources(tenant(metal, &["big"], json!({})), &[&big]);
    check(bundle(), None, &after, ConfigChange::ConfigPatch(&big)).expect("metal has no user-data limit");
    check(bundle(), None, &after, ConfigChange::Tenant(&after.tenant)).expect("metal has no user-data limit");
}

#[test]
fn each_cloud_has_its_own_limit() {
    // About 34,000 bytes of base64 more than the base: over OCI's limit, within OpenStack's.
    let patch = file_patch("medium", 25_000);
    let groups =
        vec![group("oci", "worker", OCI, &["medium"]), group("os", "worker", OPENSTACK, &["medium"])];
    let after = sources(tenant(groups, &[], json!({})), &[&patch]);
    assert!(size(&after, "os") <= OPENSTACK_USER_DATA_LIMIT, "{}", size(&after, "os"));
    let err = check(bundle(), None, &after, ConfigChange::ConfigPatch(&patch)).expect_err("over on oci");
    assert!(err.message.contains("node group \"oci\"") && err.message.contains("32000"), "{err}");

    let openstack = vec![group("os", "worker", OPENSTACK, &["big"])];
    let big = file_patch("big", 50_000);
    let after = sources(tenant(openstack, &[], json!({})), &[&big]);
    let err = check(bundle(), None, &after, ConfigChange::ConfigPatch(&big)).expect_err("over on openstack");
    assert!(err.message.contains("65535") && err.message.contains("an openstack instance"), "{err}");
}

#[test]
fn the_field_follows_the_write_and_where_the_patch_is_referred_to() {
    let (small, big) = (file_patch("small", 100), file_patch("big", 40_000));
    let refused = |tenant_refs: &[&str], group_refs: &[&str], change: &dyn Fn(&Sources) -> FieldError| {
        let groups = vec![group("a", "worker", "metal:bare", &[]), group("w", "worker", OCI, group_refs)];
        change(&sources(tenant(groups, tenant_refs, json!({})), &[&small, &big]))
    };
    let as_tenant =
        |after: &Sources| check(bundle(), None, after, ConfigChange::Tenant(&after.tenant)).unwrap_err();
    let as_group = |after: &Sources| {
        let group = &after.groups()[1];
        check(bundle(), None, after, ConfigChange::NodeGroup(group)).unwrap_err()
    };
    let err = refused(&["small", "big"], &[], &as_tenant);
    assert_eq!(err.field, "spec.configPatches[1]");
    assert!(err.message.contains("config patch \"big\""), "{err}");
    assert_eq!(
        refused(&["small"], &["small", "big"], &as_tenant).field,
        "spec.nodeGroups[1].configPatches[1]"
    );
    assert_eq!(refused(&[], &["small", "big"], &as_group).field, "spec.configPatches[1]");
    assert_eq!(refused(&["big"], &["small"], &as_group).field, "spec", "the tenant's patch");
    // A ref to a patch that does not exist is left out.
    assert_eq!(refused(&["gone"], &["gone", "big"], &as_group).field, "spec.configPatches[1]");
}

#[test]
fn a_config_over_the_limit_with_no_patch_says_so() {
    let networks: Vec<String> = (0..2_000).map(|i| format!("10.{}.{}.0/24", i / 256, i % 256)).collect();
    let extra = json!({"podNetwork": networks});
    let after =
        sources(tenant(vec![group("w", "worker", OCI, &["small"])], &[], extra), &[&file_patch("small", 10)]);
    let err = check(bundle(), None, &after, ConfigChange::Tenant(&after.tenant)).expect_err("over");
    assert_eq!(err.field, "spec.nodeGroups[0]");
    assert!(err.message.contains("with no config patch applied"), "{err}");
}

#[test]
fn a_group_stored_over_the_limit_may_stay_or_shrink_but_not_grow() {
    let stored_patch = file_patch("big", 40_000);
    let groups = || vec![group("w", "worker", OCI, &["big"])];
    let before = sources(tenant(groups(), &[], json!({})), &[&stored_patch]);
    let same = file_patch("big", 40_000);
    let after = sources(tenant(groups(), &[], json!({})), &[&same]);
    check(bundle(), Some(&before), &after, ConfigChange::ConfigPatch(&same)).expect("as large as stored");
    let smaller = file_patch("big", 39_000);
    let after = sources(tenant(groups(), &[], json!({})), &[&smaller]);
    check(bundle(), Some(&before), &after, ConfigChange::ConfigPatch(&smaller)).expect("smaller, still over");
    let larger = file_patch("big", 41_000);
    let after = sources(tenant(groups(), &[], json!({})), &[&larger]);
    let err = check(bundle(), Some(&before), &after, ConfigChange::ConfigPatch(&larger)).expect_err("grown");
    assert_eq!(err.field, "spec.patches");
}

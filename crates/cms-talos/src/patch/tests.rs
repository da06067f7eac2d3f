//! Resolution, ordering, filters, checks and properties of config patches.

use cms_model::PatchTarget;
use proptest::prelude::*;
use serde_json::json;

use super::*;

fn spec(format: PatchFormat, target: PatchTarget, enabled: bool, patches: Vec<Value>) -> ConfigPatchSpec {
    ConfigPatchSpec { format, target, enabled, patches }
}

fn strategic(patches: Vec<Value>) -> ConfigPatchSpec {
    spec(PatchFormat::Strategic, PatchTarget::All, true, patches)
}

fn named(name: &str, spec: ConfigPatchSpec) -> ResolvedPatch {
    ResolvedPatch { name: name.into(), spec }
}

fn base() -> Vec<Value> {
    vec![json!({
        "version": "v1alpha1",
        "machine": {"type": "worker", "certSANs": ["a"], "network": {"interfaces": [{"interface": "eth0", "dhcp": true}]}},
        "cluster": {"network": {"podSubnets": ["10.244.0.0/16"]}},
    })]
}

fn refs(names: &[&str]) -> Vec<ConfigPatchRef> {
    names.iter().map(|name| ConfigPatchRef { name: name.to_string() }).collect()
}

#[test]
fn refs_resolve_in_order_and_missing_names_are_reported() {
    let available: BTreeMap<String, ConfigPatchSpec> = ["a", "b", "c"]
        .into_iter()
        .map(|name| (name.to_string(), strategic(vec![json!({"machine": {"certSANs": [name]}})])))
        .collect();
    let resolution = resolve_patches(&refs(&["b", "gone", "a"]), &refs(&["c", "gone", "late"]), &available);
    let names: Vec<&str> = resolution.patches.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["b", "a", "c"]);
    assert_eq!(resolution.missing, ["gone", "late"]);
}

#[test]
fn patches_apply_in_order_with_role_and_enabled_filters() {
    let patches = vec![
        named("first", strategic(vec![json!({"machine": {"certSANs": ["first"]}})])),
        named(
            "disabled",
            spec(
                PatchFormat::Strategic,
                PatchTarget::All,
                false,
                vec![json!({"machine": {"certSANs": ["no"]}})],
            ),
        ),
        named(
            "cp-only",
            spec(
                PatchFormat::Strategic,
                PatchTarget::ControlPlane,
                true,
                vec![json!({"machine": {"certSANs": ["cp"]}})],
            ),
        ),
        named(
            "workers",
            spec(
                PatchFormat::JsonPatch,
                PatchTarget::Worker,
                true,
                vec![json!({"op": "add", "path": "/machine/certSANs/-", "value": "json"})],
            ),
        ),
    ];
    let mut worker = base();
    apply_patches(&mut worker, &patches, Role::Worker).unwrap();
    assert_eq!(worker[0]["machine"]["certSANs"], json!(["a", "first", "json"]));
    let mut control_plane = base();
    apply_patches(&mut control_plane, &patches, Role::ControlPlane).unwrap();
    assert_eq!(control_plane[0]["machine"]["certSANs"], json!(["a", "first", "cp"]));
}

#[test]
fn json_patches_are_refused_on_multi_document_configs() {
    let mut documents = base();
    documents.push(json!({"apiVersion": "v1alpha1", "kind": "KubeNetworkConfig"}));
    let patch = named(
        "jp",
        spec(
            PatchFormat::JsonPatch,
            PatchTarget::All,
            true,
            vec![json!({"op": "remove", "path": "/machine/certSANs"})],
        ),
    );
    let err = apply_patches(&mut documents, &[patch], Role::Worker).unwrap_err();
    assert!(err.to_string().contains("single-document"), "{err}");
    assert!(err.to_string().contains("\"jp\""), "{err}");
}

#[test]
fn failing_json_patches_name_the_patch() {
    let patch = named(
        "broken",
        spec(PatchFormat::JsonPatch, PatchTarget::All, true, vec![json!({"op": "remove", "path": "/nope"})]),
    );
    let err = apply_patches(&mut base(), &[patch], Role::Worker).unwrap_err();
    assert!(matches!(err, TalosError::Patch { ref patch, .. } if patch == "broken"), "{err}");
}

#[test]
fn checks_name_the_broken_field() {
    let check = |spec: ConfigPatchSpec, field: &str| {
        let err = check_patch(&spec).unwrap_err();
        assert_eq!(err.field, field, "{err}");
    };
    check(strategic(vec![]), "spec.patches");
    check(strategic(vec![json!({}), json!([1])]), "spec.patches[1]");
    check(
        strategic(vec![json!({"machine": {"install": {"$patch": "remove"}}})]),
        "spec.patches[0].machine.install.$patch",
    );
    check(
        strategic(vec![json!({"machine": {"files": [{"$patch": "delete"}]}})]),
        "spec.patches[0].machine.files[0]",
    );
    check(strategic(vec![json!({"$patch": "delete"})]), "spec.patches[0].$patch");
    check(strategic(vec![json!({"version": "v1alpha2"})]), "spec.patches[0].version");
    check(strategic(vec![json!({"kind": 3})]), "spec.patches[0].kind");
    check(
        spec(PatchFormat::JsonPatch, PatchTarget::All, true, vec![json!({"op": "frobnicate", "path": "/x"})]),
        "spec.patches[0]",
    );
    check(
        spec(
            PatchFormat::JsonPatch,
            PatchTarget::All,
            true,
            vec![json!({"op": "add", "path": "no-slash", "value": 1})],
        ),
        "spec.patches[0]",
    );
    assert!(
        check_patch(&strategic(vec![
            json!({"apiVersion": "v1alpha1", "kind": "LinkConfig", "name": "eth0", "$patch": "delete"})
        ]))
        .is_ok()
    );
    assert!(
        check_patch(&strategic(vec![
            json!({"machine": {"network": {"interfaces": [{"interface": "eth0", "$patch": "delete"}]}}})
        ]))
        .is_ok()
    );
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-z$]{0,6}".prop_map(Value::from),
        Just(json!("delete")),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        let keys = prop_oneof![
            Just("$patch".to_string()),
            Just("machine".to_string()),
            Just("interfaces".to_string()),
            Just("interface".to_string()),
            Just("podSubnets".to_string()),
            Just("kind".to_string()),
            Just("name".to_string()),
            "[a-z]{1,4}",
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(keys, inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn disabled_patches_change_nothing(element in json_value(), json in any::<bool>()) {
        let format = if json { PatchFormat::JsonPatch } else { PatchFormat::Strategic };
        let patch = named("off", spec(format, PatchTarget::All, false, vec![element]));
        let mut documents = base();
        apply_patches(&mut documents, &[patch], Role::Worker).unwrap();
        prop_assert_eq!(documents, base());
    }

    #[test]
    fn empty_strategic_patches_are_the_identity(documents in prop::collection::vec(json_value(), 1..3)) {
        let mut documents: Vec<Value> = documents.into_iter().filter(Value::is_object).collect();
        documents.insert(0, base().remove(0));
        let before = documents.clone();
        apply_patches(&mut documents, &[named("empty", strategic(vec![json!({})]))], Role::Worker).unwrap();
        prop_assert_eq!(documents, before);
    }

    #[test]
    fn no_patch_input_panics(elements in prop::collection::vec(json_value(), 0..4), json in any::<bool>()) {
        let format = if json { PatchFormat::JsonPatch } else { PatchFormat::Strategic };
        let spec = spec(format, PatchTarget::All, true, elements);
        let _ = check_patch(&spec);
        let mut documents = base();
        let _ = apply_patches(&mut documents, &[named("any", spec)], Role::ControlPlane);
    }
}

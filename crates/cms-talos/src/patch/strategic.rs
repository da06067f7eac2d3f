//! Strategic merge with the Talos rules.
//!
//! - Maps merge recursively; a scalar in the patch replaces the base value; a
//!   `null` in the patch changes nothing.
//! - Lists append, except the fields in [`REPLACED_FIELDS`], which replace.
//! - Lists of keyed items merge item by item: network interfaces by
//!   `interface` or `deviceSelector`, VLANs by `vlanId`, inline manifests and
//!   admission plugins by `name`. An item with a new key is appended.
//! - `$patch: delete` as the value of a map key removes that key's subtree; as
//!   a list item it removes the items matched by the item's other fields.
//! - A patch with `kind` targets the typed document of that kind (and `name`),
//!   and is appended when there is none; a patch without `kind` targets the
//!   `v1alpha1` document. A typed patch with a top-level `$patch: delete`
//!   removes its document.

use serde_json::{Map, Value};

/// Fields whose value a patch replaces as a whole.
pub(crate) const REPLACED_FIELDS: &[&str] = &[
    "podSubnets",
    "serviceSubnets",
    "advertisedSubnets",
    "listenSubnets",
    "validSubnets",
    "nameservers",
    "auditPolicy",
];

/// The key fields of lists whose items merge by identity.
fn item_keys(field: &str) -> &'static [&'static str] {
    match field {
        "interfaces" => &["interface", "deviceSelector"],
        "vlans" => &["vlanId"],
        "inlineManifests" | "admissionControl" => &["name"],
        _ => &[],
    }
}

/// The directive key.
pub(crate) const DIRECTIVE: &str = "$patch";

/// Which document of a config a patch element addresses.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum DocumentKey<'a> {
    V1Alpha1,
    Typed { kind: &'a str, name: Option<&'a str> },
}

pub(crate) fn document_key(document: &Value) -> DocumentKey<'_> {
    match document.get("kind").and_then(Value::as_str) {
        Some(kind) => DocumentKey::Typed { kind, name: document.get("name").and_then(Value::as_str) },
        None => DocumentKey::V1Alpha1,
    }
}

/// Whether a value is a `{"$patch": "delete", ...}` marker.
pub(crate) fn is_delete(value: &Value) -> bool {
    value.get(DIRECTIVE).and_then(Value::as_str) == Some("delete")
}

/// Applies one strategic patch element to a list of documents.
pub(crate) fn apply(documents: &mut Vec<Value>, patch: &Value) -> Result<(), String> {
    if !patch.is_object() {
        return Err("a strategic patch element must be an object".into());
    }
    let key = document_key(patch);
    if is_delete(patch) {
        if key == DocumentKey::V1Alpha1 {
            return Err("the v1alpha1 document cannot be deleted".into());
        }
        documents.retain(|document| document_key(document) != key);
        return Ok(());
    }
    match documents.iter_mut().find(|document| document_key(document) == key) {
        Some(document) => merge(document, patch, ""),
        None if key == DocumentKey::V1Alpha1 => documents.insert(0, clean(patch)),
        None => documents.push(clean(patch)),
    }
    Ok(())
}

/// Merges `patch` into `base`; `field` is the map key that holds `base`.
pub(crate) fn merge(base: &mut Value, patch: &Value, field: &str) {
    match (base, patch) {
        (_, Value::Null) => {}
        (base, patch) if REPLACED_FIELDS.contains(&field) => *base = clean(patch),
        (Value::Object(base), Value::Object(patch)) => merge_map(base, patch),
        (Value::Array(base), Value::Array(patch)) => merge_list(base, patch, field),
        (base, patch) => *base = clean(patch),
    }
}

fn merge_map(base: &mut Map<String, Value>, patch: &Map<String, Value>) {
    for (key, value) in patch {
        if key == DIRECTIVE {
            continue;
        }
        if is_delete(value) {
            base.remove(key);
            continue;
        }
        match base.get_mut(key) {
            Some(existing) => merge(existing, value, key),
            None if value.is_null() => {}
            None => {
                base.insert(key.clone(), clean(value));
            }
        }
    }
}

fn merge_list(base: &mut Vec<Value>, patch: &[Value], field: &str) {
    let keys = item_keys(field);
    for item in patch {
        if is_delete(item) {
            base.retain(|existing| !deletes(item, existing, keys));
            continue;
        }
        match base.iter().position(|existing| same_item(existing, item, keys)) {
            Some(index) => merge(&mut base[index], item, field),
            None => base.push(clean(item)),
        }
    }
}

/// Whether two items of a keyed list are the same item: the first key field
/// that the patch item carries decides.
fn same_item(existing: &Value, item: &Value, keys: &[&str]) -> bool {
    keys.iter().find_map(|key| item.get(*key).map(|value| existing.get(*key) == Some(value))).unwrap_or(false)
}

/// Whether a `$patch: delete` item removes `existing`: by identity in keyed
/// lists, otherwise when every other field of the marker equals the item's.
fn deletes(marker: &Value, existing: &Value, keys: &[&str]) -> bool {
    if keys.iter().any(|key| marker.get(*key).is_some()) {
        return same_item(existing, marker, keys);
    }
    let (Some(marker), Some(existing)) = (marker.as_object(), existing.as_object()) else {
        return false;
    };
    let mut fields = marker.iter().filter(|(key, _)| *key != DIRECTIVE).peekable();
    fields.peek().is_some() && fields.all(|(key, value)| existing.get(key) == Some(value))
}

/// A patch value as it is inserted where the base has nothing: without
/// directives and without the subtrees they delete.
pub(crate) fn clean(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, value)| *key != DIRECTIVE && !is_delete(value) && !value.is_null())
                .map(|(key, value)| (key.clone(), clean(value)))
                .collect(),
        ),
        Value::Array(items) => {
            Value::Array(items.iter().filter(|item| !is_delete(item)).map(clean).collect())
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(base: Value, patch: Value, expected: Value) {
        let mut documents = vec![base];
        apply(&mut documents, &patch).unwrap();
        assert_eq!(documents, vec![expected]);
    }

    #[test]
    fn maps_merge_and_lists_append() {
        check(
            json!({"machine": {"certSANs": ["a"], "kubelet": {"image": "x", "extraArgs": {"v": "1"}}}}),
            json!({"machine": {"certSANs": ["b"], "kubelet": {"extraArgs": {"w": "2"}}, "debug": null}}),
            json!({"machine": {"certSANs": ["a", "b"], "kubelet": {"image": "x", "extraArgs": {"v": "1", "w": "2"}}}}),
        );
    }

    #[test]
    fn subnets_replace() {
        check(
            json!({"cluster": {"network": {"podSubnets": ["10.244.0.0/16"], "serviceSubnets": ["10.96.0.0/12"]}}}),
            json!({"cluster": {"network": {"podSubnets": ["10.32.0.0/12"]}}}),
            json!({"cluster": {"network": {"podSubnets": ["10.32.0.0/12"], "serviceSubnets": ["10.96.0.0/12"]}}}),
        );
    }

    #[test]
    fn interfaces_and_vlans_merge_by_key() {
        let base = json!({"machine": {"network": {"interfaces": [
            {"interface": "eth0", "dhcp": true, "vlans": [{"vlanId": 10, "mtu": 1500}]},
            {"deviceSelector": {"busPath": "0*"}, "mtu": 9000},
        ]}}});
        let patch = json!({"machine": {"network": {"interfaces": [
            {"interface": "eth0", "mtu": 1400, "vlans": [{"vlanId": 10, "mtu": 1400}, {"vlanId": 20}]},
            {"deviceSelector": {"busPath": "0*"}, "dhcp": false},
            {"interface": "eth1", "dhcp": true},
        ]}}});
        check(
            base,
            patch,
            json!({"machine": {"network": {"interfaces": [
                {"interface": "eth0", "dhcp": true, "mtu": 1400, "vlans": [{"vlanId": 10, "mtu": 1400}, {"vlanId": 20}]},
                {"deviceSelector": {"busPath": "0*"}, "mtu": 9000, "dhcp": false},
                {"interface": "eth1", "dhcp": true},
            ]}}}),
        );
    }

    #[test]
    fn deletes_remove_keys_and_items() {
        check(
            json!({"machine": {"install": {"disk": "/dev/sda"}, "network": {"interfaces": [{"interface": "eth0"}, {"interface": "eth1"}]}, "files": [{"path": "/a"}, {"path": "/b"}]}}),
            json!({"machine": {"install": {"$patch": "delete"}, "network": {"interfaces": [{"interface": "eth0", "$patch": "delete"}]}, "files": [{"path": "/b", "$patch": "delete"}]}}),
            json!({"machine": {"network": {"interfaces": [{"interface": "eth1"}]}, "files": [{"path": "/a"}]}}),
        );
    }

    #[test]
    fn typed_documents_merge_append_and_delete() {
        let mut documents = vec![
            json!({"version": "v1alpha1"}),
            json!({"apiVersion": "v1alpha1", "kind": "KubeNetworkConfig", "podSubnets": ["a"]}),
        ];
        apply(
            &mut documents,
            &json!({"apiVersion": "v1alpha1", "kind": "KubeNetworkConfig", "podSubnets": ["b"]}),
        )
        .unwrap();
        assert_eq!(documents[1]["podSubnets"], json!(["b"]));
        apply(
            &mut documents,
            &json!({"apiVersion": "v1alpha1", "kind": "LinkConfig", "name": "eth0", "mtu": 9000}),
        )
        .unwrap();
        apply(
            &mut documents,
            &json!({"apiVersion": "v1alpha1", "kind": "LinkConfig", "name": "eth1", "mtu": 1500}),
        )
        .unwrap();
        assert_eq!(documents.len(), 4);
        apply(
            &mut documents,
            &json!({"apiVersion": "v1alpha1", "kind": "LinkConfig", "name": "eth0", "$patch": "delete"}),
        )
        .unwrap();
        assert_eq!(documents.len(), 3);
        assert_eq!(documents[2]["name"], "eth1");
        assert!(apply(&mut documents, &json!({"$patch": "delete"})).is_err());
    }

    #[test]
    fn new_subtrees_lose_their_directives() {
        check(
            json!({}),
            json!({"machine": {"a": {"$patch": "delete"}, "b": [{"$patch": "delete", "x": 1}, {"y": 2}]}}),
            json!({"machine": {"b": [{"y": 2}]}}),
        );
    }
}

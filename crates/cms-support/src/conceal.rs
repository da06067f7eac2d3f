//! [`conceal`]: a stored resource with every value a user may put a secret
//! in replaced by [`REDACTED`], its shape kept. A config patch is a piece
//! of machine config (registry passwords, WireGuard private keys, OIDC
//! client secrets, bearer tokens), and a node group's `providerConfig`
//! holds the provider's settings (user data, credentials): of these only
//! the keys, numbers, booleans and nulls stay, and of an RFC 6902 operation
//! its `op`, `path` and `from`. Metadata, format, target and status stay as
//! they are.

use cms_model::Kind;
use serde_json::Value;

use crate::redact::REDACTED;

/// `value`, a stored resource of `kind`, with its user-written values
/// replaced.
pub(crate) fn conceal(kind: Kind, value: &mut Value) {
    let Some(spec) = value.get_mut("spec") else { return };
    match kind {
        Kind::ConfigPatch => patches(spec),
        Kind::NodeGroup => {
            if let Some(config) = spec.get_mut("providerConfig") {
                scalars(config);
            }
        }
        Kind::Tenant => {
            for group in spec.get_mut("nodeGroups").and_then(Value::as_array_mut).into_iter().flatten() {
                if let Some(config) = group.get_mut("providerConfig") {
                    scalars(config);
                }
            }
        }
        _ => {}
    }
}

/// A config patch's `patches`: whole documents for `strategic`, the
/// `value` of each operation for `jsonpatch`. An unknown format is
/// concealed whole.
fn patches(spec: &mut Value) {
    let json_patch = spec.get("format").and_then(Value::as_str) == Some("jsonpatch");
    let Some(patches) = spec.get_mut("patches") else { return };
    match (json_patch, patches.as_array_mut()) {
        (true, Some(operations)) => {
            for operation in operations {
                match operation.as_object_mut() {
                    Some(fields) => {
                        for (name, field) in fields.iter_mut() {
                            let kept = matches!(name.as_str(), "op" | "path" | "from") && field.is_string();
                            if !kept {
                                scalars(field);
                            }
                        }
                    }
                    None => scalars(operation),
                }
            }
        }
        _ => scalars(patches),
    }
}

/// Every string under `value` replaced; keys, numbers, booleans and nulls
/// kept.
fn scalars(value: &mut Value) {
    match value {
        Value::String(text) => *text = REDACTED.to_string(),
        Value::Array(items) => items.iter_mut().for_each(scalars),
        Value::Object(fields) => fields.values_mut().for_each(scalars),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn strategic_patches_keep_their_shape_and_lose_their_strings() {
        let mut patch = json!({
            "metadata": {"name": "registry", "labels": {"team": "a"}},
            "spec": {"format": "strategic", "target": "worker", "enabled": true, "patches": [
                {"machine": {"registries": {"config": {"registry.example.com": {"auth": {
                    "username": "robot", "password": "hunter2-registry-password"}}}},
                    "sysctls": {"vm.swappiness": "10"}, "network": {"mtu": 1400, "dhcp": false}}},
                {"cluster": {"apiServer": {"extraArgs": {"oidc-client-secret": "oidc-s3cret"}}}}
            ]},
            "status": {}
        });
        conceal(Kind::ConfigPatch, &mut patch);
        assert_eq!(
            patch,
            json!({
                "metadata": {"name": "registry", "labels": {"team": "a"}},
                "spec": {"format": "strategic", "target": "worker", "enabled": true, "patches": [
                    {"machine": {"registries": {"config": {"registry.example.com": {"auth": {
                        "username": REDACTED, "password": REDACTED}}}},
                        "sysctls": {"vm.swappiness": REDACTED}, "network": {"mtu": 1400, "dhcp": false}}},
                    {"cluster": {"apiServer": {"extraArgs": {"oidc-client-secret": REDACTED}}}}
                ]},
                "status": {}
            })
        );
    }

    #[test]
    fn json_patches_keep_their_operations_and_paths() {
        let mut patch = json!({"metadata": {"name": "wg"}, "spec": {"format": "jsonpatch", "patches": [
            {"op": "add", "path": "/machine/network/interfaces/0/wireguard",
                "value": {"privateKey": "wg-private-key-AAAA", "listenPort": 51820}},
            {"op": "replace", "path": "/machine/token", "value": "bearer-token-xyz"},
            {"op": "copy", "from": "/a", "path": "/b"}
        ]}});
        conceal(Kind::ConfigPatch, &mut patch);
        assert_eq!(
            patch["spec"]["patches"],
            json!([
                {"op": "add", "path": "/machine/network/interfaces/0/wireguard",
                    "value": {"privateKey": REDACTED, "listenPort": 51820}},
                {"op": "replace", "path": "/machine/token", "value": REDACTED},
                {"op": "copy", "from": "/a", "path": "/b"}
            ])
        );
    }

    #[test]
    fn provider_configs_lose_their_strings_and_nothing_else_changes() {
        let config = json!({"userData": "#cloud-config\npassword: x", "ocpus": 2, "subnet": "ocid1.subnet"});
        let concealed = json!({"userData": REDACTED, "ocpus": 2, "subnet": REDACTED});
        let mut group = json!({"metadata": {"name": "w"}, "spec": {"name": "w", "role": "worker",
            "providerClass": "oci:VM", "providerConfig": config}});
        conceal(Kind::NodeGroup, &mut group);
        assert_eq!(group["spec"]["providerConfig"], concealed);
        assert_eq!(
            (group["spec"]["providerClass"].as_str(), group["spec"]["role"].as_str()),
            (Some("oci:VM"), Some("worker"))
        );
        let mut tenant = json!({"metadata": {"name": "t"}, "spec": {"kubernetesVersion": "1.31.0",
            "nodeGroups": [{"name": "w", "providerConfig": config}]}});
        conceal(Kind::Tenant, &mut tenant);
        assert_eq!(tenant["spec"]["nodeGroups"][0]["providerConfig"], concealed);
        assert_eq!(tenant["spec"]["kubernetesVersion"], "1.31.0");
        let mut machine = json!({"metadata": {"name": "m"}, "spec": {"providerId": "ocid1.instance"}});
        let before = machine.clone();
        conceal(Kind::Machine, &mut machine);
        assert_eq!(machine, before);
    }
}

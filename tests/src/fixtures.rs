//! Request bodies and paths used across the end-to-end tests.

use serde_json::{Value, json};

/// The tenants collection.
pub const TENANTS: &str = "/api/v1/tenants";

/// The path of one tenant.
pub fn tenant_path(name: &str) -> String {
    format!("{TENANTS}/{name}")
}

/// The node-group collection of a tenant.
pub fn node_groups_path(tenant: &str) -> String {
    format!("{TENANTS}/{tenant}/node-groups")
}

/// The config-patch collection of a tenant.
pub fn config_patches_path(tenant: &str) -> String {
    format!("{TENANTS}/{tenant}/configpatches")
}

/// The spec of a control-plane group of one metal host.
pub fn control_plane_group() -> Value {
    json!({
        "name": "cp",
        "role": "controlplane",
        "count": 1,
        "providerClass": "metal:bare",
        "providerConfig": {"hosts": [{"address": "10.0.0.1"}]}
    })
}

/// The spec of a worker group of `count` metal hosts, `10.0.<subnet>.1` onwards.
pub fn worker_group(name: &str, count: u32, subnet: u8) -> Value {
    let hosts: Vec<Value> =
        (1..=count).map(|host| json!({"address": format!("10.0.{subnet}.{host}")})).collect();
    json!({
        "name": name,
        "role": "worker",
        "count": count,
        "providerClass": "metal:bare",
        "providerConfig": {"hosts": hosts}
    })
}

/// A tenant body with no node groups.
pub fn tenant(name: &str) -> Value {
    json!({
        "metadata": {"name": name},
        "spec": {"kubernetesVersion": "1.31.1", "talosVersion": "1.9.0"}
    })
}

/// A tenant body with inline node groups.
pub fn tenant_with_groups(name: &str, groups: Vec<Value>) -> Value {
    let mut body = tenant(name);
    body["spec"]["nodeGroups"] = Value::Array(groups);
    body
}

/// A node-group resource body made from a group spec; the spec keeps its name.
pub fn node_group(spec: Value) -> Value {
    let name = spec["name"].clone();
    json!({"metadata": {"name": name}, "spec": spec})
}

/// A strategic config patch that sets one sysctl on every machine.
pub fn config_patch(name: &str) -> Value {
    json!({
        "metadata": {"name": name},
        "spec": {
            "format": "strategic",
            "target": "all",
            "patches": [{"machine": {"sysctls": {"net.core.somaxconn": "65535"}}}]
        }
    })
}

/// `metadata.resourceVersion` of an object.
pub fn resource_version(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"]
        .as_u64()
        .unwrap_or_else(|| panic!("metadata.resourceVersion is an integer in {object}"))
}

/// `metadata.generation` of an object.
pub fn generation(object: &Value) -> u64 {
    object["metadata"]["generation"]
        .as_u64()
        .unwrap_or_else(|| panic!("metadata.generation is an integer in {object}"))
}

/// The `metadata.name` of every item of a list body, in order.
pub fn item_names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("a list has items: {list}"))
        .iter()
        .map(|item| item["metadata"]["name"].as_str().expect("every item has a name").to_string())
        .collect()
}

/// The `total` of a list body.
pub fn total(list: &Value) -> u64 {
    list["total"].as_u64().unwrap_or_else(|| panic!("a list has a total: {list}"))
}

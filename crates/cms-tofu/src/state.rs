//! The tool's state as `show -json` prints it, and the projected resources
//! made from it. `show -json` prints sensitive values in the clear (an
//! `oci` instance's user data among them); they are dropped as the output
//! is parsed, so that no [`StateResource`] holds one.

use cms_model::Projected;
use serde_json::{Value, json};

use crate::workspace::machine_of;

/// One resource of the state.
#[derive(Debug, Clone, PartialEq)]
pub struct StateResource {
    pub address: String,
    /// `managed` or `data`.
    pub mode: String,
    pub tf_type: String,
    pub name: String,
    /// The resource's values, those the state marks sensitive set to null.
    pub values: Value,
}

/// Parses the output of `show -json`; an empty state has no `values`.
pub fn parse_show(stdout: &[u8]) -> Result<Vec<StateResource>, String> {
    let document: Value = serde_json::from_slice(stdout).map_err(|err| err.to_string())?;
    if !document.is_object() {
        return Err("the state is not a JSON object".into());
    }
    let mut resources = Vec::new();
    if let Some(module) = document.get("values").and_then(|values| values.get("root_module")) {
        collect(module, &mut resources)?;
    }
    Ok(resources)
}

fn collect(module: &Value, into: &mut Vec<StateResource>) -> Result<(), String> {
    for resource in module.get("resources").and_then(Value::as_array).into_iter().flatten() {
        let text = |field: &str| {
            resource
                .get(field)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| format!("a resource has no {field}"))
        };
        into.push(StateResource {
            address: text("address")?,
            mode: text("mode")?,
            tf_type: text("type")?,
            name: text("name")?,
            values: without_sensitive(
                resource.get("values").cloned().unwrap_or(Value::Null),
                resource.get("sensitive_values"),
            ),
        });
    }
    for child in module.get("child_modules").and_then(Value::as_array).into_iter().flatten() {
        collect(child, into)?;
    }
    Ok(())
}

/// `values` with every value that `marks` (`sensitive_values`, of the same
/// shape) flags `true` set to null.
fn without_sensitive(values: Value, marks: Option<&Value>) -> Value {
    match (values, marks) {
        (_, Some(Value::Bool(true))) => Value::Null,
        (Value::Object(map), Some(Value::Object(marks))) => Value::Object(
            map.into_iter()
                .map(|(key, value)| {
                    let mark = marks.get(&key);
                    (key, without_sensitive(value, mark))
                })
                .collect(),
        ),
        (Value::Array(items), Some(Value::Array(marks))) => Value::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(index, item)| without_sensitive(item, marks.get(index)))
                .collect(),
        ),
        (values, _) => values,
    }
}

/// The projected resources of a tenant's state: machines with their
/// address, provider id and shape, data sources, and other kinds by type.
pub fn project(tenant: &str, resources: &[StateResource]) -> Vec<Projected> {
    resources
        .iter()
        .map(|resource| {
            let (kind, spec) = match (resource.mode.as_str(), resource.tf_type.as_str()) {
                ("data", _) => ("DataSource", json!({})),
                (_, "terraform_data") => {
                    let output = resource.values.get("output").or_else(|| resource.values.get("input"));
                    let field = |name: &str| output.and_then(|o| o.get(name)).cloned().unwrap_or(Value::Null);
                    ("Machine", json!({"address": field("address"), "providerId": field("providerId"), "shape": field("shape")}))
                }
                (_, "oci_core_instance") => {
                    let field = |name: &str| resource.values.get(name).cloned().unwrap_or(Value::Null);
                    // A public address, when the instance has one, is the one the service reaches.
                    let public = field("public_ip").as_str().filter(|ip| !ip.is_empty()).map(|ip| json!(ip));
                    let address = public.unwrap_or_else(|| field("private_ip"));
                    ("Machine", json!({"address": address, "providerId": field("id"), "shape": field("shape")}))
                }
                (_, "openstack_compute_instance_v2") => {
                    let field = |name: &str| resource.values.get(name).cloned().unwrap_or(Value::Null);
                    ("Machine", json!({"address": field("access_ip_v4"), "providerId": field("id"), "shape": field("flavor_name")}))
                }
                (_, kind) if crate::readback::BALANCERS.contains(&kind) => {
                    ("LoadBalancer", json!({"address": crate::readback::balancer_address(resource)}))
                }
                _ => ("Resource", json!({})),
            };
            // A machine's resource name is its id, `_`-prefixed when it starts with a digit.
            let name = match kind {
                "Machine" => machine_of(&resource.name).to_string(),
                _ => resource.name.clone(),
            };
            Projected {
                tenant: tenant.to_string(),
                kind: kind.to_string(),
                tf_type: resource.tf_type.clone(),
                name,
                spec,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metal_state_projects_machines() {
        let show = br#"{"format_version":"1.0","values":{"root_module":{"resources":[{"address":"terraform_data.cp-0","mode":"managed","type":"terraform_data","name":"cp-0","values":{"output":{"address":"10.0.0.1","providerId":"m1","shape":"bare"}}}]}}}"#;
        let resources = parse_show(show).unwrap();
        let projected = project("t", &resources);
        assert_eq!(projected[0].kind, "Machine");
        assert_eq!(projected[0].spec["address"], "10.0.0.1");
        assert_eq!(projected[0].spec["providerId"], "m1");
    }

    #[test]
    fn sensitive_values_are_dropped() {
        let show = br#"{"format_version":"1.0","values":{"root_module":{"resources":[{"address":"oci_core_instance.cp-0","mode":"managed","type":"oci_core_instance","name":"cp-0","values":{"id":"ocid1.instance","private_ip":"10.0.0.5","shape":"s","metadata":{"user_data":"bWFjaGluZQ=="},"tags":[{"a":"x"},{"a":"y"}]},"sensitive_values":{"metadata":{"user_data":true},"tags":[{},{"a":true}]}}]}}}"#;
        let resources = parse_show(show).unwrap();
        let values = &resources[0].values;
        assert_eq!(values["metadata"]["user_data"], Value::Null);
        assert_eq!(values["tags"], json!([{"a": "x"}, {"a": null}]));
        assert_eq!(
            project("t", &resources)[0].spec,
            json!({"address": "10.0.0.5", "providerId": "ocid1.instance", "shape": "s"})
        );
    }

    #[test]
    fn empty_state_and_garbage() {
        assert!(parse_show(br#"{"format_version":"1.0"}"#).unwrap().is_empty());
        assert!(parse_show(b"\x00garbage{").is_err());
        assert!(parse_show(b"[1,2]").is_err());
    }
}

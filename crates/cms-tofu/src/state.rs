//! The tool's state as `show -json` prints it, and the projected resources
//! made from it.

use cms_model::Projected;
use serde_json::{Value, json};

/// One resource of the state.
#[derive(Debug, Clone, PartialEq)]
pub struct StateResource {
    pub address: String,
    /// `managed` or `data`.
    pub mode: String,
    pub tf_type: String,
    pub name: String,
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
            values: resource.get("values").cloned().unwrap_or(Value::Null),
        });
    }
    for child in module.get("child_modules").and_then(Value::as_array).into_iter().flatten() {
        collect(child, into)?;
    }
    Ok(())
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
                    ("Machine", json!({"address": field("private_ip"), "providerId": field("id"), "shape": field("shape")}))
                }
                (_, "openstack_compute_instance_v2") => {
                    let field = |name: &str| resource.values.get(name).cloned().unwrap_or(Value::Null);
                    ("Machine", json!({"address": field("access_ip_v4"), "providerId": field("id"), "shape": field("flavor_name")}))
                }
                _ => ("Resource", json!({})),
            };
            Projected {
                tenant: tenant.to_string(),
                kind: kind.to_string(),
                tf_type: resource.tf_type.clone(),
                name: resource.name.clone(),
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
    fn empty_state_and_garbage() {
        assert!(parse_show(br#"{"format_version":"1.0"}"#).unwrap().is_empty());
        assert!(parse_show(b"\x00garbage{").is_err());
        assert!(parse_show(b"[1,2]").is_err());
    }
}

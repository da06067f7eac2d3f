//! Row-level helpers of the write rules: new rows, default statuses, and a
//! tenant's `nodeGroups` split off its spec. Pure, like [`crate::write`].

use std::collections::BTreeMap;

use cms_model::{Kind, MachineStatus, NodeGroupStatus, TenantStatus};
use serde_json::Value;

use crate::api::Key;
use crate::entity::object;
use crate::error::StoreError;
use crate::render::map_text;

/// A new row at resource version and generation 1.
pub(crate) fn new_row(
    key: &Key,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
    spec: &Value,
    status: &Value,
    now: &str,
) -> object::Model {
    object::Model {
        kind: key.kind.as_str().to_string(),
        tenant: key.tenant.clone(),
        name: key.name.clone(),
        resource_version: 1,
        generation: 1,
        created_at: now.to_string(),
        updated_at: now.to_string(),
        deletion_timestamp: None,
        finalizers: "[]".to_string(),
        labels: map_text(labels),
        annotations: map_text(annotations),
        spec: spec.to_string(),
        status: status.to_string(),
        // Stamped once the write's revision is taken.
        revision: 0,
    }
}

/// The status an object of `kind` starts with.
pub(crate) fn default_status(kind: Kind) -> Value {
    let status = match kind {
        Kind::Tenant => serde_json::to_value(TenantStatus::default()),
        Kind::NodeGroup => serde_json::to_value(NodeGroupStatus::default()),
        Kind::ConfigPatch => Ok(Value::Object(Default::default())),
        Kind::Machine => serde_json::to_value(MachineStatus {
            stage: "initializing".to_string(),
            ..MachineStatus::default()
        }),
    };
    status.unwrap_or(Value::Null)
}

/// Splits a tenant's `nodeGroups` off its spec.
pub(crate) fn split_groups(kind: Kind, spec: Value) -> Result<(Value, Option<Vec<Value>>), StoreError> {
    let Value::Object(mut map) = spec else {
        return Err(StoreError::Refused("spec must be an object".into()));
    };
    if kind != Kind::Tenant {
        return Ok((Value::Object(map), None));
    }
    let groups = match map.remove("nodeGroups") {
        None | Some(Value::Null) => None,
        Some(Value::Array(groups)) => Some(groups),
        Some(_) => return Err(StoreError::Refused("spec.nodeGroups must be a list".into())),
    };
    Ok((Value::Object(map), groups))
}

pub(crate) fn group_name(group: &Value) -> Result<&str, StoreError> {
    group
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| StoreError::Refused("every node group needs a name".into()))
}

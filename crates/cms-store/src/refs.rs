//! A tenant's `ConfigPatchesResolved` condition, kept right by the writes
//! themselves: every write rule that can change it recomputes it with
//! [`cms_model::patch_refs`] on its [`View`] before it ends, so the condition
//! commits with the change that moved it. Pure, like [`crate::write`].
//!
//! The tenant's own refs are in its row's spec; its node groups' are in their
//! rows. Each referenced name is looked up by key, so the cost follows the
//! refs, never the number of patches. The store owns the condition: what a
//! caller writes of it in a status is replaced by the stored one.

use chrono::{DateTime, Utc};
use cms_model::patch_refs::{self, CONFIG_PATCHES_RESOLVED};
use cms_model::{Condition, ConfigPatchRef, Kind, NodeGroupSpec, TenantSpec, TenantStatus};
use serde::Deserialize;
use serde_json::Value;

use crate::api::Key;
use crate::error::StoreError;
use crate::render::json;
use crate::view::View;

/// Recomputes the condition of `tenant` in `view`. A tenant the write
/// already changed is amended in place; any other is updated once, with one
/// `Modified` event. Does nothing when the tenant is gone, or neither refers
/// to a patch nor carries the condition.
pub(crate) fn resolve(view: &mut View<'_>, tenant: &str) -> Result<(), StoreError> {
    let key = Key::tenant(tenant);
    let Some(row) = view.find(&key) else { return Ok(()) };
    let spec = refs_of(view, &key, &row.spec)?;
    if !patch_refs::has_refs(&spec) && !row.status.contains(CONFIG_PATCHES_RESOLVED) {
        return Ok(());
    }
    let mut status: Value = json(&row.status)?;
    let index = position(&status);
    let current =
        index.and_then(|index| serde_json::from_value::<Condition>(status["conditions"][index].clone()).ok());
    // A condition that does not parse is replaced, or dropped.
    let malformed = index.is_some() && current.is_none();
    let mut one = TenantStatus { conditions: current.into_iter().collect(), ..TenantStatus::default() };
    let exists = |name: &str| view.find(&Key::child(Kind::ConfigPatch, tenant, name)).is_some();
    if !patch_refs::apply(&mut one, &spec, exists, write_time(view)?) && !malformed {
        return Ok(());
    }
    let condition = one.conditions.pop().map(serde_json::to_value).transpose();
    let condition = condition.map_err(|err| StoreError::Corrupt(err.to_string()))?;
    put(&mut status, index, condition, &key)?;
    let now = view.now().to_string();
    view.amend(&key, |row| {
        row.status = status.to_string();
        row.updated_at = now;
    })
}

/// Gives `status`, a new status of the tenant `key`, the condition of
/// `stored`, its status as stored (none when `stored` is `None` or has none):
/// whatever `status` said of the condition is dropped.
pub(crate) fn carry_condition(status: &mut Value, stored: Option<&str>, key: &Key) -> Result<(), StoreError> {
    let condition = match stored {
        Some(text) if text.contains(CONFIG_PATCHES_RESOLVED) => {
            let stored: Value = json(text)?;
            position(&stored).map(|index| stored["conditions"][index].clone())
        }
        _ => None,
    };
    let index = position(status);
    put(status, index, condition, key)
}

/// The tenant's refs and its node groups' refs, as a spec that holds
/// nothing else.
fn refs_of(view: &View<'_>, tenant: &Key, spec: &str) -> Result<TenantSpec, StoreError> {
    let mut groups = Vec::new();
    for key in view.keys_inside(&tenant.name, Some(Kind::NodeGroup)) {
        let row = view.get(&key)?;
        let config_patches = refs_in(&key, &row.spec)?;
        if !config_patches.is_empty() {
            groups.push(NodeGroupSpec { name: key.name, config_patches, ..NodeGroupSpec::default() });
        }
    }
    let config_patches = refs_in(tenant, spec)?;
    Ok(TenantSpec { config_patches, node_groups: Some(groups), ..TenantSpec::default() })
}

/// The `configPatches` of a spec's JSON text; a quick look at the text
/// spares the parse of a spec whose lists are all empty, as most are.
fn refs_in(key: &Key, spec: &str) -> Result<Vec<ConfigPatchRef>, StoreError> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Refs {
        #[serde(default)]
        config_patches: Vec<ConfigPatchRef>,
    }
    const FIELD: &str = "\"configPatches\"";
    let may_refer = spec.match_indices(FIELD).any(|(at, _)| !spec[at + FIELD.len()..].starts_with(":[]"));
    if !may_refer {
        return Ok(Vec::new());
    }
    let refs: Refs = serde_json::from_str(spec).map_err(|err| {
        StoreError::Refused(format!(
            "the config patch refs of {key} must be a list of {{\"name\": ...}}: {err}"
        ))
    })?;
    Ok(refs.config_patches)
}

/// Where the condition is in `status.conditions`.
fn position(status: &Value) -> Option<usize> {
    status
        .get("conditions")?
        .as_array()?
        .iter()
        .position(|condition| condition.get("type").and_then(Value::as_str) == Some(CONFIG_PATCHES_RESOLVED))
}

/// Puts `condition` in `status.conditions` at `index`, or at the end when
/// it was not there; `None` drops the one at `index`.
fn put(
    status: &mut Value,
    index: Option<usize>,
    condition: Option<Value>,
    key: &Key,
) -> Result<(), StoreError> {
    if index.is_none() && condition.is_none() {
        return Ok(());
    }
    if status.is_null() {
        *status = Value::Object(Default::default());
    }
    let Value::Object(fields) = status else {
        return Err(StoreError::Refused(format!("the status of {key} must be an object")));
    };
    let conditions = fields.entry("conditions").or_insert_with(|| Value::Array(Vec::new()));
    if conditions.is_null() {
        *conditions = Value::Array(Vec::new());
    }
    let Value::Array(conditions) = conditions else {
        return Err(StoreError::Refused(format!("the status conditions of {key} must be a list")));
    };
    match (index, condition) {
        (Some(index), Some(condition)) => conditions[index] = condition,
        (Some(index), None) => {
            conditions.remove(index);
        }
        (None, Some(condition)) => conditions.push(condition),
        (None, None) => {}
    }
    Ok(())
}

/// The time of the write, for the condition's transition.
fn write_time(view: &View<'_>) -> Result<DateTime<Utc>, StoreError> {
    DateTime::parse_from_rfc3339(view.now())
        .map(|time| time.with_timezone(&Utc))
        .map_err(|err| StoreError::Corrupt(format!("the write's time {:?}: {err}", view.now())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_specs_that_may_refer_to_a_patch_are_parsed() {
        let key = Key::tenant("a");
        // Not parsed: a broken text with empty lists only is not looked at.
        assert!(
            refs_in(&key, r#"{"configPatches":[],"nodeGroups":[{"configPatches":[]}"#).unwrap().is_empty()
        );
        assert!(refs_in(&key, r#"{"kubernetesVersion":"1.31.0"}"#).unwrap().is_empty());
        let spaced = refs_in(&key, r#"{"configPatches": [{"name": "dns"}]}"#).unwrap();
        assert_eq!(spaced, [ConfigPatchRef { name: "dns".into() }]);
        let compact = refs_in(&key, r#"{"configPatches":[{"name":"dns"}],"podNetwork":[]}"#).unwrap();
        assert_eq!(compact.len(), 1);
        assert!(matches!(refs_in(&key, r#"{"configPatches":7}"#), Err(StoreError::Refused(_))));
    }
}

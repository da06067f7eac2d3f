//! Config patches: resolving refs, checking patches on write, applying them.
//!
//! A machine's config is the generated base, then the tenant's refs in
//! order, then its node group's refs in order, each applied only when it is
//! `enabled` and its `target` matches the machine's role (decisions §4).
//! `strategic` elements merge with the Talos rules ([`strategic`]); the
//! elements of a `jsonpatch` patch are RFC 6902 operations applied together,
//! and only to a config of a single document.

pub(crate) mod strategic;

use std::collections::BTreeMap;

use cms_model::{ConfigPatchRef, ConfigPatchSpec, FieldError, PatchFormat, Role};
use serde_json::Value;

use crate::error::{Result, TalosError};
use strategic::{DIRECTIVE, DocumentKey, document_key, is_delete};

/// A config patch found by name, ready to apply.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedPatch {
    /// The config patch's name, used in error messages.
    pub name: String,
    pub spec: ConfigPatchSpec,
}

/// The patches for one machine, in order, and the refs that named no patch.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PatchResolution {
    pub patches: Vec<ResolvedPatch>,
    /// Names referenced but not found, each once, in order of first mention.
    pub missing: Vec<String>,
}

/// Looks up the tenant's refs, then the node group's refs, in `available`
/// (the tenant's config patches by name). Missing names are reported, not
/// fatal: the tenant status shows them.
pub fn resolve_patches(
    tenant_refs: &[ConfigPatchRef],
    group_refs: &[ConfigPatchRef],
    available: &BTreeMap<String, ConfigPatchSpec>,
) -> PatchResolution {
    let mut resolution = PatchResolution::default();
    for reference in tenant_refs.iter().chain(group_refs) {
        match available.get(&reference.name) {
            Some(spec) => {
                resolution.patches.push(ResolvedPatch { name: reference.name.clone(), spec: spec.clone() })
            }
            None if resolution.missing.contains(&reference.name) => {}
            None => resolution.missing.push(reference.name.clone()),
        }
    }
    resolution
}

/// Applies the patches that are enabled and target `role`, in order.
pub(crate) fn apply_patches(documents: &mut Vec<Value>, patches: &[ResolvedPatch], role: Role) -> Result<()> {
    for patch in patches.iter().filter(|p| p.spec.enabled && p.spec.target.matches(role)) {
        apply_patch(documents, patch)
            .map_err(|message| TalosError::Patch { patch: patch.name.clone(), message })?;
    }
    Ok(())
}

fn apply_patch(documents: &mut Vec<Value>, patch: &ResolvedPatch) -> Result<(), String> {
    match patch.spec.format {
        PatchFormat::Strategic => {
            for (index, element) in patch.spec.patches.iter().enumerate() {
                strategic::apply(documents, element)
                    .map_err(|message| format!("patches[{index}]: {message}"))?;
            }
            Ok(())
        }
        PatchFormat::JsonPatch => {
            let [document] = documents.as_mut_slice() else {
                return Err(format!(
                    "JSON patches apply to single-document configs only, and this config has {} documents",
                    documents.len()
                ));
            };
            let operations: Vec<json_patch::PatchOperation> =
                serde_json::from_value(Value::Array(patch.spec.patches.clone()))
                    .map_err(|err| format!("not RFC 6902 operations: {err}"))?;
            json_patch::patch(document, &operations).map_err(|err| err.to_string())
        }
    }
}

/// Checks a config patch on write, so that a broken one is refused (422)
/// rather than found when a machine's config is rendered.
pub fn check_patch(spec: &ConfigPatchSpec) -> Result<(), FieldError> {
    if spec.patches.is_empty() {
        return Err(FieldError::new("spec.patches", "must hold at least one element"));
    }
    for (index, element) in spec.patches.iter().enumerate() {
        let field = format!("spec.patches[{index}]");
        if !element.is_object() {
            return Err(FieldError::new(field, "must be an object"));
        }
        match spec.format {
            PatchFormat::JsonPatch => {
                serde_json::from_value::<json_patch::PatchOperation>(element.clone())
                    .map_err(|err| FieldError::new(&field, format!("is not an RFC 6902 operation: {err}")))?;
            }
            PatchFormat::Strategic => check_document(&field, element)?,
        }
    }
    Ok(())
}

fn check_document(field: &str, element: &Value) -> Result<(), FieldError> {
    for key in ["apiVersion", "kind", "name", "version"] {
        if element.get(key).is_some_and(|value| !value.is_string()) {
            return Err(FieldError::new(format!("{field}.{key}"), "must be a string"));
        }
    }
    let key = document_key(element);
    if key == DocumentKey::V1Alpha1 {
        if let Some(version) = element.get("version").and_then(Value::as_str).filter(|v| *v != "v1alpha1") {
            return Err(FieldError::new(
                format!("{field}.version"),
                format!("{version:?} must be \"v1alpha1\""),
            ));
        }
        if element.get(DIRECTIVE).is_some() {
            return Err(FieldError::new(
                format!("{field}.{DIRECTIVE}"),
                "only a document with a kind can be deleted as a whole",
            ));
        }
    }
    check_directives(field, element)
}

/// Every `$patch` is `delete`; a deleted list item names what it deletes.
fn check_directives(field: &str, value: &Value) -> Result<(), FieldError> {
    match value {
        Value::Object(map) => {
            if let Some(directive) = map.get(DIRECTIVE)
                && directive.as_str() != Some("delete")
            {
                return Err(FieldError::new(format!("{field}.{DIRECTIVE}"), "must be \"delete\""));
            }
            for (key, child) in map {
                if key != DIRECTIVE {
                    check_directives(&format!("{field}.{key}"), child)?;
                }
            }
            Ok(())
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                let item_field = format!("{field}[{index}]");
                if is_delete(item) && item.as_object().is_some_and(|map| map.len() < 2) {
                    return Err(FieldError::new(
                        item_field,
                        "a list item with $patch: delete must name the item it deletes",
                    ));
                }
                check_directives(&item_field, item)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;

//! Config patches: overlays on the generated machine configuration.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::meta::Resource;
use crate::node_group::Role;
use crate::validate::{FieldError, Validate};

/// A config-patch resource.
pub type ConfigPatch = Resource<ConfigPatchSpec, ConfigPatchStatus>;

/// How the elements of `patches` are applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum PatchFormat {
    /// Each element is a partial machine-config document, merged in order.
    Strategic,
    /// Each element is one RFC 6902 operation.
    #[serde(rename = "jsonpatch")]
    JsonPatch,
}

/// Which machines a patch applies to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum PatchTarget {
    #[serde(rename = "controlplane")]
    ControlPlane,
    Worker,
    #[default]
    All,
}

impl PatchTarget {
    /// Whether a machine of `role` gets this patch.
    pub fn matches(self, role: Role) -> bool {
        match self {
            PatchTarget::All => true,
            PatchTarget::ControlPlane => role == Role::ControlPlane,
            PatchTarget::Worker => role == Role::Worker,
        }
    }
}

fn enabled_by_default() -> bool {
    true
}

/// The desired state of a config patch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigPatchSpec {
    pub format: PatchFormat,
    #[serde(default)]
    pub target: PatchTarget,
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
    /// For `strategic`, partial machine-config documents; for `jsonpatch`,
    /// RFC 6902 operations.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>, min_items = 1))]
    pub patches: Vec<Value>,
}

/// The observed state of a config patch; nothing is observed yet.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ConfigPatchStatus {}

impl Validate for ConfigPatchSpec {
    fn normalize(&mut self, path: &str) -> Result<(), FieldError> {
        if self.patches.is_empty() {
            return Err(FieldError::new(format!("{path}.patches"), "must hold at least one element"));
        }
        for (index, element) in self.patches.iter().enumerate() {
            let field = format!("{path}.patches[{index}]");
            if !element.is_object() {
                return Err(FieldError::new(field, "must be an object"));
            }
            if self.format == PatchFormat::JsonPatch {
                serde_json::from_value::<json_patch::PatchOperation>(element.clone())
                    .map_err(|err| FieldError::new(&field, format!("is not an RFC 6902 operation: {err}")))?;
            }
        }
        Ok(())
    }
}

impl ConfigPatch {
    /// Normalizes and checks a config patch from a request body.
    pub fn prepare(&mut self) -> Result<(), FieldError> {
        self.metadata.validate()?;
        self.spec.normalize("spec")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_json;

    fn patch(json: &str) -> Result<ConfigPatch, FieldError> {
        let mut patch: ConfigPatch = parse_json(json.as_bytes()).expect("parses");
        patch.prepare().map(|_| patch)
    }

    #[test]
    fn defaults_and_targets() {
        let p =
            patch(r#"{"metadata":{"name":"p"},"spec":{"format":"strategic","patches":[{"machine":{}}]}}"#)
                .unwrap();
        assert!(p.spec.enabled);
        assert_eq!(p.spec.target, PatchTarget::All);
        assert!(PatchTarget::Worker.matches(Role::Worker));
        assert!(!PatchTarget::Worker.matches(Role::ControlPlane));
    }

    #[test]
    fn json_patch_operations_are_checked() {
        let ok = r#"{"metadata":{"name":"p"},"spec":{"format":"jsonpatch","patches":[{"op":"add","path":"/machine/x","value":1}]}}"#;
        assert!(patch(ok).is_ok());
        let bad = r#"{"metadata":{"name":"p"},"spec":{"format":"jsonpatch","patches":[{"op":"frobnicate","path":"/x"}]}}"#;
        assert_eq!(patch(bad).unwrap_err().field, "spec.patches[0]");
        let scalar = r#"{"metadata":{"name":"p"},"spec":{"format":"strategic","patches":[3]}}"#;
        assert_eq!(patch(scalar).unwrap_err().field, "spec.patches[0]");
    }
}

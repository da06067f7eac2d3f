//! The resources users write (tenants, node groups, config patches) and the
//! rules they must meet beyond `cms-model`'s: a Talos version that `cms`
//! renders configs for, and config patches that apply by Talos's merge
//! rules, so a broken one is refused on write rather than found at render
//! time. [`Writable::check`] is what the API checks, so a Rust tool that
//! writes through [`crate::Tenancy`] is refused exactly where the API
//! refuses.

use cms_model::{ConfigPatch, FieldError, Kind, NodeGroup, ObjectMeta, Resource, Tenant};
use cms_store::Draft;
use serde::Serialize;

use crate::error::TenancyError;
use crate::secrets::check_talos_version;

/// A kind of resource that users create and change.
pub trait Writable: Sized {
    /// The kind as the store keys it.
    const KIND: Kind;

    /// Normalizes the resource (defaults, version prefixes) and checks every
    /// rule, naming the field that breaks one.
    fn check(&mut self) -> Result<(), FieldError>;

    /// The resource's metadata.
    fn metadata(&self) -> &ObjectMeta;

    /// What the store writes: labels, annotations and spec. Status is never
    /// taken from a writer.
    fn draft(self) -> Result<Draft, TenancyError>;
}

impl Writable for Tenant {
    const KIND: Kind = Kind::Tenant;

    fn check(&mut self) -> Result<(), FieldError> {
        self.prepare()?;
        if let Some(version) = &self.spec.talos_version {
            check_talos_version("spec.talosVersion", version)?;
        }
        for (index, group) in self.spec.node_groups.iter().flatten().enumerate() {
            if let Some(version) = &group.talos_version {
                check_talos_version(&format!("spec.nodeGroups[{index}].talosVersion"), version)?;
            }
        }
        Ok(())
    }

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn draft(self) -> Result<Draft, TenancyError> {
        draft(self)
    }
}

impl Writable for NodeGroup {
    const KIND: Kind = Kind::NodeGroup;

    fn check(&mut self) -> Result<(), FieldError> {
        self.prepare()?;
        match &self.spec.talos_version {
            Some(version) => check_talos_version("spec.talosVersion", version),
            None => Ok(()),
        }
    }

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn draft(self) -> Result<Draft, TenancyError> {
        draft(self)
    }
}

impl Writable for ConfigPatch {
    const KIND: Kind = Kind::ConfigPatch;

    fn check(&mut self) -> Result<(), FieldError> {
        self.prepare()?;
        cms_talos::check_patch(&self.spec)
    }

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn draft(self) -> Result<Draft, TenancyError> {
        draft(self)
    }
}

/// Turns a checked resource into what the store writes.
fn draft<Spec: Serialize, Status>(resource: Resource<Spec, Status>) -> Result<Draft, TenancyError> {
    let spec = serde_json::to_value(&resource.spec).map_err(TenancyError::corrupt("the spec"))?;
    Ok(Draft {
        labels: resource.metadata.labels,
        annotations: resource.metadata.annotations,
        spec,
        status: None,
        secrets: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cms_model::parse_json;

    fn tenant(json: &str) -> Tenant {
        parse_json(json.as_bytes()).expect("parses")
    }

    #[test]
    fn tenant_drafts_keep_absent_node_groups_absent() {
        let mut resource = tenant(
            r#"{"metadata":{"name":"a","labels":{"team":"x"}},"spec":{"kubernetesVersion":"1.31.0"}}"#,
        );
        resource.check().expect("valid");
        let draft = resource.draft().expect("drafts");
        assert!(draft.spec.get("nodeGroups").is_none(), "{}", draft.spec);
        assert_eq!(draft.labels.get("team").map(String::as_str), Some("x"));
        assert_eq!(draft.status, None);

        let resource =
            tenant(r#"{"metadata":{"name":"a"},"spec":{"kubernetesVersion":"1.31.0","nodeGroups":[]}}"#);
        assert_eq!(resource.draft().expect("drafts").spec["nodeGroups"], serde_json::json!([]));
    }

    #[test]
    fn talos_versions_outside_the_range_name_their_field() {
        let mut resource = tenant(
            r#"{"metadata":{"name":"a"},"spec":{"kubernetesVersion":"1.31.0","nodeGroups":[
                {"name":"w","role":"worker","count":1,"providerClass":"metal:bare","providerConfig":{"hosts":[{"address":"10.0.0.1"}]},"talosVersion":"1.7.0"}]}}"#,
        );
        let err = resource.check().expect_err("1.7 is too old");
        assert_eq!(err.field, "spec.nodeGroups[0].talosVersion");
    }
}

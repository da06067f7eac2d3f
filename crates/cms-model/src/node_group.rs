//! Node groups: sets of machines of one role on one provider.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::installer::check_installer;
use crate::meta::Resource;
use crate::providers::{MetalConfig, MetalHost, check_provider_config, config};
use crate::tenant::{ConfigPatchRef, check_refs};
use crate::validate::{
    CloudText, FieldError, Validate, normalize_version, validate_cloud_text, validate_name,
};

mod autoscaling;

pub use autoscaling::{Autoscaling, MAX_REMOVED_MACHINES, machine_id, machine_index};

/// A node-group resource.
pub type NodeGroup = Resource<NodeGroupSpec, NodeGroupStatus>;

/// The role of a machine in its cluster.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Role {
    #[serde(rename = "controlplane")]
    ControlPlane,
    #[default]
    Worker,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::ControlPlane => "controlplane",
            Role::Worker => "worker",
        }
    }
}

/// The desired state of a node group.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeGroupSpec {
    /// The group's name. Required inside a tenant's `nodeGroups`; on the
    /// node-group resource it may be left out and equals `metadata.name`.
    #[serde(default)]
    pub name: String,
    pub role: Role,
    /// The number of machines, at least 1.
    #[cfg_attr(feature = "openapi", schema(minimum = 1))]
    pub count: u32,
    /// `<provider>:<shape>`, provider `oci`, `openstack` or `metal`.
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = r"^(oci|openstack|metal):.*\S", example = "metal:bare")
    )]
    pub provider_class: String,
    /// Provider-specific settings, checked per provider: for `oci` see
    /// `OciConfig`, for `openstack` `OpenStackConfig`, for `metal`
    /// `{"hosts": [MetalHost]}`.
    #[serde(default)]
    pub provider_config: Map<String, Value>,
    /// Overrides the tenant's `talosVersion`.
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = r"^v?[0-9]{1,9}\.[0-9]{1,9}\.[0-9]{1,9}$", example = "1.14.0")
    )]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub talos_version: Option<String>,
    /// Overrides the tenant's `installerImage` and `schematic`: the
    /// repository of the installer image, without tag or digest.
    #[cfg_attr(
        feature = "openapi",
        schema(
            max_length = 255,
            pattern = r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?(/[a-z0-9]+([._-][a-z0-9]+)*)+$",
            example = "registry.example.com/talos/installer"
        )
    )]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installer_image: Option<String>,
    /// Overrides the tenant's `installerImage` and `schematic`: an Image
    /// Factory schematic id (`factory.talos.dev/installer/<schematic>`). At
    /// most one of `installerImage` and `schematic`.
    #[cfg_attr(
        feature = "openapi",
        schema(
            pattern = r"^[0-9a-f]{64}$",
            example = "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba"
        )
    )]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schematic: Option<String>,
    #[serde(default)]
    pub config_patches: Vec<ConfigPatchRef>,
    /// How many of the group's workers a rolling Talos upgrade takes down
    /// at once; 1 when unset. Control planes always go one at a time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parallelism: Option<u32>,
    /// The range the cluster autoscaler keeps `count` within; the group is
    /// not autoscaled when unset. Never on a control-plane group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling: Option<Autoscaling>,
    /// Machine ids of this group left out of it: the group's machines are the first `count` ids
    /// `<name>-<i>` (i = 0, 1, ...) whose id is not listed. A named scale-down (the autoscaler's
    /// `NodeGroupDeleteNodes`) lowers `count` and lists the machines it removes.
    #[cfg_attr(feature = "openapi", schema(max_items = 1000))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed_machines: Vec<String>,
}

/// The observed state of a node group.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeGroupStatus {
    #[serde(default)]
    pub replicas: u32,
    #[serde(default)]
    pub ready_replicas: u32,
}

/// The infrastructure providers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    Oci,
    OpenStack,
    Metal,
}

impl Provider {
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Oci => "oci",
            Provider::OpenStack => "openstack",
            Provider::Metal => "metal",
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A parsed `providerClass`: `<provider>:<shape>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderClass {
    pub provider: Provider,
    pub shape: String,
}

impl FromStr for ProviderClass {
    type Err = String;

    fn from_str(class: &str) -> Result<ProviderClass, String> {
        let (provider, shape) = class
            .split_once(':')
            .ok_or_else(|| format!("{class:?} must have the form <provider>:<shape>"))?;
        let provider = match provider {
            "oci" => Provider::Oci,
            "openstack" => Provider::OpenStack,
            "metal" => Provider::Metal,
            other => return Err(format!("unknown provider {other:?}; expected oci, openstack or metal")),
        };
        if shape.trim().is_empty() {
            return Err(format!("{class:?} has an empty shape"));
        }
        Ok(ProviderClass { provider, shape: shape.to_string() })
    }
}

impl NodeGroupSpec {
    /// The parsed provider class. Valid after [`Validate::normalize`].
    pub fn provider_class(&self) -> Result<ProviderClass, String> {
        self.provider_class.parse()
    }

    /// The hosts of a `metal` group, in order.
    pub fn metal_hosts(&self) -> Vec<MetalHost> {
        config::<MetalConfig>("", &self.provider_config).map(|c| c.hosts).unwrap_or_default()
    }
}

impl Validate for NodeGroupSpec {
    fn normalize(&mut self, path: &str) -> Result<(), FieldError> {
        if self.count < 1 {
            return Err(FieldError::new(format!("{path}.count"), "must be at least 1"));
        }
        let class = self
            .provider_class()
            .map_err(|message| FieldError::new(format!("{path}.providerClass"), message))?;
        validate_cloud_text(&format!("{path}.providerClass"), &class.shape, CloudText::Identifier)?;
        let hosts_needed = self.normalize_removed(path)?;
        self.check_autoscaling(path)?;
        let field = format!("{path}.providerConfig");
        check_provider_config(&field, &class, hosts_needed, &self.provider_config)?;
        if class.provider == Provider::Metal {
            self.check_autoscaling_hosts(path, self.metal_hosts().len())?;
        }
        if let Some(version) = &self.talos_version {
            self.talos_version = Some(normalize_version(&format!("{path}.talosVersion"), version)?);
        }
        check_installer(path, self.installer_image.as_deref(), self.schematic.as_deref())?;
        if self.max_parallelism == Some(0) {
            return Err(FieldError::new(format!("{path}.maxParallelism"), "must be at least 1"));
        }
        check_refs(&format!("{path}.configPatches"), &self.config_patches)
    }
}

/// Checks a node-group resource's spec against its metadata name.
pub(crate) fn bind_name(spec: &mut NodeGroupSpec, name: &str) -> Result<(), FieldError> {
    if spec.name.is_empty() {
        spec.name = name.to_string();
    }
    if spec.name != name {
        return Err(FieldError::new(
            "spec.name",
            format!("{:?} differs from metadata.name {name:?}", spec.name),
        ));
    }
    validate_name("spec.name", &spec.name)
}

impl NodeGroup {
    /// Normalizes and checks a node-group resource from a request body.
    pub fn prepare(&mut self) -> Result<(), FieldError> {
        self.metadata.validate()?;
        bind_name(&mut self.spec, &self.metadata.name)?;
        self.spec.normalize("spec")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_json;

    fn group(json: &str) -> Result<NodeGroupSpec, FieldError> {
        let mut spec: NodeGroupSpec = parse_json(json.as_bytes()).map_err(|e| match e {
            crate::ParseError::Invalid(e) => e,
            other => panic!("{other}"),
        })?;
        spec.normalize("spec").map(|_| spec)
    }

    #[test]
    fn provider_class_is_checked() {
        for class in ["oci", "aws:x", "oci:", "metal: "] {
            let err =
                group(&format!(r#"{{"role":"worker","count":1,"providerClass":"{class}"}}"#)).unwrap_err();
            assert_eq!(err.field, "spec.providerClass", "{class}");
        }
    }

    #[test]
    fn resource_name_binds_spec_name() {
        let mut spec = NodeGroupSpec::default();
        bind_name(&mut spec, "workers").unwrap();
        assert_eq!(spec.name, "workers");
        spec.name = "other".into();
        assert_eq!(bind_name(&mut spec, "workers").unwrap_err().field, "spec.name");
    }
}

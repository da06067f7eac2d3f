//! Node groups: sets of machines of one role on one provider.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::meta::Resource;
use crate::tenant::{ConfigPatchRef, check_refs};
use crate::validate::{
    CloudText, FieldError, Validate, normalize_version, validate_cloud_text, validate_name,
};

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
    #[serde(default)]
    pub config_patches: Vec<ConfigPatchRef>,
    /// How many of the group's workers a rolling Talos upgrade takes down
    /// at once; 1 when unset. Control planes always go one at a time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parallelism: Option<u32>,
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

/// `providerConfig` of the `oci` provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OciConfig {
    pub region: String,
    pub compartment_ocid: String,
    pub subnet_id: String,
    pub ocpus: f64,
    pub memory_gb: f64,
    /// The image to boot; the Talos image of the region when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability_domain: Option<String>,
}

/// `providerConfig` of the `openstack` provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OpenStackConfig {
    pub image_id: String,
    pub network_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability_zone: Option<String>,
    #[serde(default)]
    pub security_groups: Vec<String>,
}

/// One existing host of the `metal` provider, booted into maintenance mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetalHost {
    pub address: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
}

/// `providerConfig` of the `metal` provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MetalConfig {
    hosts: Vec<MetalHost>,
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
        let field = format!("{path}.providerConfig");
        match class.provider {
            Provider::Oci => check_oci(&field, config(&field, &self.provider_config)?)?,
            Provider::OpenStack => check_openstack(&field, config(&field, &self.provider_config)?)?,
            Provider::Metal => check_metal(&field, self.count, config(&field, &self.provider_config)?)?,
        }
        if let Some(version) = &self.talos_version {
            self.talos_version = Some(normalize_version(&format!("{path}.talosVersion"), version)?);
        }
        if self.max_parallelism == Some(0) {
            return Err(FieldError::new(format!("{path}.maxParallelism"), "must be at least 1"));
        }
        check_refs(&format!("{path}.configPatches"), &self.config_patches)
    }
}

fn config<T: DeserializeOwned>(field: &str, map: &Map<String, Value>) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(Value::Object(map.clone())).map_err(|err| {
        let path = err.path().to_string();
        let field = if path == "." { field.to_string() } else { format!("{field}.{path}") };
        FieldError::new(field, err.into_inner())
    })
}

/// Checks each present string of a provider's settings as [`CloudText`].
fn check_texts<'a>(
    field: &str,
    texts: impl IntoIterator<Item = (&'static str, Option<&'a String>)>,
    kind: CloudText,
) -> Result<(), FieldError> {
    for (name, value) in texts {
        if let Some(value) = value {
            validate_cloud_text(&format!("{field}.{name}"), value, kind)?;
        }
    }
    Ok(())
}

fn check_oci(field: &str, oci: OciConfig) -> Result<(), FieldError> {
    let texts = [
        ("region", Some(&oci.region)),
        ("compartmentOcid", Some(&oci.compartment_ocid)),
        ("subnetId", Some(&oci.subnet_id)),
        ("imageId", oci.image_id.as_ref()),
        ("availabilityDomain", oci.availability_domain.as_ref()),
    ];
    check_texts(field, texts, CloudText::Identifier)?;
    for (name, value) in [("ocpus", oci.ocpus), ("memoryGb", oci.memory_gb)] {
        if !(value.is_finite() && value > 0.0) {
            return Err(FieldError::new(format!("{field}.{name}"), "must be a positive number"));
        }
    }
    Ok(())
}

fn check_openstack(field: &str, openstack: OpenStackConfig) -> Result<(), FieldError> {
    let texts = [
        ("imageId", Some(&openstack.image_id)),
        ("networkId", Some(&openstack.network_id)),
        ("availabilityZone", openstack.availability_zone.as_ref()),
    ];
    check_texts(field, texts, CloudText::Identifier)?;
    for (index, group) in openstack.security_groups.iter().enumerate() {
        validate_cloud_text(&format!("{field}.securityGroups[{index}]"), group, CloudText::Name)?;
    }
    Ok(())
}

fn check_metal(field: &str, count: u32, metal: MetalConfig) -> Result<(), FieldError> {
    let mut seen = Vec::new();
    for (index, host) in metal.hosts.iter().enumerate() {
        let address = format!("{field}.hosts[{index}].address");
        let ip: IpAddr = host
            .address
            .parse()
            .map_err(|_| FieldError::new(&address, format!("{:?} is not an IP address", host.address)))?;
        if seen.contains(&ip) {
            return Err(FieldError::new(address, format!("{ip} is listed twice")));
        }
        seen.push(ip);
        if let Some(provider_id) = &host.provider_id {
            let field = format!("{field}.hosts[{index}].providerId");
            validate_cloud_text(&field, provider_id, CloudText::Identifier)?;
        }
    }
    if (metal.hosts.len() as u64) < u64::from(count) {
        return Err(FieldError::new(
            format!("{field}.hosts"),
            format!("lists {} hosts but count is {count}", metal.hosts.len()),
        ));
    }
    Ok(())
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

    const OCI: &str =
        r#""providerConfig":{"region":"r","compartmentOcid":"c","subnetId":"s","ocpus":2,"memoryGb":8}"#;

    #[test]
    fn oci_groups_are_checked() {
        assert!(
            group(&format!(
                r#"{{"role":"worker","count":2,"providerClass":"oci:VM.Standard.A1.Flex",{OCI}}}"#
            ))
            .is_ok()
        );
        let err = group(r#"{"role":"worker","count":2,"providerClass":"oci:x","providerConfig":{"region":"r","compartmentOcid":"c","subnetId":"s","ocpus":0,"memoryGb":8}}"#).unwrap_err();
        assert_eq!(err.field, "spec.providerConfig.ocpus");
        let err =
            group(r#"{"role":"worker","count":2,"providerClass":"oci:x","providerConfig":{"region":"r"}}"#)
                .unwrap_err();
        assert_eq!(err.field, "spec.providerConfig");
        assert!(err.message.contains("compartmentOcid"), "{err}");
        let err =
            group(r#"{"role":"worker","count":2,"providerClass":"oci:x","providerConfig":{"regoin":"r"}}"#)
                .unwrap_err();
        assert!(err.message.contains("regoin"), "{err}");
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
    fn metal_hosts_are_checked() {
        let ok = r#"{"role":"controlplane","count":1,"providerClass":"metal:bare","providerConfig":{"hosts":[{"address":"10.0.0.1","providerId":"rack1-a"}]}}"#;
        assert_eq!(group(ok).unwrap().metal_hosts()[0].address, "10.0.0.1");
        let short = r#"{"role":"worker","count":2,"providerClass":"metal:bare","providerConfig":{"hosts":[{"address":"10.0.0.1"}]}}"#;
        assert_eq!(group(short).unwrap_err().field, "spec.providerConfig.hosts");
        let bad = r#"{"role":"worker","count":1,"providerClass":"metal:bare","providerConfig":{"hosts":[{"address":"nope"}]}}"#;
        assert_eq!(group(bad).unwrap_err().field, "spec.providerConfig.hosts[0].address");
    }

    #[test]
    fn template_characters_are_refused_in_every_string_the_tool_reads() {
        let oci = r#"{"region":"eu-frankfurt-1","compartmentOcid":"ocid1.compartment.oc1..c","subnetId":"ocid1.subnet.oc1.eu-frankfurt-1.s","ocpus":2,"memoryGb":8,"imageId":"ocid1.image.oc1..i","availabilityDomain":"Uocm:EU-FRANKFURT-1-AD-1"}"#;
        let openstack = r#"{"imageId":"0b5d4d3e-6f5b-4c1e-9a0e-2f7c3d1b9e42","networkId":"net-1","availabilityZone":"nova","securityGroups":["talos","allow ssh"]}"#;
        let metal = r#"{"hosts":[{"address":"10.0.0.1","providerId":"rack1-a"}]}"#;
        let spec = |class: &str, config: &str| {
            format!(r#"{{"role":"worker","count":1,"providerClass":"{class}","providerConfig":{config}}}"#)
        };
        assert!(group(&spec("oci:VM.Standard.A1.Flex", oci)).is_ok());
        assert!(group(&spec("openstack:m1.large", openstack)).is_ok());
        assert!(group(&spec("metal:bare", metal)).is_ok());
        let attack = r#"${file(\"../../secrets.key\")}"#;
        let cases = [
            (spec(&format!("metal:{attack}"), metal), "spec.providerClass"),
            (
                spec("metal:bare", &metal.replace("rack1-a", attack)),
                "spec.providerConfig.hosts[0].providerId",
            ),
            (spec("metal:bare", &metal.replace("10.0.0.1", attack)), "spec.providerConfig.hosts[0].address"),
            (
                spec("oci:x", &oci.replace("eu-frankfurt-1\"", "%{ if true }x%{ endif }\"")),
                "spec.providerConfig.region",
            ),
            (
                spec("oci:x", &oci.replace("ocid1.compartment.oc1..c", attack)),
                "spec.providerConfig.compartmentOcid",
            ),
            (
                spec("oci:x", &oci.replace("ocid1.subnet.oc1.eu-frankfurt-1.s", "a\\nb")),
                "spec.providerConfig.subnetId",
            ),
            (spec("oci:x", &oci.replace("ocid1.image.oc1..i", "a\\\\b")), "spec.providerConfig.imageId"),
            (
                spec("oci:x", &oci.replace("Uocm:EU-FRANKFURT-1-AD-1", "a'b")),
                "spec.providerConfig.availabilityDomain",
            ),
            (
                spec("openstack:x", &openstack.replace("0b5d4d3e-6f5b-4c1e-9a0e-2f7c3d1b9e42", attack)),
                "spec.providerConfig.imageId",
            ),
            (spec("openstack:x", &openstack.replace("net-1", "{x}")), "spec.providerConfig.networkId"),
            (
                spec("openstack:x", &openstack.replace("nova", &"z".repeat(256))),
                "spec.providerConfig.availabilityZone",
            ),
            (
                spec("openstack:x", &openstack.replace("allow ssh", "a$b")),
                "spec.providerConfig.securityGroups[1]",
            ),
        ];
        for (body, field) in cases {
            let err = group(&body).unwrap_err();
            assert_eq!(err.field, field, "{body}: {err}");
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

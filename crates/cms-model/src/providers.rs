//! The `providerConfig` of each provider and its rules: what the
//! provisioning tool's configuration is built from, so every string is an id
//! or a name ([`validate_cloud_text`]) and every combination the cloud would
//! refuse is refused here first (422, naming the field).
//!
//! Cloud instances boot their machine config as user data, and each cloud
//! caps its size: [`Provider::user_data_limit`].

use std::net::IpAddr;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::node_group::{Provider, ProviderClass};
use crate::validate::{CloudText, FieldError, require, validate_cloud_text};

/// The most bytes of user data, as base64, that an `oci` instance takes:
/// OCI caps an instance's metadata at 32,000 bytes, and the user data is the
/// only key the service sets.
pub const OCI_USER_DATA_LIMIT: usize = 32_000;

/// The most bytes of user data, as base64, that an `openstack` instance
/// takes: Nova's cap on `user_data` once base64-encoded.
pub const OPENSTACK_USER_DATA_LIMIT: usize = 65_535;

/// The most network security groups of the operator's an `oci` group may
/// name: a VNIC takes at most five, and the service adds the tenant's own.
pub const OCI_MAX_NETWORK_SECURITY_GROUPS: usize = 4;

/// The longest OCI region identifier accepted.
const MAX_OCI_REGION: usize = 63;

impl Provider {
    /// The most bytes of user data, as base64, that an instance of this
    /// provider boots with; `None` for `metal`, whose configs go over the
    /// node API.
    pub fn user_data_limit(self) -> Option<usize> {
        match self {
            Provider::Oci => Some(OCI_USER_DATA_LIMIT),
            Provider::OpenStack => Some(OPENSTACK_USER_DATA_LIMIT),
            Provider::Metal => None,
        }
    }
}

/// Whether an OCI shape is flexible (its name ends with `.Flex`, such as
/// `VM.Standard.A1.Flex`): such a shape takes its OCPUs and memory from the
/// launch, while a fixed shape refuses them.
pub fn is_flex_shape(shape: &str) -> bool {
    shape.ends_with(".Flex")
}

/// `providerConfig` of the `oci` provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OciConfig {
    /// An OCI region identifier, such as `eu-frankfurt-1`: lowercase
    /// letters and digits in words joined by `-`, at most 63 characters.
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = r"^[a-z0-9]+(-[a-z0-9]+)*$", max_length = 63, example = "eu-frankfurt-1")
    )]
    pub region: String,
    pub compartment_ocid: String,
    pub subnet_id: String,
    /// The OCID of the image to boot. Talos publishes no OCI image: the
    /// operator imports one (the Image Factory's `oracle-amd64` or
    /// `oracle-arm64` disk image) as a custom image and names it here.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    #[serde(default)]
    pub image_id: String,
    /// The OCPUs of each instance: required with a flexible shape (`.Flex`),
    /// refused with a fixed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ocpus: Option<f64>,
    /// The memory of each instance in GB: required with a flexible shape
    /// (`.Flex`), refused with a fixed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_gb: Option<f64>,
    /// The one availability domain of the group's instances.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability_domain: Option<String>,
    /// The availability domains the group's instances spread over; not
    /// with `availabilityDomain`. With neither, they spread over the
    /// region's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability_domains: Option<Vec<String>>,
    /// The operator's own network security groups, which the instances
    /// join beside the tenant's; at most four.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network_security_group_ids: Vec<String>,
}

impl OciConfig {
    /// The `(ocpus, memoryGb)` of an instance of `shape`: `Some` for a
    /// flexible shape, `None` for a fixed one, which OCI refuses a shape
    /// config for. Valid after the node group was checked.
    pub fn flex(&self, shape: &str) -> Option<(f64, f64)> {
        match is_flex_shape(shape) {
            true => Some((self.ocpus?, self.memory_gb?)),
            false => None,
        }
    }

    /// The availability domains given, in order: `availabilityDomain` or
    /// `availabilityDomains`; empty when neither is (the region's are
    /// looked up).
    pub fn domains(&self) -> &[String] {
        match (&self.availability_domain, &self.availability_domains) {
            (Some(domain), _) => std::slice::from_ref(domain),
            (None, Some(domains)) => domains,
            (None, None) => &[],
        }
    }
}

/// `providerConfig` of the `openstack` provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OpenStackConfig {
    pub image_id: String,
    pub network_id: String,
    /// The one availability zone of the group's instances.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability_zone: Option<String>,
    /// The availability zones the group's instances spread over; not with
    /// `availabilityZone`. With neither, Nova picks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability_zones: Option<Vec<String>>,
    /// The operator's own security groups, by name, which the instances
    /// join beside the tenant's.
    #[serde(default)]
    pub security_groups: Vec<String>,
}

impl OpenStackConfig {
    /// The availability zones given, in order: `availabilityZone` or
    /// `availabilityZones`; empty when neither is.
    pub fn zones(&self) -> &[String] {
        match (&self.availability_zone, &self.availability_zones) {
            (Some(zone), _) => std::slice::from_ref(zone),
            (None, Some(zones)) => zones,
            (None, None) => &[],
        }
    }
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
pub(crate) struct MetalConfig {
    pub(crate) hosts: Vec<MetalHost>,
}

/// Checks the `providerConfig` at `field` of a group of `class` whose
/// machines, on metal, take `hosts_needed` hosts (machine `i` takes
/// `hosts[i]`, so its highest index + 1).
pub(crate) fn check_provider_config(
    field: &str,
    class: &ProviderClass,
    hosts_needed: u64,
    map: &Map<String, Value>,
) -> Result<(), FieldError> {
    match class.provider {
        Provider::Oci => check_oci(field, &class.shape, config(field, map)?),
        Provider::OpenStack => check_openstack(field, config(field, map)?),
        Provider::Metal => check_metal(field, hosts_needed, config(field, map)?),
    }
}

/// Reads a provider's settings, naming the field of a mistake.
pub(crate) fn config<T: DeserializeOwned>(field: &str, map: &Map<String, Value>) -> Result<T, FieldError> {
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

/// Checks a list of ids or names: each as [`CloudText`], none twice.
fn check_list(field: &str, values: &[String], kind: CloudText) -> Result<(), FieldError> {
    for (index, value) in values.iter().enumerate() {
        let item = format!("{field}[{index}]");
        validate_cloud_text(&item, value, kind)?;
        if values[..index].contains(value) {
            return Err(FieldError::new(item, format!("{value:?} is listed twice")));
        }
    }
    Ok(())
}

/// Checks a single value and its list form, of which at most one is given
/// and the list, when given, is not empty.
fn check_one_or_list(
    field: &str,
    (single, one): (&'static str, Option<&String>),
    (plural, list): (&'static str, Option<&Vec<String>>),
) -> Result<(), FieldError> {
    check_texts(field, [(single, one)], CloudText::Identifier)?;
    let Some(list) = list else { return Ok(()) };
    let list_field = format!("{field}.{plural}");
    if one.is_some() {
        return Err(FieldError::new(list_field, format!("give {single} or {plural}, not both")));
    }
    if list.is_empty() {
        return Err(FieldError::new(list_field, format!("must not be empty: leave {plural} out instead")));
    }
    check_list(&list_field, list, CloudText::Identifier)
}

fn check_oci(field: &str, shape: &str, oci: OciConfig) -> Result<(), FieldError> {
    check_region(&format!("{field}.region"), &oci.region)?;
    if oci.image_id.trim().is_empty() {
        return Err(FieldError::new(
            format!("{field}.imageId"),
            "is required: Talos publishes no OCI image, so import one (the Image Factory's \
             oracle-amd64 or oracle-arm64 disk image) as a custom image and give its OCID",
        ));
    }
    let texts = [
        ("compartmentOcid", Some(&oci.compartment_ocid)),
        ("subnetId", Some(&oci.subnet_id)),
        ("imageId", Some(&oci.image_id)),
    ];
    check_texts(field, texts, CloudText::Identifier)?;
    check_one_or_list(
        field,
        ("availabilityDomain", oci.availability_domain.as_ref()),
        ("availabilityDomains", oci.availability_domains.as_ref()),
    )?;
    let groups = format!("{field}.networkSecurityGroupIds");
    check_list(&groups, &oci.network_security_group_ids, CloudText::Identifier)?;
    if oci.network_security_group_ids.len() > OCI_MAX_NETWORK_SECURITY_GROUPS {
        return Err(FieldError::new(
            groups,
            format!(
                "lists {} groups, over the {OCI_MAX_NETWORK_SECURITY_GROUPS} allowed: a VNIC joins at most \
                 five network security groups, and one is the tenant's",
                oci.network_security_group_ids.len()
            ),
        ));
    }
    for (name, value) in [("ocpus", oci.ocpus), ("memoryGb", oci.memory_gb)] {
        let field = format!("{field}.{name}");
        match (is_flex_shape(shape), value) {
            (true, Some(value)) if value.is_finite() && value > 0.0 => {}
            (true, Some(_)) => return Err(FieldError::new(field, "must be a positive number")),
            (true, None) => {
                return Err(FieldError::new(field, format!("is required: flexible shape {shape} takes it")));
            }
            (false, Some(_)) => {
                return Err(FieldError::new(
                    field,
                    format!("fixed shape {shape} takes no {name}: OCI refuses a shape config for it"),
                ));
            }
            (false, None) => {}
        }
    }
    Ok(())
}

/// Checks an OCI region identifier: `^[a-z0-9]+(-[a-z0-9]+)*$`, at most 63
/// characters, such as `eu-frankfurt-1`.
fn check_region(field: &str, region: &str) -> Result<(), FieldError> {
    require(field, region)?;
    let word =
        |word: &str| !word.is_empty() && word.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if region.len() > MAX_OCI_REGION || !region.split('-').all(word) {
        return Err(FieldError::new(
            field,
            format!(
                "{region:?} is not an OCI region identifier such as \"eu-frankfurt-1\": lowercase \
                 letters and digits in words joined by '-', at most {MAX_OCI_REGION} characters"
            ),
        ));
    }
    Ok(())
}

fn check_openstack(field: &str, openstack: OpenStackConfig) -> Result<(), FieldError> {
    let texts = [("imageId", Some(&openstack.image_id)), ("networkId", Some(&openstack.network_id))];
    check_texts(field, texts, CloudText::Identifier)?;
    check_one_or_list(
        field,
        ("availabilityZone", openstack.availability_zone.as_ref()),
        ("availabilityZones", openstack.availability_zones.as_ref()),
    )?;
    check_list(&format!("{field}.securityGroups"), &openstack.security_groups, CloudText::Name)
}

fn check_metal(field: &str, hosts_needed: u64, metal: MetalConfig) -> Result<(), FieldError> {
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
    if (metal.hosts.len() as u64) < hosts_needed {
        let message = format!(
            "lists {} hosts but its machines need {hosts_needed}: machine <group>-<i> takes hosts[i]",
            metal.hosts.len()
        );
        return Err(FieldError::new(format!("{field}.hosts"), message));
    }
    Ok(())
}

#[cfg(test)]
mod tests;

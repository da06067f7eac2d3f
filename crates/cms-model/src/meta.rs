//! Object metadata and the common `{metadata, spec, status}` shape.

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::validate::{FieldError, validate_name};

/// The kinds of resource that the store keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Tenant,
    NodeGroup,
    ConfigPatch,
    Machine,
}

impl Kind {
    /// Every kind, in a fixed order.
    pub const ALL: [Kind; 4] = [Kind::Tenant, Kind::NodeGroup, Kind::ConfigPatch, Kind::Machine];

    /// The stable name used in storage and in messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Tenant => "Tenant",
            Kind::NodeGroup => "NodeGroup",
            Kind::ConfigPatch => "ConfigPatch",
            Kind::Machine => "Machine",
        }
    }

    /// Parses the name written by [`Kind::as_str`].
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

    /// Whether objects of this kind live inside a tenant.
    pub fn is_tenant_scoped(self) -> bool {
        self != Kind::Tenant
    }

    /// A lowercase noun for messages, such as "node group".
    pub fn noun(self) -> &'static str {
        match self {
            Kind::Tenant => "tenant",
            Kind::NodeGroup => "node group",
            Kind::ConfigPatch => "config patch",
            Kind::Machine => "machine",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Metadata common to every resource.
///
/// On input only `name`, `labels`, `annotations` and (on updates)
/// `resourceVersion` are read; the other fields are accepted so that an object
/// read from the API can be sent back as it is, and are set by the store.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectMeta {
    /// A DNS-1123 label: lowercase letters, digits and `-`, 1 to 63 characters.
    #[cfg_attr(
        feature = "openapi",
        schema(
            pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
            min_length = 1,
            max_length = 63,
            example = "demo"
        )
    )]
    pub name: String,
    /// Set by the server: 1 on create, +1 on every write. Required on PUT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finalizers: Vec<String>,
}

impl ObjectMeta {
    /// Metadata carrying only a name.
    pub fn named(name: impl Into<String>) -> ObjectMeta {
        ObjectMeta { name: name.into(), ..ObjectMeta::default() }
    }

    /// The `resourceVersion` a replacement was read at, which it must carry.
    pub fn read_at(&self) -> Result<u64, FieldError> {
        self.resource_version.ok_or_else(|| {
            FieldError::new(
                "metadata.resourceVersion",
                "is required on update; read the object and send its version back",
            )
        })
    }

    /// Checks the user-settable parts: the name and the label and annotation keys.
    pub fn validate(&self) -> Result<(), FieldError> {
        validate_name("metadata.name", &self.name)?;
        for key in self.labels.keys() {
            check_key("metadata.labels", key)?;
        }
        for key in self.annotations.keys() {
            check_key("metadata.annotations", key)?;
        }
        Ok(())
    }
}

fn check_key(field: &str, key: &str) -> Result<(), FieldError> {
    if key.is_empty() || key.len() > 253 || key.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(FieldError::new(
            format!("{field}[{key:?}]"),
            "keys must be 1 to 253 characters with no white space",
        ));
    }
    Ok(())
}

/// The common resource shape: `{metadata, spec, status}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resource<Spec, Status> {
    pub metadata: ObjectMeta,
    pub spec: Spec,
    #[serde(default)]
    pub status: Status,
}

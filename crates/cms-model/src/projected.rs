//! Projected resources: what the provisioning tool created, before enrichment.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One resource of the provisioning tool's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Projected {
    /// The tenant whose workspace holds the resource.
    pub tenant: String,
    /// `Machine`, `DataSource`, or another kind.
    pub kind: String,
    pub tf_type: String,
    pub name: String,
    /// For kind `Machine`: `address`, `providerId` and `shape`.
    pub spec: Value,
}

/// The list shape of the projected endpoints: a page of items, and how
/// many there are in all (decisions §7).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ProjectedList {
    pub items: Vec<Projected>,
    /// How many projected resources there are, on every page.
    pub total: u64,
}

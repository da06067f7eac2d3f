//! Machines: created by the reconciler from the provisioning tool's state.

use serde::{Deserialize, Serialize};

use crate::meta::Resource;
use crate::node_group::{NodeGroupSpec, Role};

/// A machine resource. Its `metadata.name` is the machine id.
pub type Machine = Resource<MachineSpec, MachineStatus>;

/// What the provisioning tool reported about a machine.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MachineSpec {
    /// The node API endpoint, `IP:port`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub management_address: Option<String>,
    #[serde(default)]
    pub connected: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<String>,
    /// The node group that owns the machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_group: Option<String>,
}

/// The observed state of a machine.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MachineStatus {
    /// `initializing`, `provisioning`, `ready`, `upgrading`, `deleting`,
    /// `off`, or another stage; the list is open-ended.
    #[serde(default)]
    pub stage: String,
    #[serde(default)]
    pub ready: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub talos_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    /// The machine's own last error, on one line: why the service cannot
    /// configure or reach its node (a failed connection and its cause, the
    /// node's refusal of its config, a host that does not answer as the
    /// tenant's node); absent when nothing is wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The host of `IP:PORT`, `[IPv6]:PORT` or `scheme://IP:PORT` (a machine's
/// management address, an etcd peer URL), without brackets.
pub fn host_of(address: &str) -> String {
    let rest = address.split_once("://").map_or(address, |(_, rest)| rest);
    let host = match rest.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
        _ => rest,
    };
    host.trim_start_matches('[').trim_end_matches(']').to_string()
}

impl Machine {
    /// The machine's IP: its management address without the port.
    pub fn ip(&self) -> Option<String> {
        self.spec.management_address.as_deref().map(host_of)
    }

    /// The machine's role: its node group's, found in `groups`, or for a
    /// machine that names no group, the role it reported. `None` when its
    /// group is not in `groups` or it names no group and reported none.
    /// Every part of `cms` that needs a machine's role asks this.
    pub fn role(&self, groups: &[NodeGroupSpec]) -> Option<Role> {
        match &self.spec.node_group {
            Some(name) => groups.iter().find(|group| group.name == *name).map(|group| group.role),
            None => self.status.role,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_of_addresses_and_urls() {
        assert_eq!(host_of("10.0.0.1:50000"), "10.0.0.1");
        assert_eq!(host_of("[fd00::1]:50000"), "fd00::1");
        assert_eq!(host_of("https://10.0.0.2:2380"), "10.0.0.2");
        assert_eq!(host_of("https://[fd00::2]:2380"), "fd00::2");
        assert_eq!(host_of("10.0.0.3"), "10.0.0.3");
    }
}

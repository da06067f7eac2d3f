//! The tenant: one Talos cluster.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::backups::{BackupSchedule, BackupsStatus};
use crate::drift::DriftPolicy;
use crate::installer::check_installer;
use crate::meta::Resource;
use crate::node_group::NodeGroupSpec;
use crate::validate::{FieldError, Validate, normalize_version, validate_cidr, validate_name};

/// The pod network used when a tenant names none.
pub const DEFAULT_POD_NETWORK: &str = "10.244.0.0/16";
/// The service network used when a tenant names none.
pub const DEFAULT_SERVICE_NETWORK: &str = "10.96.0.0/12";

/// A tenant resource.
pub type Tenant = Resource<TenantSpec, TenantStatus>;

/// The desired state of a tenant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TenantSpec {
    /// `MAJOR.MINOR.PATCH`; a leading `v` is dropped.
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = r"^v?[0-9]{1,9}\.[0-9]{1,9}\.[0-9]{1,9}$", example = "1.31.0")
    )]
    pub kubernetes_version: String,
    /// `MAJOR.MINOR.PATCH`, a supported Talos release; a leading `v` is dropped.
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = r"^v?[0-9]{1,9}\.[0-9]{1,9}\.[0-9]{1,9}$", example = "1.14.0")
    )]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub talos_version: Option<String>,
    /// The repository of the installer image machines install and upgrade
    /// Talos with, without tag or digest (the service appends
    /// `:v<talosVersion>`); `ghcr.io/siderolabs/installer` when neither this
    /// nor `schematic` is set. A node group's choice overrides it.
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
    /// An Image Factory schematic id, meaning the installer
    /// `factory.talos.dev/installer/<schematic>`, so that machines keep the
    /// schematic's system extensions through upgrades. At most one of
    /// `installerImage` and `schematic`.
    #[cfg_attr(
        feature = "openapi",
        schema(
            pattern = r"^[0-9a-f]{64}$",
            example = "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba"
        )
    )]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schematic: Option<String>,
    /// The cluster's API server, an `https://` URL.
    #[cfg_attr(feature = "openapi", schema(pattern = r"^https://", example = "https://10.0.0.10:6443"))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint: Option<String>,
    #[serde(default)]
    pub pod_network: Vec<String>,
    #[serde(default)]
    pub service_network: Vec<String>,
    /// The tenant's node groups. On input, absent means "leave the groups as
    /// they are" and a list replaces the whole set; on output it is always the
    /// current set, sorted by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_groups: Option<Vec<NodeGroupSpec>>,
    #[serde(default)]
    pub config_patches: Vec<ConfigPatchRef>,
    /// Scheduled etcd backups; none when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backups: Option<BackupSchedule>,
    /// What the service does when the infrastructure drifted from the last
    /// apply; `{"mode": "report"}` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<DriftPolicy>,
}

/// A reference to a config patch of the same tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ConfigPatchRef {
    pub name: String,
}

/// The lifecycle phase of a tenant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    #[default]
    Pending,
    Provisioning,
    Active,
    Updating,
    Deleting,
    Failed,
}

/// A Kubernetes-style status condition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Condition {
    #[serde(rename = "type")]
    pub kind: String,
    pub status: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
    pub last_transition_time: DateTime<Utc>,
}

/// The observed state of a tenant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TenantStatus {
    #[serde(default)]
    pub phase: Phase,
    #[serde(default)]
    pub ready: bool,
    /// Absent when the tenant is ready; otherwise its first blocker, on one
    /// line of at most 240 characters an operator can act on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default)]
    pub observed_generation: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// The tenant's etcd as the reconciler last saw it, once bootstrapped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd: Option<EtcdStatus>,
    /// The tenant's etcd backups: the last success and failure, the next
    /// scheduled run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backups: Option<BackupsStatus>,
    /// Who holds the tenant's tool state lock, and since when: written as a
    /// run of the tool starts, cleared as it ends, so that the lock of a
    /// replica that died with it stays visible until it is released.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_lock: Option<StateLock>,
    /// The rotation of the tenant's certificate authorities under way, or
    /// the last one, done (`docs/ca-rotation.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_rotation: Option<CaRotationStatus>,
}

/// The tenant annotation by which an administrator's rotation of its CAs
/// wakes the reconciler (`POST /tenants/{name}/rotate-ca`): when it was
/// asked (RFC 3339). The sealed bundle holds the rotation itself.
pub const CA_ROTATION_ANNOTATION: &str = "service.io/ca-rotation";

/// Where a rotation of a tenant's CAs stands (`docs/ca-rotation.md`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CaRotationStatus {
    /// The authorities rotated: `os` (the Talos API's CA) and or
    /// `kubernetes`.
    pub authorities: Vec<String>,
    /// `generated`, `accepting`, `switched`, `swapping`, `dropping`, or
    /// `done`.
    pub phase: String,
    /// When the phase began.
    pub since: DateTime<Utc>,
    /// What the phase waits for, when it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The tenant annotation by which an administrator asks for its tool state
/// lock to be released (`DELETE /tenants/{name}/state-lock`): `stale` (its
/// holder is gone) or `force`. The replica reconciling the tenant carries it
/// out and removes it.
pub const RELEASE_STATE_LOCK_ANNOTATION: &str = "service.io/release-state-lock";

/// The holder of a tenant's tool state lock (`docs/provisioning.md`, State
/// locks).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StateLock {
    /// The replica running the tool: `<host>/<pid>/<random>`.
    pub holder: String,
    /// The tool's operation: `apply` or `destroy`.
    pub operation: String,
    /// When the run started.
    pub since: DateTime<Utc>,
}

/// A tenant's etcd: its members, as a control plane lists them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EtcdStatus {
    #[serde(default)]
    pub members: Vec<EtcdMemberStatus>,
    /// The member id of the leader, in hex, when a member named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,
}

/// One etcd member.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EtcdMemberStatus {
    /// The member id, in hex, as `talosctl etcd members` prints it.
    pub id: String,
    pub hostname: String,
    /// The machine the member runs on, when one of the tenant's matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    #[serde(default)]
    pub learner: bool,
    /// It answered `EtcdStatus` without errors.
    #[serde(default)]
    pub healthy: bool,
}

impl Validate for TenantSpec {
    fn normalize(&mut self, path: &str) -> Result<(), FieldError> {
        self.kubernetes_version =
            normalize_version(&format!("{path}.kubernetesVersion"), &self.kubernetes_version)?;
        if let Some(version) = &self.talos_version {
            self.talos_version = Some(normalize_version(&format!("{path}.talosVersion"), version)?);
        }
        check_installer(path, self.installer_image.as_deref(), self.schematic.as_deref())?;
        if let Some(endpoint) = &self.control_plane_endpoint {
            check_endpoint(&format!("{path}.controlPlaneEndpoint"), endpoint)?;
        }
        normalize_networks(&format!("{path}.podNetwork"), &mut self.pod_network, DEFAULT_POD_NETWORK)?;
        normalize_networks(
            &format!("{path}.serviceNetwork"),
            &mut self.service_network,
            DEFAULT_SERVICE_NETWORK,
        )?;
        if let Some(groups) = &mut self.node_groups {
            for (index, group) in groups.iter_mut().enumerate() {
                let field = format!("{path}.nodeGroups[{index}]");
                validate_name(&format!("{field}.name"), &group.name)?;
                group.normalize(&field)?;
            }
            let mut names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
            names.sort_unstable();
            if let Some(pair) = names.windows(2).find(|pair| pair[0] == pair[1]) {
                return Err(FieldError::new(
                    format!("{path}.nodeGroups"),
                    format!("node group {:?} appears twice", pair[0]),
                ));
            }
            groups.sort_by(|a, b| a.name.cmp(&b.name));
        }
        if let Some(backups) = &self.backups {
            backups.check(&format!("{path}.backups"))?;
        }
        check_refs(&format!("{path}.configPatches"), &self.config_patches)
    }
}

/// Checks the names in a list of config patch references.
pub(crate) fn check_refs(field: &str, refs: &[ConfigPatchRef]) -> Result<(), FieldError> {
    for (index, reference) in refs.iter().enumerate() {
        validate_name(&format!("{field}[{index}].name"), &reference.name)?;
    }
    Ok(())
}

fn normalize_networks(field: &str, networks: &mut Vec<String>, default: &str) -> Result<(), FieldError> {
    if networks.is_empty() {
        networks.push(default.to_string());
    }
    for (index, cidr) in networks.iter().enumerate() {
        validate_cidr(&format!("{field}[{index}]"), cidr)?;
    }
    Ok(())
}

fn check_endpoint(field: &str, endpoint: &str) -> Result<(), FieldError> {
    let rest = endpoint.strip_prefix("https://").ok_or_else(|| {
        FieldError::new(field, format!("{endpoint:?} must be an https:// URL such as https://10.0.0.1:6443"))
    })?;
    let host = rest.trim_end_matches('/');
    if host.is_empty() || host.contains(['/', '?', '#', ' ', '@']) {
        return Err(FieldError::new(field, format!("{endpoint:?} must be https://HOST[:PORT]")));
    }
    Ok(())
}

impl TenantStatus {
    /// Sets the condition `kind` to `value` with its reason and message,
    /// keeping its transition time when its status stays the same.
    pub fn set_condition(&mut self, kind: &str, value: bool, reason: &str, message: &str) {
        let value = if value { "True" } else { "False" };
        match self.conditions.iter_mut().find(|condition| condition.kind == kind) {
            Some(condition) => {
                if condition.status != value {
                    condition.last_transition_time = Utc::now();
                }
                condition.status = value.to_string();
                condition.reason = reason.to_string();
                condition.message = message.to_string();
            }
            None => self.conditions.push(Condition {
                kind: kind.to_string(),
                status: value.to_string(),
                reason: reason.to_string(),
                message: message.to_string(),
                last_transition_time: Utc::now(),
            }),
        }
    }
}

impl Tenant {
    /// Normalizes and checks a tenant from a request body.
    pub fn prepare(&mut self) -> Result<(), FieldError> {
        self.metadata.validate()?;
        self.spec.normalize("spec")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_json;

    fn spec(json: &str) -> Result<TenantSpec, FieldError> {
        let mut spec: TenantSpec = parse_json(json.as_bytes()).expect("parses");
        spec.normalize("spec").map(|_| spec)
    }

    #[test]
    fn defaults_fill_networks_and_versions_drop_v() {
        let spec = spec(r#"{"kubernetesVersion":"v1.31.1","talosVersion":"v1.9.0"}"#).unwrap();
        assert_eq!(spec.kubernetes_version, "1.31.1");
        assert_eq!(spec.talos_version.as_deref(), Some("1.9.0"));
        assert_eq!(spec.pod_network, [DEFAULT_POD_NETWORK]);
        assert_eq!(spec.service_network, [DEFAULT_SERVICE_NETWORK]);
    }

    #[test]
    fn bad_fields_are_named() {
        let check = |json: &str, field: &str| {
            let err = spec(json).unwrap_err();
            assert_eq!(err.field, field, "{json}: {err}");
        };
        check(r#"{"kubernetesVersion":"1.31"}"#, "spec.kubernetesVersion");
        check(r#"{"kubernetesVersion":"1.31.0","podNetwork":["x"]}"#, "spec.podNetwork[0]");
        check(
            r#"{"kubernetesVersion":"1.31.0","controlPlaneEndpoint":"10.0.0.1"}"#,
            "spec.controlPlaneEndpoint",
        );
        check(
            r#"{"kubernetesVersion":"1.31.0","nodeGroups":[{"name":"w","role":"worker","count":0,"providerClass":"metal:m","providerConfig":{"hosts":[]}}]}"#,
            "spec.nodeGroups[0].count",
        );
        check(
            r#"{"kubernetesVersion":"1.31.0","configPatches":[{"name":"Bad"}]}"#,
            "spec.configPatches[0].name",
        );
    }

    #[test]
    fn duplicate_groups_are_rejected() {
        let group = r#"{"name":"w","role":"worker","count":1,"providerClass":"metal:m","providerConfig":{"hosts":[{"address":"10.0.0.1"}]}}"#;
        let json = format!(r#"{{"kubernetesVersion":"1.31.0","nodeGroups":[{group},{group}]}}"#);
        assert_eq!(spec(&json).unwrap_err().field, "spec.nodeGroups");
    }
}

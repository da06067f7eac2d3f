//! The resources of `cms`: their wire shape, their defaults and their validation.
//!
//! Every resource has the shape `{metadata, spec, status}` ([`Resource`]). Field
//! names are camelCase on the wire and unknown fields are rejected everywhere,
//! so a typo such as `"cout": 3` is an error rather than a silent default.
//!
//! The kinds are in `tenant.rs`, `node_group.rs`, `config_patch.rs` and
//! `machine.rs`, where [`Machine::role`] is the one answer to "what role is
//! this machine". `validate.rs` holds the field checks, whose [`FieldError`]
//! names the field; `parse.rs` tells malformed JSON (400) from JSON that
//! breaks a rule (422); `list.rs` pages lists.
//!
//! `backups.rs` holds a tenant's backup schedule and what became of it;
//! `tool_run.rs` ([`ToolRun`]) the provisioning tool's last output of one
//! command, as support bundles show it.
//! `drift.rs` holds a tenant's drift policy (`spec.drift`: report or correct).
//!
//! `installer.rs` decides a machine's installer image ([`installer_image`]:
//! the default, an Image Factory schematic's or a named repository, the
//! group's choice over the tenant's) and checks `installerImage` and
//! `schematic`.
//!
//! `providers.rs` holds each provider's `providerConfig` and its rules, and
//! the user-data limits of the clouds.
//!
//! `selector.rs` parses and matches label selectors ([`LabelSelector`]), as
//! Kubernetes does.
//!
//! `grant.rs` holds grants ([`Grant`]): `view` or `edit` on tenants chosen
//! by names and a selector, for users, groups and workload subjects; `user.rs`
//! a user's global role, which may be `none` ([`global_role`]).
//!
//! [`patch_refs`] decides a tenant's `ConfigPatchesResolved` condition from
//! its refs and the patches that exist.
//!
//! The crate does no IO: it is shared by the server, the store, the reconciler
//! and the command-line client.

mod audit;
mod backups;
mod config_patch;
mod drift;
mod grant;
mod installer;
mod list;
mod machine;
mod meta;
mod node_group;
mod parse;
pub mod patch_refs;
mod projected;
mod providers;
mod selector;
mod tenant;
mod tool_run;
mod user;
mod validate;

pub use audit::{ANONYMOUS, AuditEntry, AuditOutcome, AuditRecord, AuditTarget};
pub use backups::{Backup, BackupFailure, BackupSchedule, BackupSuccess, BackupsStatus, MAX_RETAIN};
pub use config_patch::{ConfigPatch, ConfigPatchSpec, ConfigPatchStatus, PatchFormat, PatchTarget};
pub use drift::{DriftMode, DriftPolicy};
pub use grant::{
    Grant, GrantSpec, GrantStatus, MAX_GRANT_SUBJECTS, MAX_GRANT_TENANT_NAMES, MAX_SELECTOR,
    MAX_SUBJECT_NAME, Subject, SubjectKind, TenantSet,
};
pub use installer::{
    DEFAULT_INSTALLER_REPOSITORY, IMAGE_FACTORY_INSTALLER_REPOSITORY, MAX_INSTALLER_IMAGE, SCHEMATIC_LENGTH,
    installer_image,
};
pub use list::{List, Page, PageError};
pub use machine::{Machine, MachineSpec, MachineStatus, host_of};
pub use meta::{Kind, ObjectMeta, Resource};
pub use node_group::{
    Autoscaling, MAX_REMOVED_MACHINES, NodeGroup, NodeGroupSpec, NodeGroupStatus, Provider, ProviderClass,
    Role, machine_id, machine_index,
};
pub use parse::{ParseError, parse_json};
pub use projected::{Projected, ProjectedList};
pub use providers::{
    MetalHost, OCI_MAX_NETWORK_SECURITY_GROUPS, OCI_USER_DATA_LIMIT, OPENSTACK_USER_DATA_LIMIT, OciConfig,
    OpenStackConfig, is_flex_shape,
};
pub use selector::{LabelSelector, MAX_REQUIREMENTS, MAX_SELECTOR_BYTES, SelectorError};
pub use tenant::{
    CA_ROTATION_ANNOTATION, CaRotationStatus, Condition, ConfigPatchRef, DEFAULT_POD_NETWORK,
    DEFAULT_SERVICE_NETWORK, EtcdMemberStatus, EtcdStatus, Phase, RELEASE_STATE_LOCK_ANNOTATION, StateLock,
    Tenant, TenantSpec, TenantStatus,
};
pub use tool_run::{TOOL_OUTPUT_LIMIT, ToolCommand, ToolRun};
pub use user::{
    ApiToken, ApiTokenSpec, ApiTokenStatus, LoginRequest, LoginResponse, MAX_PASSWORD_BYTES, MAX_TOKEN_HOURS,
    MIN_PASSWORD_CHARS, NO_ROLE, SsoStartRequest, SsoStartResponse, SsoTokenRequest, User, UserRole,
    UserSpec, UserStatus, global_role, validate_password,
};
pub use validate::{FieldError, Validate, normalize_version, validate_name};

//! The permission matrix of decisions §3, kept as data in one place.

use cms_model::UserRole;

/// An action a route needs permission for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Permission {
    /// Any GET on tenants, node groups, machines, config patches, projected
    /// state and health, and the watch.
    Read,
    /// Download a kubeconfig or talosconfig; the credentials follow the role.
    ReadClientConfig,
    /// Read a rendered machine config, which holds secrets.
    ReadMachineConfig,
    /// Create or update tenants, node groups and config patches.
    Write,
    /// Delete node groups, config patches and machines.
    Delete,
    /// Delete tenants.
    DeleteTenant,
    /// Write machine status (the controller).
    WriteMachineStatus,
    /// Read a tenant's secrets bundle (break-glass).
    ReadSecrets,
    /// Manage users, and other users' tokens.
    ManageUsers,
    /// Manage one's own API tokens.
    OwnTokens,
    /// Read the audit log.
    ReadAudit,
    /// Restore a tenant's etcd from a backup, which replaces the cluster's
    /// state, or delete a backup; both lose what cannot be got back.
    RestoreBackup,
    /// Read a machine's service logs and kernel log, or a tenant's support
    /// bundle; logs can hold secrets, so every read is audited.
    ReadLogs,
    /// Release a tenant's tool state lock by hand (break-glass).
    ReleaseStateLock,
    /// Download a tenant's cluster autoscaler identity: a client
    /// certificate that lists and resizes the tenant's node groups.
    DownloadAutoscalerIdentity,
    /// Rotate a tenant's certificate authorities (`docs/ca-rotation.md`).
    RotateCa,
}

const ALL: &[UserRole] = &[UserRole::View, UserRole::Edit, UserRole::Admin];
const EDITORS: &[UserRole] = &[UserRole::Edit, UserRole::Admin];
const ADMINS: &[UserRole] = &[UserRole::Admin];

/// The roles a grant may give on tenants; `admin` stays global.
pub(crate) const GRANTABLE: &[UserRole] = &[UserRole::View, UserRole::Edit];

/// Which roles hold each permission.
const MATRIX: &[(Permission, &[UserRole])] = &[
    (Permission::Read, ALL),
    (Permission::ReadClientConfig, ALL),
    (Permission::ReadMachineConfig, EDITORS),
    (Permission::Write, EDITORS),
    (Permission::Delete, EDITORS),
    (Permission::DeleteTenant, ADMINS),
    (Permission::WriteMachineStatus, ADMINS),
    (Permission::ReadSecrets, ADMINS),
    (Permission::ManageUsers, ADMINS),
    (Permission::OwnTokens, ALL),
    (Permission::ReadAudit, ADMINS),
    (Permission::RestoreBackup, ADMINS),
    (Permission::ReadLogs, EDITORS),
    (Permission::ReleaseStateLock, ADMINS),
    (Permission::DownloadAutoscalerIdentity, ADMINS),
    (Permission::RotateCa, ADMINS),
];

/// What a caller with no global role holds beside what its grants give it
/// on tenants: its own API tokens.
const WITHOUT_ROLE: &[Permission] = &[Permission::OwnTokens];

impl Permission {
    /// Every permission.
    pub const ALL: [Permission; 16] = [
        Permission::Read,
        Permission::ReadClientConfig,
        Permission::ReadMachineConfig,
        Permission::Write,
        Permission::Delete,
        Permission::DeleteTenant,
        Permission::WriteMachineStatus,
        Permission::ReadSecrets,
        Permission::ManageUsers,
        Permission::OwnTokens,
        Permission::ReadAudit,
        Permission::RestoreBackup,
        Permission::ReadLogs,
        Permission::ReleaseStateLock,
        Permission::DownloadAutoscalerIdentity,
        Permission::RotateCa,
    ];

    /// Whether `role` holds this permission.
    pub fn allows(self, role: UserRole) -> bool {
        MATRIX.iter().any(|(permission, roles)| *permission == self && roles.contains(&role))
    }

    /// Whether a caller whose global role is `role` holds this permission
    /// everywhere; a caller with none holds only its own tokens.
    pub fn allows_global(self, role: Option<UserRole>) -> bool {
        match role {
            Some(role) => self.allows(role),
            None => WITHOUT_ROLE.contains(&self),
        }
    }

    /// Whether a grant can give this permission on a tenant: the grantable
    /// roles (`view`, `edit`) hold it there.
    pub fn grantable(self) -> bool {
        GRANTABLE.iter().any(|role| self.allows(*role))
    }

    /// The action, for messages.
    pub fn action(self) -> &'static str {
        match self {
            Permission::Read => "read resources",
            Permission::ReadClientConfig => "download client configuration",
            Permission::ReadMachineConfig => "read machine configs",
            Permission::Write => "create or update resources",
            Permission::Delete => "delete resources",
            Permission::DeleteTenant => "delete tenants",
            Permission::WriteMachineStatus => "write machine status",
            Permission::ReadSecrets => "read tenant secrets",
            Permission::ManageUsers => "manage users",
            Permission::OwnTokens => "manage its tokens",
            Permission::ReadAudit => "read the audit log",
            Permission::RestoreBackup => "restore or delete tenant backups",
            Permission::ReadLogs => "read machine logs",
            Permission::ReleaseStateLock => "release tool state locks",
            Permission::DownloadAutoscalerIdentity => "download autoscaler identities",
            Permission::RotateCa => "rotate tenants' certificate authorities",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_permission_is_in_the_matrix() {
        for permission in Permission::ALL {
            assert!(MATRIX.iter().any(|(p, _)| *p == permission), "{permission:?}");
            assert!(permission.allows(UserRole::Admin), "admin may do everything: {permission:?}");
        }
    }

    #[test]
    fn roles_follow_decisions() {
        use Permission::*;
        let view: Vec<_> = Permission::ALL.into_iter().filter(|p| p.allows(UserRole::View)).collect();
        assert_eq!(view, [Read, ReadClientConfig, OwnTokens]);
        let edit: Vec<_> = Permission::ALL.into_iter().filter(|p| p.allows(UserRole::Edit)).collect();
        assert_eq!(edit, [Read, ReadClientConfig, ReadMachineConfig, Write, Delete, OwnTokens, ReadLogs]);
        let none: Vec<_> = Permission::ALL.into_iter().filter(|p| p.allows_global(None)).collect();
        assert_eq!(none, [OwnTokens], "with no global role, only one's own tokens");
        let granted: Vec<_> = Permission::ALL.into_iter().filter(|p| p.grantable()).collect();
        assert_eq!(granted, [Read, ReadClientConfig, ReadMachineConfig, Write, Delete, OwnTokens, ReadLogs]);
    }
}

//! Who is calling: [`Caller`], with the role its permissions follow, how it
//! proved itself ([`Credential`]) and where its identity comes from
//! ([`Source`]).

use cms_model::UserRole;

use crate::error::AuthError;
use crate::grants::{Grants, Labels, role_on, tenant_labels};
use crate::permission::Permission;

/// How a caller proved who it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// A login token, from a password or a sign-in at the identity provider.
    Login,
    /// An API token, by its public id.
    ApiToken { id: String },
    /// A token of a trusted workload issuer.
    Workload,
}

/// Where a caller's identity comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A user of this server's own store.
    Local,
    /// A user signed in at the OpenID Connect provider `issuer` as `subject`.
    Sso { issuer: String, subject: String },
    /// A workload whose token `issuer` signed for `subject`.
    Workload { issuer: String, subject: String },
}

impl Source {
    /// `local`, `oidc` or `workload`.
    pub fn kind(&self) -> &'static str {
        match self {
            Source::Local => "local",
            Source::Sso { .. } => "oidc",
            Source::Workload { .. } => "workload",
        }
    }

    /// The issuer, for identities from elsewhere.
    pub fn issuer(&self) -> Option<&str> {
        match self {
            Source::Local => None,
            Source::Sso { issuer, .. } | Source::Workload { issuer, .. } => Some(issuer),
        }
    }

    /// The subject at the issuer, for identities from elsewhere.
    pub fn subject(&self) -> Option<&str> {
        match self {
            Source::Local => None,
            Source::Sso { subject, .. } | Source::Workload { subject, .. } => Some(subject),
        }
    }
}

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The user name: a local user's, the identity provider's user name
    /// claim, or a workload's subject.
    pub user: String,
    /// The global role: what the caller may do on every tenant and beyond
    /// them. `None` for a caller whose access is its grants' alone.
    pub role: Option<UserRole>,
    pub credential: Credential,
    pub source: Source,
    /// The user's groups at the identity provider; empty for others.
    pub groups: Vec<String>,
    /// The grants that name the caller, which give it roles on tenants
    /// beside its global role; empty for an admin, whom they cannot raise.
    pub grants: Grants,
}

impl Caller {
    /// A local user, with its global role or none.
    pub fn local(user: &str, role: impl Into<Option<UserRole>>, credential: Credential) -> Caller {
        Caller {
            user: user.to_string(),
            role: role.into(),
            credential,
            source: Source::Local,
            groups: Vec::new(),
            grants: Grants::default(),
        }
    }

    /// The name of the caller's global role, `none` when it has none.
    pub fn role_name(&self) -> &'static str {
        UserRole::global_name(self.role)
    }

    /// The user name and groups a kubeconfig's certificate gives this
    /// caller besides its role's group: none for a local user, whose
    /// certificate names its role; `oidc:<user>` with its groups as
    /// `oidc:<group>` for a single sign-on user; `workload:<subject>` for a
    /// workload.
    pub fn kube_identity(&self) -> (Option<String>, Vec<String>) {
        use crate::sso::GROUP_PREFIX;
        match &self.source {
            Source::Local => (None, Vec::new()),
            Source::Sso { .. } => (
                Some(format!("{GROUP_PREFIX}{}", self.user)),
                self.groups.iter().map(|group| format!("{GROUP_PREFIX}{group}")).collect(),
            ),
            Source::Workload { subject, .. } => (Some(format!("workload:{subject}")), Vec::new()),
        }
    }

    /// Fails unless the caller's global role holds `permission`.
    pub fn require(&self, permission: Permission) -> Result<(), AuthError> {
        if permission.allows_global(self.role) {
            return Ok(());
        }
        Err(AuthError::Forbidden { role: self.role_name(), action: permission.action() })
    }

    /// The caller's role on the tenant `name` labelled `labels`: its global
    /// role joined with its grants that cover the tenant; `None` when it has
    /// no access to the tenant at all.
    pub fn role_on(&self, name: &str, labels: &Labels) -> Option<UserRole> {
        role_on(self.role, &self.grants, name, labels)
    }

    /// The caller's role on the stored tenant `tenant`; its labels are read
    /// only when a grant could need them.
    pub fn role_on_tenant(&self, tenant: &cms_store::Object) -> Option<UserRole> {
        if self.grants.is_empty() || self.role == Some(UserRole::Admin) {
            return self.role;
        }
        self.role_on(&tenant.key.name, &tenant_labels(tenant))
    }

    /// Whether the caller holds `permission` on the stored tenant `tenant`.
    pub fn holds_on(&self, permission: Permission, tenant: &cms_store::Object) -> bool {
        self.holds_everywhere(permission)
            || self.role_on_tenant(tenant).is_some_and(|role| permission.allows(role))
    }

    /// The names of the tenants among `tenants` on which the caller holds
    /// `permission`; `None` when it holds it on every tenant.
    pub fn tenants_holding<'a>(
        &self,
        permission: Permission,
        tenants: impl IntoIterator<Item = &'a cms_store::Object>,
    ) -> Option<std::collections::HashSet<String>> {
        if self.holds_everywhere(permission) {
            return None;
        }
        let held = tenants.into_iter().filter(|tenant| self.holds_on(permission, tenant));
        Some(held.map(|tenant| tenant.key.name.clone()).collect())
    }

    /// Whether the caller holds `permission` on every tenant, by its global role.
    pub fn holds_everywhere(&self, permission: Permission) -> bool {
        permission.allows_global(self.role)
    }

    /// Whether the caller holds `permission` on some tenant, or may: by its
    /// global role, or by a grant whose role holds it.
    pub fn holds_somewhere(&self, permission: Permission) -> bool {
        self.holds_everywhere(permission) || self.grants.iter().any(|grant| permission.allows(grant.role))
    }

    /// Fails unless the caller holds `permission` on some tenant
    /// ([`Caller::holds_somewhere`]), with the global role's refusal.
    pub fn require_somewhere(&self, permission: Permission) -> Result<(), AuthError> {
        match self.holds_somewhere(permission) {
            true => Ok(()),
            false => self.require(permission),
        }
    }

    /// Fails unless the caller's role on the tenant `name` labelled
    /// `labels` holds `permission`: a tenant it has no access to at all is
    /// [`AuthError::TenantNotFound`], as a missing one; one it sees but may
    /// not change this way is [`AuthError::Forbidden`].
    pub fn require_on(&self, permission: Permission, name: &str, labels: &Labels) -> Result<(), AuthError> {
        match self.role_on(name, labels) {
            None => Err(AuthError::TenantNotFound { tenant: name.to_string() }),
            Some(role) if permission.allows(role) => Ok(()),
            Some(role) => Err(AuthError::Forbidden { role: role.as_str(), action: permission.action() }),
        }
    }

    /// Fails unless the caller is the local user `user` or may manage users.
    /// A caller from elsewhere that bears a local user's name is not that
    /// user.
    pub fn require_self_or_admin(&self, user: &str) -> Result<(), AuthError> {
        if self.user == user && self.source == Source::Local {
            return self.require(Permission::OwnTokens);
        }
        if self.source != Source::Local && self.require(Permission::ManageUsers).is_err() {
            return Err(AuthError::NotAllowed(
                "API tokens belong to local users; single sign-on users and workloads sign in instead".into(),
            ));
        }
        self.require(Permission::ManageUsers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_local_user_owns_its_tokens() {
        let local = Caller::local("alice", UserRole::View, Credential::Login);
        assert!(local.require_self_or_admin("alice").is_ok());
        assert!(local.require_self_or_admin("bob").is_err());
        let sso = Caller {
            source: Source::Sso { issuer: "https://idp".into(), subject: "s".into() },
            ..local.clone()
        };
        assert!(matches!(sso.require_self_or_admin("alice"), Err(AuthError::NotAllowed(_))));
        let admin = Caller { role: Some(UserRole::Admin), ..sso };
        assert!(admin.require_self_or_admin("bob").is_ok(), "an admin manages users wherever it comes from");
    }
}

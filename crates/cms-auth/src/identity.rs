//! Who is calling: [`Caller`], with the role its permissions follow, how it
//! proved itself ([`Credential`]) and where its identity comes from
//! ([`Source`]).

use cms_model::UserRole;

use crate::error::AuthError;
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
    pub role: UserRole,
    pub credential: Credential,
    pub source: Source,
    /// The user's groups at the identity provider; empty for others.
    pub groups: Vec<String>,
}

impl Caller {
    /// A local user.
    pub fn local(user: &str, role: UserRole, credential: Credential) -> Caller {
        Caller { user: user.to_string(), role, credential, source: Source::Local, groups: Vec::new() }
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

    /// Fails unless the caller's role holds `permission`.
    pub fn require(&self, permission: Permission) -> Result<(), AuthError> {
        if permission.allows(self.role) {
            return Ok(());
        }
        Err(AuthError::Forbidden { role: self.role.as_str(), action: permission.action() })
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
        let admin = Caller { role: UserRole::Admin, ..sso };
        assert!(admin.require_self_or_admin("bob").is_ok(), "an admin manages users wherever it comes from");
    }
}

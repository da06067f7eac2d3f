//! Who a limit counts against: the user name of a login (local and single
//! sign-on users apart, since a user from elsewhere that bears a local
//! user's name is not that user), the id of an API token, the issuer and
//! subject of a workload; an API token's request rate counts against its
//! user's too ([`IdentityRef::owner`]). [`IdentityRef`] borrows them from a [`Caller`];
//! [`Identity`] owns them, as the tables' keys.

use std::hash::{Hash, Hasher};

use hashbrown::Equivalent;

use crate::identity::{Caller, Credential, Source};

/// An identity, borrowed from a caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum IdentityRef<'a> {
    /// A local user's login.
    User(&'a str),
    /// A single sign-on user's login, by user name.
    Sso(&'a str),
    /// An API token, by its public id.
    Token(&'a str),
    /// A workload, by its token's issuer and subject.
    Workload { issuer: &'a str, subject: &'a str },
}

impl<'a> IdentityRef<'a> {
    /// The identity of `caller`.
    pub(crate) fn of(caller: &'a Caller) -> IdentityRef<'a> {
        match (&caller.credential, &caller.source) {
            (Credential::ApiToken { id }, _) => IdentityRef::Token(id),
            (_, Source::Workload { issuer, subject }) => IdentityRef::Workload { issuer, subject },
            (_, Source::Sso { .. }) => IdentityRef::Sso(&caller.user),
            (_, Source::Local) => IdentityRef::User(&caller.user),
        }
    }

    /// The identity of the user that owns `caller`'s credential, when that
    /// is not the caller's own identity: an API token's user, whose logins
    /// and other tokens share its request rate.
    pub(crate) fn owner(caller: &'a Caller) -> Option<IdentityRef<'a>> {
        match (&caller.credential, &caller.source) {
            (Credential::ApiToken { .. }, Source::Local) => Some(IdentityRef::User(&caller.user)),
            _ => None,
        }
    }

    pub(crate) fn to_owned(self) -> Identity {
        match self {
            IdentityRef::User(user) => Identity::User(user.into()),
            IdentityRef::Sso(user) => Identity::Sso(user.into()),
            IdentityRef::Token(id) => Identity::Token(id.into()),
            IdentityRef::Workload { issuer, subject } => Identity::Workload(issuer.into(), subject.into()),
        }
    }
}

/// An identity, owned: a key of the limits' tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Identity {
    User(Box<str>),
    Sso(Box<str>),
    Token(Box<str>),
    Workload(Box<str>, Box<str>),
}

impl Identity {
    pub(crate) fn as_ref(&self) -> IdentityRef<'_> {
        match self {
            Identity::User(user) => IdentityRef::User(user),
            Identity::Sso(user) => IdentityRef::Sso(user),
            Identity::Token(id) => IdentityRef::Token(id),
            Identity::Workload(issuer, subject) => IdentityRef::Workload { issuer, subject },
        }
    }
}

/// Hashes as its borrowed form, so that either finds the other.
impl Hash for Identity {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_ref().hash(state);
    }
}

impl Equivalent<Identity> for IdentityRef<'_> {
    fn equivalent(&self, key: &Identity) -> bool {
        *self == key.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use cms_model::UserRole;

    use super::*;

    #[test]
    fn each_kind_of_caller_has_its_own_identity() {
        let local = Caller::local("alice", UserRole::View, Credential::Login);
        let token = Caller::local("alice", UserRole::View, Credential::ApiToken { id: "t1".into() });
        let sso = Caller {
            source: Source::Sso { issuer: "https://idp".into(), subject: "s".into() },
            ..local.clone()
        };
        let workload = Caller {
            credential: Credential::Workload,
            source: Source::Workload { issuer: "https://ci".into(), subject: "repo:x".into() },
            ..local.clone()
        };
        assert_eq!(IdentityRef::of(&local), IdentityRef::User("alice"));
        assert_eq!(IdentityRef::of(&token), IdentityRef::Token("t1"));
        assert_eq!(IdentityRef::of(&sso), IdentityRef::Sso("alice"), "apart from the local alice");
        assert_eq!(
            IdentityRef::of(&workload),
            IdentityRef::Workload { issuer: "https://ci", subject: "repo:x" }
        );
        assert_eq!(IdentityRef::of(&workload).to_owned().as_ref(), IdentityRef::of(&workload));
        assert_eq!(IdentityRef::owner(&token), Some(IdentityRef::User("alice")), "a token's user");
        for caller in [&local, &sso, &workload] {
            assert_eq!(IdentityRef::owner(caller), None, "{caller:?} is its own owner");
        }
    }
}

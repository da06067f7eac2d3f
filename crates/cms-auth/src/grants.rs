//! Per-tenant access: a caller's role on one tenant is its global role
//! joined with the roles of the grants that cover the tenant and name the
//! caller. Pure functions over [`Grant`]s; `authenticator.rs` reads them
//! from the store and attaches those naming a caller to it ([`Grants`]).
//!
//! A grant names a caller when one of its subjects is the caller's local
//! user (`User`), one of its groups at the single sign-on provider
//! (`Group`), or matches its workload subject (`Workload`, with the
//! patterns of [`crate::sso::pattern_matches`]). It covers a tenant when it
//! lists the tenant's name or its selector matches the tenant's labels.

use std::collections::BTreeMap;
use std::sync::Arc;

use cms_model::{FieldError, GrantSpec, LabelSelector, Subject, SubjectKind, UserRole};
use cms_store::Object;
use serde::Deserialize;

use crate::identity::{Caller, Source};
use crate::sso::pattern_matches;

/// A tenant's labels.
pub type Labels = BTreeMap<String, String>;

/// One grant, ready to be matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub name: String,
    /// `view` or `edit`.
    pub role: UserRole,
    pub subjects: Vec<Subject>,
    /// The tenants it lists by name.
    pub tenants: Vec<String>,
    /// The tenants it covers by their labels.
    pub selector: Option<LabelSelector>,
}

impl Grant {
    /// The grant `name` with `spec`, which must be valid and grant no
    /// global-only role.
    pub fn new(name: &str, spec: &GrantSpec) -> Result<Grant, FieldError> {
        if let Some(message) = spec.refused_role() {
            return Err(FieldError::new("spec.role", message));
        }
        spec.validate()?;
        Ok(Grant {
            name: name.to_string(),
            role: spec.role,
            subjects: spec.subjects.clone(),
            tenants: spec.tenants.names.clone(),
            selector: spec.selector()?,
        })
    }

    /// Whether the grant names `caller`.
    pub fn names(&self, caller: &Caller) -> bool {
        self.subjects.iter().any(|subject| subject_names(subject, caller))
    }

    /// Whether the grant covers the tenant `name` labelled `labels`.
    pub fn covers(&self, name: &str, labels: &Labels) -> bool {
        self.tenants.iter().any(|listed| listed == name)
            || self.selector.as_ref().is_some_and(|selector| selector.matches(labels))
    }
}

fn subject_names(subject: &Subject, caller: &Caller) -> bool {
    match (subject.kind, &caller.source) {
        (SubjectKind::User, Source::Local) => subject.name == caller.user,
        (SubjectKind::Group, Source::Sso { .. }) => caller.groups.contains(&subject.name),
        (SubjectKind::Workload, Source::Workload { subject: name, .. }) => {
            pattern_matches(&subject.name, name)
        }
        _ => false,
    }
}

/// The grants that name one caller, shared cheaply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants(Arc<[Arc<Grant>]>);

impl Grants {
    /// Those of `all` that name `caller`.
    pub fn of(all: &[Arc<Grant>], caller: &Caller) -> Grants {
        Grants(all.iter().filter(|grant| grant.names(caller)).cloned().collect())
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Each grant.
    pub fn iter(&self) -> impl Iterator<Item = &Grant> {
        self.0.iter().map(|grant| grant.as_ref())
    }
}

impl FromIterator<Grant> for Grants {
    fn from_iter<I: IntoIterator<Item = Grant>>(grants: I) -> Grants {
        Grants(grants.into_iter().map(Arc::new).collect())
    }
}

/// The labels of a stored tenant, as its JSON shows them; none when they
/// do not read, so that only grants that name it cover it.
pub fn tenant_labels(tenant: &Object) -> Labels {
    #[derive(Deserialize)]
    struct Labelled {
        metadata: Metadata,
    }
    #[derive(Deserialize)]
    struct Metadata {
        #[serde(default)]
        labels: Labels,
    }
    tenant.parse::<Labelled>().map(|labelled| labelled.metadata.labels).unwrap_or_default()
}

/// The role on the tenant `name` labelled `labels` of a caller whose global
/// role is `global` and whom `grants` name: the highest of them that
/// applies, `None` when the caller has no access to the tenant at all.
pub fn role_on(global: Option<UserRole>, grants: &Grants, name: &str, labels: &Labels) -> Option<UserRole> {
    let granted = grants.iter().filter(|grant| grant.covers(name, labels)).map(|grant| grant.role);
    global.into_iter().chain(granted).max()
}

#[cfg(test)]
mod tests {
    use cms_model::TenantSet;

    use super::*;
    use crate::identity::Credential;

    fn grant(
        role: UserRole,
        subjects: &[(SubjectKind, &str)],
        names: &[&str],
        selector: Option<&str>,
    ) -> Grant {
        let spec = GrantSpec {
            role,
            subjects: subjects
                .iter()
                .map(|(kind, name)| Subject { kind: *kind, name: name.to_string() })
                .collect(),
            tenants: TenantSet {
                names: names.iter().map(|name| name.to_string()).collect(),
                selector: selector.map(str::to_string),
            },
        };
        Grant::new("g", &spec).expect("valid grant")
    }

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().map(|(key, value)| (key.to_string(), value.to_string())).collect()
    }

    fn sso(user: &str, groups: &[&str]) -> Caller {
        Caller {
            source: Source::Sso { issuer: "https://idp".into(), subject: format!("sub-{user}") },
            groups: groups.iter().map(|group| group.to_string()).collect(),
            ..Caller::local(user, None, Credential::Login)
        }
    }

    fn workload(subject: &str) -> Caller {
        Caller {
            credential: Credential::Workload,
            source: Source::Workload { issuer: "https://ci".into(), subject: subject.into() },
            ..Caller::local(subject, None, Credential::Login)
        }
    }

    #[test]
    fn subjects_name_their_kind_of_caller_only() {
        use SubjectKind::*;
        let by_user = grant(UserRole::View, &[(User, "alice")], &["x"], None);
        assert!(by_user.names(&Caller::local("alice", None, Credential::Login)));
        assert!(by_user.names(&Caller::local(
            "alice",
            UserRole::View,
            Credential::ApiToken { id: "t".into() }
        )));
        assert!(!by_user.names(&Caller::local("bob", None, Credential::Login)));
        assert!(
            !by_user.names(&sso("alice", &[])),
            "a user from elsewhere named alice is not the local alice"
        );
        let by_group = grant(UserRole::Edit, &[(Group, "a-devs")], &["x"], None);
        assert!(by_group.names(&sso("s@example.com", &["others", "a-devs"])));
        assert!(!by_group.names(&sso("s@example.com", &["b-devs"])));
        assert!(!by_group.names(&Caller::local("a-devs", None, Credential::Login)), "a user is not a group");
        let by_workload = grant(UserRole::Edit, &[(Workload, "system:serviceaccount:ci:*")], &["x"], None);
        assert!(by_workload.names(&workload("system:serviceaccount:ci:deployer")));
        assert!(!by_workload.names(&workload("system:serviceaccount:ci:x:y")), "* stays within a segment");
        assert!(!by_workload.names(&workload("system:serviceaccount:other:deployer")));
        assert!(!by_workload.names(&sso("system:serviceaccount:ci:deployer", &[])));
    }

    #[test]
    fn grants_cover_by_name_and_by_selector() {
        let both = grant(UserRole::Edit, &[(SubjectKind::Group, "g")], &["x"], Some("team=a"));
        assert!(both.covers("x", &labels(&[])));
        assert!(both.covers("y", &labels(&[("team", "a")])));
        assert!(!both.covers("y", &labels(&[("team", "b")])));
        assert!(!both.covers("y", &labels(&[])));
        let set =
            grant(UserRole::View, &[(SubjectKind::Group, "g")], &[], Some("env in (prod,staging),!legacy"));
        assert!(set.covers("p", &labels(&[("env", "prod")])));
        assert!(!set.covers("p", &labels(&[("env", "prod"), ("legacy", "")])));
    }

    #[test]
    fn the_role_on_a_tenant_joins_the_global_role_and_the_grants() {
        let caller = sso("s@example.com", &["a-devs", "viewers"]);
        let all: Vec<Arc<Grant>> = [
            grant(UserRole::Edit, &[(SubjectKind::Group, "a-devs")], &[], Some("team=a")),
            grant(UserRole::View, &[(SubjectKind::Group, "viewers")], &["shared", "a1"], None),
            grant(UserRole::Edit, &[(SubjectKind::Group, "b-devs")], &["b1"], Some("team=b")),
        ]
        .into_iter()
        .map(Arc::new)
        .collect();
        let grants = Grants::of(&all, &caller);
        assert_eq!(grants.iter().count(), 2, "the b-devs grant does not name the caller");
        let team = |team: &str| labels(&[("team", team)]);
        assert_eq!(role_on(None, &grants, "a1", &team("a")), Some(UserRole::Edit), "the highest grant wins");
        assert_eq!(role_on(None, &grants, "shared", &labels(&[])), Some(UserRole::View));
        assert_eq!(role_on(None, &grants, "b1", &team("b")), None, "no access: hidden");
        assert_eq!(role_on(None, &grants, "other", &labels(&[])), None);
        assert_eq!(role_on(Some(UserRole::View), &grants, "b1", &team("b")), Some(UserRole::View));
        assert_eq!(role_on(Some(UserRole::View), &grants, "a1", &team("a")), Some(UserRole::Edit));
        assert_eq!(role_on(Some(UserRole::Admin), &grants, "a1", &team("a")), Some(UserRole::Admin));
        assert_eq!(
            role_on(Some(UserRole::Edit), &Grants::default(), "z", &labels(&[])),
            Some(UserRole::Edit)
        );
    }

    #[test]
    fn a_stored_tenant_is_judged_by_its_labels() {
        let object = |json: &str| Object {
            key: cms_store::Key::tenant("y"),
            resource_version: 1,
            generation: 1,
            deleting: false,
            json: bytes::Bytes::from(json.to_string()),
        };
        let labelled = object(r#"{"metadata":{"name":"y","labels":{"team":"a"}},"spec":{},"status":{}}"#);
        assert_eq!(tenant_labels(&labelled), labels(&[("team", "a")]));
        assert_eq!(tenant_labels(&object("not json")), Labels::new(), "unreadable: no labels");
        let all: Vec<Arc<Grant>> =
            vec![Arc::new(grant(UserRole::Edit, &[(SubjectKind::Group, "a-devs")], &[], Some("team=a")))];
        let mut caller = sso("s@example.com", &["a-devs"]);
        caller.grants = Grants::of(&all, &caller);
        assert_eq!(caller.role_on_tenant(&labelled), Some(UserRole::Edit));
        let other = object(r#"{"metadata":{"name":"y","labels":{"team":"b"}}}"#);
        assert_eq!(caller.role_on_tenant(&other), None);
        assert!(caller.holds_on(crate::Permission::Write, &labelled));
        assert!(
            !caller.holds_on(crate::Permission::DeleteTenant, &labelled),
            "admins' permissions are never granted"
        );
        let seen = caller.tenants_holding(crate::Permission::Read, [&labelled]).expect("not every tenant");
        assert!(seen.contains("y"));
    }

    #[test]
    fn admin_is_never_a_grant() {
        let spec = GrantSpec {
            role: UserRole::Admin,
            subjects: vec![Subject { kind: SubjectKind::Group, name: "g".into() }],
            tenants: TenantSet { names: vec!["x".into()], selector: None },
        };
        assert_eq!(Grant::new("g", &spec).unwrap_err().field, "spec.role");
    }
}

//! Grants through the authenticator: written, cached, attached to callers,
//! and seen by another authenticator on the same store.

use std::collections::BTreeMap;
use std::time::Duration;

use cms_auth::{AuthError, AuthOptions, Authenticator, Permission};
use cms_model::{GrantSpec, Subject, SubjectKind, TenantSet, UserRole};

use crate::{secret, setup};

fn spec(role: UserRole, user: &str, names: &[&str], selector: Option<&str>) -> GrantSpec {
    GrantSpec {
        role,
        subjects: vec![Subject { kind: SubjectKind::User, name: user.into() }],
        tenants: TenantSet {
            names: names.iter().map(|name| name.to_string()).collect(),
            selector: selector.map(str::to_string),
        },
    }
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(key, value)| (key.to_string(), value.to_string())).collect()
}

#[tokio::test]
async fn a_user_with_no_global_role_holds_what_its_grants_give() {
    let s = setup().await;
    s.auth.create_user("alice", None, &secret("alice-password")).await.unwrap();
    let (token, _) = s.auth.login("alice", &secret("alice-password"), None).await.unwrap();
    let caller = s.auth.authenticate(&token).await.expect("a user with no role still signs in");
    assert_eq!((caller.role, caller.grants.is_empty()), (None, true));
    assert!(matches!(caller.require(Permission::Read), Err(AuthError::Forbidden { role: "none", .. })));
    assert!(caller.require(Permission::OwnTokens).is_ok(), "its own tokens are its");
    assert!(!caller.holds_somewhere(Permission::Read));

    s.auth.create_grant("alice-a", spec(UserRole::Edit, "alice", &["x"], Some("team=a"))).await.unwrap();
    let caller = s.auth.authenticate(&token).await.unwrap();
    assert!(caller.holds_somewhere(Permission::Write), "the write cleared the cache");
    assert_eq!(caller.role_on("x", &labels(&[])), Some(UserRole::Edit));
    assert_eq!(caller.role_on("y", &labels(&[("team", "a")])), Some(UserRole::Edit));
    assert_eq!(caller.role_on("y", &labels(&[("team", "b")])), None);
    assert!(caller.require_on(Permission::Write, "x", &labels(&[])).is_ok());
    let hidden = caller.require_on(Permission::Read, "y", &labels(&[])).unwrap_err();
    assert_eq!(hidden.to_string(), "tenant \"y\" not found", "as a tenant that does not exist");
    assert!(matches!(
        caller.require_on(Permission::DeleteTenant, "x", &labels(&[])),
        Err(AuthError::Forbidden { role: "edit", .. })
    ));

    let current = s.auth.accounts().grant("alice-a".into()).await.unwrap().unwrap();
    let view = spec(UserRole::View, "alice", &["x"], None);
    s.auth.update_grant("alice-a", view.clone(), current.resource_version).await.unwrap();
    let stale = s.auth.update_grant("alice-a", view, current.resource_version).await;
    assert!(matches!(stale, Err(AuthError::Store(cms_store::StoreError::Conflict { .. }))), "{stale:?}");
    let caller = s.auth.authenticate(&token).await.unwrap();
    assert_eq!(caller.role_on("x", &labels(&[])), Some(UserRole::View));
    assert!(matches!(
        caller.require_on(Permission::Write, "x", &labels(&[])),
        Err(AuthError::Forbidden { .. })
    ));

    s.auth.delete_grant("alice-a").await.unwrap();
    let caller = s.auth.authenticate(&token).await.unwrap();
    assert_eq!(
        caller.role_on("x", &labels(&[])),
        None,
        "a deleted grant gives nothing from the next request"
    );
}

#[tokio::test]
async fn admin_is_not_granted_and_grants_are_bounded() {
    let s = setup().await;
    let admin = s.auth.create_grant("g", spec(UserRole::Admin, "alice", &["x"], None)).await;
    assert!(matches!(admin, Err(AuthError::NotGrantable(_))), "{admin:?}");
    let bad = s.auth.create_grant("g", spec(UserRole::View, "alice", &["x"], Some("team in ("))).await;
    assert!(
        matches!(bad, Err(AuthError::Invalid(ref field)) if field.field == "spec.tenants.selector"),
        "{bad:?}"
    );
    let name = s.auth.create_grant("Bad/Name", spec(UserRole::View, "alice", &["x"], None)).await;
    assert!(matches!(name, Err(AuthError::Invalid(ref field)) if field.field == "metadata.name"), "{name:?}");

    let options = AuthOptions { max_grants: 2, ..AuthOptions::default() };
    let bounded = Authenticator::new(s.store.clone(), options).await.unwrap();
    for name in ["one", "two"] {
        bounded.create_grant(name, spec(UserRole::View, "alice", &["x"], None)).await.unwrap();
    }
    let third = bounded.create_grant("three", spec(UserRole::View, "alice", &["x"], None)).await;
    assert!(matches!(third, Err(AuthError::TooManyGrants { cap: 2 })), "{third:?}");
}

#[tokio::test]
async fn another_replica_sees_grants_once_its_cache_is_stale() {
    let s = setup().await;
    s.auth.create_user("alice", None, &secret("alice-password")).await.unwrap();
    let options = AuthOptions { cache_ttl: Duration::ZERO, ..AuthOptions::default() };
    let replica = Authenticator::new(s.store.clone(), options).await.unwrap();
    let (token, record) = replica.create_token("alice", "ci", 1).await.unwrap();
    let before = replica.authenticate(&token.value).await.unwrap();
    assert!(before.grants.is_empty());
    // Written through the other authenticator: this one reads the store
    // again once its cache is older than its time to live.
    s.auth.create_grant("alice-x", spec(UserRole::View, "alice", &["x"], None)).await.unwrap();
    let after = replica.authenticate(&token.value).await.unwrap();
    assert_eq!(after.role_on("x", &labels(&[])), Some(UserRole::View), "token {}", record.name);
}

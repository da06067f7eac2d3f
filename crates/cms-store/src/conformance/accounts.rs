//! Conformance cases for users, API tokens, grants and settings.

use chrono::{Duration, Utc};
use cms_model::{GrantSpec, Subject, SubjectKind, TenantSet, UserRole};

use super::open;
use crate::accounts::{Accounts, GrantRecord, TokenRecord, UserChange, UserRecord};
use crate::error::StoreError;

fn user(name: &str, role: UserRole) -> UserRecord {
    let now = Utc::now();
    UserRecord {
        name: name.into(),
        role: Some(role),
        password_hash: format!("$2b$12$hash-of-{name}"),
        resource_version: 0,
        created_at: now,
        updated_at: now,
    }
}

fn token(id: &str, user: &str, name: &str) -> TokenRecord {
    let now = Utc::now();
    TokenRecord {
        id: id.into(),
        user: user.into(),
        name: name.into(),
        secret_hash: format!("sha256-of-{id}"),
        expires_at: now + Duration::hours(1),
        created_at: now,
        last_used_at: None,
    }
}

pub async fn users_and_the_last_admin(url: &str) {
    let store = open(url).await;
    assert!(store.create_first_user(user("admin", UserRole::Admin)).await.expect("first"));
    assert!(!store.create_first_user(user("other", UserRole::Admin)).await.expect("second"));
    let dup = store.create_user(user("admin", UserRole::View)).await;
    assert!(matches!(dup, Err(StoreError::AlreadyExists(_))), "{dup:?}");
    let demote = store.update_user(
        "admin".into(),
        UserChange { role: Some(Some(UserRole::Edit)), ..Default::default() },
        None,
    );
    assert!(matches!(demote.await, Err(StoreError::Refused(_))), "the only admin stays admin");
    assert!(matches!(store.delete_user("admin".into()).await, Err(StoreError::Refused(_))));
    store.create_user(user("ops", UserRole::Admin)).await.expect("second admin");
    let change = UserChange { role: Some(Some(UserRole::View)), password_hash: Some("$2b$12$new".into()) };
    let demoted = store.update_user("admin".into(), change, Some(1)).await.expect("demote");
    assert_eq!(
        (demoted.role, demoted.resource_version, demoted.password_hash.as_str()),
        (Some(UserRole::View), 2, "$2b$12$new")
    );
    let none = UserChange { role: Some(None), ..Default::default() };
    let roleless = store.update_user("admin".into(), none, Some(2)).await.expect("no global role");
    assert_eq!((roleless.role, roleless.resource_version), (None, 3));
    let read = store.user("admin".into()).await.expect("read").expect("present");
    assert_eq!(read.role, None, "a user with no global role reads back as such");
    let stale = store.update_user("admin".into(), UserChange::default(), Some(1)).await;
    assert!(matches!(stale, Err(StoreError::Conflict { current: 3, .. })), "{stale:?}");
    assert!(matches!(store.delete_user("ops".into()).await, Err(StoreError::Refused(_))));
    store.delete_user("admin".into()).await.expect("delete a viewer");
    let names: Vec<_> = store.users().await.expect("users").into_iter().map(|u| u.name).collect();
    assert_eq!(names, ["ops"]);
    assert!(matches!(store.delete_user("nobody".into()).await, Err(StoreError::NotFound(_))));
}

pub async fn tokens_lifecycle(url: &str) {
    let store = open(url).await;
    store.create_user(user("dev", UserRole::Edit)).await.expect("user");
    store.create_user(user("ops", UserRole::Admin)).await.expect("admin");
    store.create_token(token("id1", "dev", "ci")).await.expect("token");
    let dup = store.create_token(token("id2", "dev", "ci")).await;
    assert!(matches!(dup, Err(StoreError::AlreadyExists(_))), "{dup:?}");
    let orphan = store.create_token(token("id3", "nobody", "ci")).await;
    assert!(matches!(orphan, Err(StoreError::NotFound(_))), "{orphan:?}");
    store.create_token(token("id4", "dev", "backup")).await.expect("second token");
    let names: Vec<_> = store.tokens("dev".into()).await.expect("list").into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["backup", "ci"]);
    let used = Utc::now();
    store.touch_token("id1".into(), used).await.expect("touch");
    let found = store.token("id1".into()).await.expect("read").expect("present");
    assert_eq!(found.last_used_at.map(|t| t.timestamp_millis()), Some(used.timestamp_millis()));
    store.delete_token("dev".into(), "ci".into()).await.expect("revoke");
    assert!(store.token("id1".into()).await.expect("read").is_none());
    assert!(matches!(store.delete_token("dev".into(), "ci".into()).await, Err(StoreError::NotFound(_))));
    store.delete_user("dev".into()).await.expect("delete user");
    assert!(store.token("id4".into()).await.expect("read").is_none(), "a user's tokens go with it");
}

pub async fn settings_keep_the_first_value(url: &str) {
    let store = open(url).await;
    let first = store.setting_or_insert("signing-key".into(), "one".into()).await.expect("first");
    let second = store.setting_or_insert("signing-key".into(), "two".into()).await.expect("second");
    assert_eq!((first.as_str(), second.as_str()), ("one", "one"));
    let other = open(url).await;
    assert_eq!(other.setting_or_insert("signing-key".into(), "three".into()).await.expect("replica"), "one");
}

/// Recording a token's use (done in the background while requests write)
/// never makes a concurrent write fail.
pub async fn token_touches_never_fail_concurrent_writes(url: &str) {
    let store = open(url).await;
    store.create_user(user("dev", UserRole::Edit)).await.expect("user");
    store.create_token(token("id1", "dev", "ci")).await.expect("token");
    let mut tasks = Vec::new();
    for i in 0..16 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let key = crate::api::Key::tenant(format!("t{i}"));
            let draft = super::tenant_draft("1.31.0", None);
            let (created, touched) = tokio::join!(
                crate::api::Store::create(&*store, key, draft),
                store.touch_token("id1".into(), Utc::now())
            );
            (created.map(|_| ()), touched)
        }));
    }
    for task in tasks {
        let (created, touched) = task.await.expect("task");
        assert!(created.is_ok() && touched.is_ok(), "{created:?} {touched:?}");
    }
}

fn grant(name: &str, group: &str, tenants: &[&str]) -> GrantRecord {
    let now = Utc::now();
    let spec = GrantSpec {
        role: UserRole::Edit,
        subjects: vec![Subject { kind: SubjectKind::Group, name: group.into() }],
        tenants: TenantSet {
            names: tenants.iter().map(|tenant| tenant.to_string()).collect(),
            selector: Some("team=a".into()),
        },
    };
    GrantRecord { name: name.into(), spec, resource_version: 0, created_at: now, updated_at: now }
}

pub async fn grants_lifecycle(url: &str) {
    let store = open(url).await;
    assert!(store.grants().await.expect("none yet").is_empty());
    let created = store.create_grant(grant("b-edit", "b-devs", &["b1"])).await.expect("create");
    assert_eq!(created.resource_version, 1);
    store.create_grant(grant("a-edit", "a-devs", &[])).await.expect("second");
    let dup = store.create_grant(grant("a-edit", "x", &[])).await;
    assert!(matches!(dup, Err(StoreError::AlreadyExists(_))), "{dup:?}");
    let names: Vec<_> = store.grants().await.expect("list").into_iter().map(|g| g.name).collect();
    assert_eq!(names, ["a-edit", "b-edit"], "sorted by name");
    let read = store.grant("b-edit".into()).await.expect("read").expect("present");
    assert_eq!(read.spec, grant("b-edit", "b-devs", &["b1"]).spec, "the spec reads back whole");
    let mut spec = read.spec.clone();
    spec.role = UserRole::View;
    spec.tenants.selector = None;
    let updated = store.update_grant("b-edit".into(), spec.clone(), 1).await.expect("update");
    assert_eq!((updated.resource_version, &updated.spec), (2, &spec));
    let stale = store.update_grant("b-edit".into(), spec.clone(), 1).await;
    assert!(matches!(stale, Err(StoreError::Conflict { current: 2, .. })), "{stale:?}");
    let missing = store.update_grant("nobody".into(), spec, 1).await;
    assert!(matches!(missing, Err(StoreError::NotFound(_))), "{missing:?}");
    store.delete_grant("b-edit".into()).await.expect("delete");
    assert!(store.grant("b-edit".into()).await.expect("read").is_none());
    assert!(matches!(store.delete_grant("b-edit".into()).await, Err(StoreError::NotFound(_))));
    let reopened = open(url).await;
    let names: Vec<_> = reopened.grants().await.expect("list").into_iter().map(|g| g.name).collect();
    assert_eq!(names, ["a-edit"], "grants outlive the process");
}

pub async fn concurrent_grant_updates_have_one_winner(url: &str) {
    let store = open(url).await;
    store.create_grant(grant("g", "a-devs", &["a"])).await.expect("create");
    let updates = (0..8).map(|index| {
        let store = store.clone();
        let spec = grant("g", &format!("group-{index}"), &["a"]).spec;
        async move { store.update_grant("g".into(), spec, 1).await }
    });
    let results = futures_util::future::join_all(updates).await;
    let won = results.iter().filter(|result| result.is_ok()).count();
    assert_eq!(won, 1, "{results:?}");
    assert!(results.iter().all(|r| r.is_ok() || matches!(r, Err(StoreError::Conflict { .. }))));
}

//! Conformance cases for users, API tokens and settings.

use chrono::{Duration, Utc};
use cms_model::UserRole;

use super::open;
use crate::accounts::{Accounts, TokenRecord, UserChange, UserRecord};
use crate::error::StoreError;

fn user(name: &str, role: UserRole) -> UserRecord {
    let now = Utc::now();
    UserRecord {
        name: name.into(),
        role,
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
        UserChange { role: Some(UserRole::Edit), ..Default::default() },
        None,
    );
    assert!(matches!(demote.await, Err(StoreError::Refused(_))), "the only admin stays admin");
    assert!(matches!(store.delete_user("admin".into()).await, Err(StoreError::Refused(_))));
    store.create_user(user("ops", UserRole::Admin)).await.expect("second admin");
    let change = UserChange { role: Some(UserRole::View), password_hash: Some("$2b$12$new".into()) };
    let demoted = store.update_user("admin".into(), change, Some(1)).await.expect("demote");
    assert_eq!(
        (demoted.role, demoted.resource_version, demoted.password_hash.as_str()),
        (UserRole::View, 2, "$2b$12$new")
    );
    let stale = store.update_user("admin".into(), UserChange::default(), Some(1)).await;
    assert!(matches!(stale, Err(StoreError::Conflict { current: 2, .. })), "{stale:?}");
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

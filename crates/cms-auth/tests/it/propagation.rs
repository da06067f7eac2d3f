//! Changes that reach callers who already hold a token: a role changed on
//! one replica reaches another within its cache's time to live (2 s by
//! default), and a changed group-to-role mapping applies to login tokens
//! from sign-ins made before it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cms_auth::sso::{RoleMap, SsoOptions, parse_grants};
use cms_auth::{AuthError, AuthOptions, Authenticator, LoginTokens, Permission, SsoClaims};
use cms_model::UserRole;
use cms_store::SqlStore;
use secrecy::{SecretSlice, SecretString};

use crate::{secret, setup};

/// The login signing key every replica shares, as they do through the store.
fn key() -> SecretSlice<u8> {
    SecretSlice::from(vec![7u8; 32])
}

async fn replica(store: &Arc<SqlStore>, sso: Option<SsoOptions>) -> Authenticator {
    let options = AuthOptions { signing_key: Some(key()), sso, ..AuthOptions::default() };
    Authenticator::new(store.clone(), options).await.expect("authenticator")
}

#[tokio::test]
async fn a_role_change_reaches_another_replica_within_its_cache_time() {
    let bound = AuthOptions::default().cache_ttl;
    assert_eq!(bound, Duration::from_secs(2), "docs/auth.md promises 2 seconds");
    let s = setup().await;
    let (a, b) = (replica(&s.store, None).await, replica(&s.store, None).await);
    a.create_user("dev", UserRole::Edit, &secret("dev-password")).await.unwrap();
    let (token, _) = a.login("dev", &secret("dev-password"), None).await.unwrap();
    // Replica b reads and caches the role.
    assert_eq!(b.authenticate(&token).await.unwrap().role, Some(UserRole::Edit));

    a.update_user("dev", UserRole::View, None, None).await.unwrap();
    assert_eq!(a.authenticate(&token).await.unwrap().role, Some(UserRole::View), "at once on a");
    // b's cached role expires after `bound`; the deadline leaves room for
    // a slow machine, and a cache that never expired would reach it.
    let deadline = Instant::now() + bound * 5;
    loop {
        let caller = b.authenticate(&token).await.unwrap();
        if caller.role == Some(UserRole::View) {
            assert!(caller.require(Permission::Write).is_err());
            break;
        }
        assert!(Instant::now() < deadline, "replica b still sees {:?} after {:?}", caller.role, bound * 5);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn sso(mapping: &str) -> SsoOptions {
    SsoOptions {
        issuer: "https://idp.example".into(),
        client_id: "cms".into(),
        client_secret: SecretString::from("secret".to_string()),
        scopes: Vec::new(),
        username_claim: "email".into(),
        groups_claim: "groups".into(),
        roles: RoleMap { groups: parse_grants("CMS_SSO_GROUP_ROLES", mapping).unwrap(), default: None },
    }
}

#[tokio::test]
async fn a_changed_group_mapping_applies_to_sessions_signed_in_before() {
    let s = setup().await;
    // A sign-in made while `devs` mapped to edit: the login token carries
    // the groups, not the role.
    let claims =
        SsoClaims { iss: "https://idp.example".into(), sub: "u1".into(), groups: vec!["devs".into()] };
    let tokens = LoginTokens::new(&key(), Duration::from_secs(3600)).unwrap();
    let (token, _) = tokens.issue_with("alice@example.com", Some(claims)).unwrap();

    let before = replica(&s.store, Some(sso("devs=edit"))).await;
    let caller = before.authenticate(&token).await.unwrap();
    assert_eq!(caller.role, Some(UserRole::Edit));
    assert!(caller.require(Permission::Write).is_ok());

    // The server restarts with `devs` mapped to view: the same token views.
    let after = replica(&s.store, Some(sso("devs=view,platform=admin"))).await;
    let caller = after.authenticate(&token).await.unwrap();
    assert_eq!((caller.user.as_str(), caller.role), ("alice@example.com", Some(UserRole::View)));
    assert!(caller.require(Permission::Write).is_err());

    // With `devs` mapped to nothing, and no grant naming it, it is refused.
    let removed = replica(&s.store, Some(sso("platform=admin"))).await;
    let refused = removed.authenticate(&token).await;
    assert!(matches!(refused, Err(AuthError::Rejected(_))), "{refused:?}");
}

/// A caller kept for the next requests of a thread (`seen.rs`) lasts no
/// longer than the cached role it was made from: kept by a thread late in
/// the role's time to live, it does not start a time of its own. The user
/// is an admin at first, whose caller is made without the grants, so that
/// the role's time alone can end it.
#[tokio::test]
async fn a_caller_kept_late_in_the_roles_time_lasts_no_longer_than_the_role() {
    let ttl = Duration::from_millis(400);
    let s = setup().await;
    let options = |ttl| AuthOptions { signing_key: Some(key()), cache_ttl: ttl, ..AuthOptions::default() };
    let a = Authenticator::new(s.store.clone(), options(ttl)).await.unwrap();
    let b = Arc::new(Authenticator::new(s.store.clone(), options(ttl)).await.unwrap());
    // Another admin, so that `dev` is not the last and may be demoted.
    a.create_user("root", UserRole::Admin, &secret("root-password")).await.unwrap();
    a.create_user("dev", UserRole::Admin, &secret("dev-password")).await.unwrap();
    let (token, _) = a.login("dev", &secret("dev-password"), None).await.unwrap();
    // b reads the role and caches it; it was read no later than `read`.
    assert_eq!(b.authenticate(&token).await.unwrap().role, Some(UserRole::Admin));
    let read = Instant::now();
    let (kept, kept_role) = tokio::sync::oneshot::channel();
    let (changed, change) = tokio::sync::oneshot::channel::<()>();
    let other = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            // Another thread of b, late in the role's time: it keeps a
            // caller made from the cached role.
            tokio::time::sleep(ttl * 3 / 4).await;
            kept.send(b.authenticate(&token).await.unwrap().role).unwrap();
            // On a machine so slow that the role had gone stale by then, b
            // read it anew, and may keep that for its own time.
            let stale = read + ttl;
            let fresh_until = match Instant::now() {
                answered if answered < stale => stale,
                answered => answered + ttl,
            };
            change.await.unwrap();
            let past = (fresh_until + Duration::from_millis(20)).saturating_duration_since(Instant::now());
            tokio::time::sleep(past).await;
            b.authenticate(&token).await.unwrap().role
        })
    });
    assert_eq!(kept_role.await.unwrap(), Some(UserRole::Admin));
    a.update_user("dev", UserRole::View, None, None).await.unwrap();
    changed.send(()).unwrap();
    let late = tokio::task::spawn_blocking(move || other.join().unwrap()).await.unwrap();
    assert_eq!(late, Some(UserRole::View), "past the role's time, b reads it again");
}

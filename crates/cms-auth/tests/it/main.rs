//! The authenticator over a real SQLite store.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cms_auth::{
    AuthError, AuthOptions, Authenticator, Credential, FirstAdmin, Permission, bootstrap_admin,
    create_first_admin,
};
use cms_model::UserRole;
use cms_store::{Accounts, SqlStore, StoreOptions};
use secrecy::{ExposeSecret, SecretString};

struct Setup {
    auth: Authenticator,
    store: Arc<SqlStore>,
    _dir: tempfile::TempDir,
}

async fn setup() -> Setup {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("cms.db").display());
    let store = SqlStore::open(&StoreOptions::new(url)).await.expect("store");
    let options = AuthOptions { cache_ttl: Duration::from_secs(60), ..AuthOptions::default() };
    let auth = Authenticator::new(store.clone(), options).await.expect("authenticator");
    Setup { auth, store, _dir: dir }
}

fn secret(s: &str) -> SecretString {
    SecretString::from(s.to_string())
}

#[tokio::test]
async fn bootstrap_creates_one_admin_once() {
    let s = setup().await;
    let generated = bootstrap_admin(&s.auth, None).await.expect("bootstrap").expect("a generated password");
    assert!(bootstrap_admin(&s.auth, None).await.expect("again").is_none());
    let (token, _) =
        s.auth.login("admin", &generated, None).await.expect("login with the generated password");
    let caller = s.auth.authenticate(&token).await.expect("authenticate");
    assert_eq!((caller.user.as_str(), caller.role), ("admin", Some(UserRole::Admin)));
    let stored = s.store.user("admin".into()).await.unwrap().unwrap();
    assert!(!stored.password_hash.contains(generated.expose_secret()));
}

#[tokio::test]
async fn a_login_waits_for_the_first_admin_being_created() {
    let s = Arc::new(setup().await);
    let held = s.auth.hold_logins().await;
    let login = tokio::spawn({
        let s = s.clone();
        async move { s.auth.login("admin", &secret("first-password"), None).await }
    });
    let first = FirstAdmin::prepare(Some(secret("first-password"))).await.expect("hash");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!login.is_finished(), "the login waits while logins are held");
    assert!(create_first_admin(&s.auth, first).await.expect("create").is_none(), "the password was given");
    drop(held);
    login.await.expect("task").expect("the login finds the admin");
    let again = FirstAdmin::prepare(None).await.expect("hash");
    assert!(create_first_admin(&s.auth, again).await.expect("no-op").is_none(), "only on an empty store");
}

#[tokio::test]
async fn role_changes_and_deletion_apply_to_the_next_request() {
    let s = setup().await;
    bootstrap_admin(&s.auth, Some(secret("admin-password"))).await.unwrap();
    s.auth.create_user("dev", UserRole::Edit, &secret("dev-password")).await.unwrap();
    let (token, _) = s.auth.login("dev", &secret("dev-password"), None).await.unwrap();
    let caller = s.auth.authenticate(&token).await.unwrap();
    assert!(caller.require(Permission::Write).is_ok());
    s.auth.update_user("dev", UserRole::View, None, None).await.unwrap();
    let caller = s.auth.authenticate(&token).await.unwrap();
    assert!(matches!(caller.require(Permission::Write), Err(AuthError::Forbidden { .. })));
    s.auth.delete_user("dev").await.unwrap();
    assert!(matches!(s.auth.authenticate(&token).await, Err(AuthError::Unauthorized(_))));
}

#[tokio::test]
async fn api_tokens_work_until_revoked_or_expired() {
    let s = setup().await;
    s.auth.create_user("viewer", UserRole::View, &secret("viewer-password")).await.unwrap();
    let (token, record) = s.auth.create_token("viewer", "ci", 1).await.unwrap();
    let caller = s.auth.authenticate(&token.value).await.unwrap();
    assert_eq!(caller.credential, Credential::ApiToken { id: record.id.clone() });
    assert!(caller.require(Permission::Read).is_ok());
    assert!(caller.require(Permission::Write).is_err());
    let stored = s.store.token(record.id.clone()).await.unwrap().unwrap();
    assert!(!token.value.contains(&stored.secret_hash) && !stored.secret_hash.is_empty());
    for _ in 0..50 {
        if s.store.token(record.id.clone()).await.unwrap().unwrap().last_used_at.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        s.store.token(record.id.clone()).await.unwrap().unwrap().last_used_at.is_some(),
        "use is recorded"
    );
    let tampered = format!("{}0", &token.value[..token.value.len() - 1]);
    let tampered = if tampered == token.value {
        format!("{}1", &token.value[..token.value.len() - 1])
    } else {
        tampered
    };
    assert!(s.auth.authenticate(&tampered).await.is_err());
    s.auth.revoke_token("viewer", "ci").await.unwrap();
    assert!(matches!(s.auth.authenticate(&token.value).await, Err(AuthError::Unauthorized("invalid token"))));
    let (expiring, record) = s.auth.create_token("viewer", "old", 1).await.unwrap();
    let mut old = record.clone();
    old.id = "ffffffffffffffff".into();
    old.name = "expired".into();
    old.expires_at = chrono::Utc::now() - chrono::Duration::seconds(1);
    s.store.create_token(old).await.unwrap();
    let forged = expiring.value.replace(&record.id, "ffffffffffffffff");
    assert!(matches!(s.auth.authenticate(&forged).await, Err(AuthError::Unauthorized("token expired"))));
}

const STRANGER: Option<IpAddr> = Some(IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7)));
const HOME: Option<IpAddr> = Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 10)));

#[tokio::test]
async fn a_stranger_s_failures_lock_out_the_stranger_not_the_user() {
    let s = setup().await;
    s.auth.create_user("alice", UserRole::View, &secret("alice-password")).await.unwrap();
    s.auth.create_user("bob", UserRole::View, &secret("bob-password")).await.unwrap();
    for _ in 0..5 {
        let failed = s.auth.login("alice", &secret("wrong-password"), STRANGER).await;
        assert!(matches!(failed, Err(AuthError::Unauthorized("invalid username or password"))));
    }
    let throttled = s.auth.login("alice", &secret("alice-password"), STRANGER).await;
    assert!(
        matches!(throttled, Err(AuthError::TooManyAttempts { retry_after }) if retry_after > 0 && retry_after <= 60),
        "the stranger's address is throttled, even with the right password: {throttled:?}"
    );
    s.auth.login("alice", &secret("alice-password"), HOME).await.expect("alice still logs in from home");
    s.auth.login("bob", &secret("bob-password"), STRANGER).await.expect("others still log in from there");
    s.auth.login("bob", &secret("bob-password"), None).await.expect("and from an unknown address");
}

#[tokio::test]
async fn api_tokens_per_user_are_capped() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("cms.db").display());
    let store = SqlStore::open(&StoreOptions::new(url)).await.expect("store");
    let options = AuthOptions { tokens_per_user: 3, ..AuthOptions::default() };
    let auth = Authenticator::new(store.clone(), options).await.expect("authenticator");
    auth.create_user("alice", UserRole::View, &secret("alice-password")).await.unwrap();
    auth.create_user("bob", UserRole::View, &secret("bob-password")).await.unwrap();
    for i in 0..3 {
        auth.create_token("alice", &format!("t{i}"), 1).await.expect("under the cap");
    }
    let refused = auth.create_token("alice", "t3", 1).await.expect_err("past the cap");
    assert!(matches!(refused, AuthError::TooManyTokens { cap: 3, .. }), "{refused:?}");
    assert_eq!(
        refused.to_string(),
        "user \"alice\" has 3 API tokens, the most one user may hold; revoke one first"
    );
    assert_eq!(store.tokens("alice".into()).await.unwrap().len(), 3, "nothing was stored");
    auth.create_token("bob", "t0", 1).await.expect("other users have their own cap");
    auth.revoke_token("alice", "t0").await.unwrap();
    auth.create_token("alice", "t3", 1).await.expect("a revoked token makes room");
}

/// Unknown users and wrong passwords cost the same bcrypt work, so their
/// timings match: both are measured in one run and compared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_users_take_as_long_as_wrong_passwords() {
    let s = setup().await;
    s.auth.create_user("carol", UserRole::View, &secret("carol-password")).await.unwrap();
    let mut unknown = Vec::new();
    let mut wrong = Vec::new();
    for round in 0..4 {
        let start = Instant::now();
        assert!(s.auth.login(&format!("ghost{round}"), &secret("whatever-password"), None).await.is_err());
        unknown.push(start.elapsed());
        let start = Instant::now();
        assert!(s.auth.login("carol", &secret("wrong-password"), None).await.is_err());
        wrong.push(start.elapsed());
    }
    unknown.sort();
    wrong.sort();
    let (u, w) = (unknown[1].as_secs_f64(), wrong[1].as_secs_f64());
    let ratio = u / w;
    assert!((0.75..=1.33).contains(&ratio), "unknown {u:.3}s vs wrong {w:.3}s");
}

mod grants;
mod propagation;

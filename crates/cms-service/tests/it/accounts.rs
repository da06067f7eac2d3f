//! Login, users and tokens over HTTP, and what reaches the database file.

use actix_web::test::TestRequest;

use crate::{ADMIN_PASSWORD, harness, json};

const LOGIN: &str = "/api/v1/auth/login";

fn credentials(user: &str, password: &str) -> String {
    serde_json::json!({"username": user, "password": password}).to_string()
}

#[actix_web::test]
async fn login_answers_a_token_or_one_message_for_every_failure() {
    let h = harness().await;
    let ok = h.send_as(json(TestRequest::post().uri(LOGIN), &credentials("admin", ADMIN_PASSWORD))).await;
    assert_eq!(ok.status.as_u16(), 200, "{:?}", ok.json());
    let token = ok.json()["token"].as_str().expect("token").to_string();
    assert!(ok.json()["expiresAt"].is_string());
    let me = TestRequest::get()
        .uri("/api/v1/users/admin")
        .insert_header(("authorization", format!("Bearer {token}")));
    assert_eq!(h.send_as(me).await.status.as_u16(), 200);
    let wrong =
        h.send_as(json(TestRequest::post().uri(LOGIN), &credentials("admin", "not-the-password"))).await;
    let unknown =
        h.send_as(json(TestRequest::post().uri(LOGIN), &credentials("nobody", "not-the-password"))).await;
    assert_eq!(wrong.error(401, "Unauthorized"), unknown.error(401, "Unauthorized"));
    let extra = r#"{"username":"admin","password":"x","remember":true}"#;
    h.send_as(json(TestRequest::post().uri(LOGIN), extra)).await.error(422, "Invalid");
    let basic = TestRequest::get().uri("/api/v1/tenants").insert_header(("authorization", "Basic abc"));
    h.send_as(basic).await.error(401, "Unauthorized");
}

/// A login from `peer`.
fn login_from(peer: &str, user: &str, password: &str) -> TestRequest {
    let peer = peer.parse().expect("a socket address");
    json(TestRequest::post().uri(LOGIN).peer_addr(peer), &credentials(user, password))
}

#[actix_web::test]
async fn brute_force_is_throttled_for_that_address_only() {
    const STRANGER: &str = "198.51.100.7:40000";
    const HOME: &str = "192.0.2.10:50000";
    let h = harness().await;
    let user = r#"{"metadata":{"name":"bob"},"spec":{"role":"view","password":"bob-password"}}"#;
    assert_eq!(h.post("/api/v1/users", user).await.status.as_u16(), 201);
    for _ in 0..5 {
        h.send_as(login_from(STRANGER, "admin", "guess-guess")).await.error(401, "Unauthorized");
    }
    let throttled = h.send_as(login_from(STRANGER, "admin", ADMIN_PASSWORD)).await;
    let message = throttled.error(429, "TooManyRequests");
    assert!(message.contains("too many failed logins"), "{message}");
    let retry: u64 = throttled.header("retry-after").parse().expect("Retry-After in seconds");
    assert!((1..=60).contains(&retry), "{retry}");
    let from_home = h.send_as(login_from(HOME, "admin", ADMIN_PASSWORD)).await;
    assert_eq!(from_home.status.as_u16(), 200, "admin still logs in from elsewhere: {:?}", from_home.json());
    let bob = h.send_as(login_from(STRANGER, "bob", "bob-password")).await;
    assert_eq!(bob.status.as_u16(), 200, "other users still log in from there");
}

#[actix_web::test]
async fn api_tokens_per_user_are_capped_with_a_conflict() {
    let h = harness().await;
    let token = |i: usize| format!(r#"{{"metadata":{{"name":"t{i}"}},"spec":{{"expiresIn":"1h"}}}}"#);
    let cap = cms_auth::AuthOptions::DEFAULT_TOKENS_PER_USER;
    for i in 0..cap {
        assert_eq!(h.post("/api/v1/users/admin/tokens", &token(i)).await.status.as_u16(), 201, "token {i}");
    }
    let refused = h.post("/api/v1/users/admin/tokens", &token(cap)).await;
    let message = refused.error(409, "Conflict");
    assert!(message.contains(&format!("has {cap} API tokens")), "the message names the cap: {message}");
    assert_eq!(h.get("/api/v1/users/admin/tokens").await.json()["total"], cap);
    assert_eq!(h.delete("/api/v1/users/admin/tokens/t0").await.status.as_u16(), 204);
    assert_eq!(h.post("/api/v1/users/admin/tokens", &token(cap)).await.status.as_u16(), 201);
}

#[actix_web::test]
async fn users_are_managed_and_the_last_admin_stays() {
    let h = harness().await;
    let create = r#"{"metadata":{"name":"dev"},"spec":{"role":"edit","password":"dev-password"}}"#;
    let created = h.post("/api/v1/users", create).await;
    assert_eq!(created.status.as_u16(), 201);
    assert_eq!(created.json()["spec"], serde_json::json!({"role": "edit"}), "no password is shown");
    h.post("/api/v1/users", create).await.error(409, "Conflict");
    let short = r#"{"metadata":{"name":"x"},"spec":{"role":"edit","password":"short"}}"#;
    assert!(h.post("/api/v1/users", short).await.error(422, "Invalid").contains("spec.password"));
    let long =
        format!(r#"{{"metadata":{{"name":"x"}},"spec":{{"role":"edit","password":"{}"}}}}"#, "p".repeat(73));
    h.post("/api/v1/users", &long).await.error(422, "Invalid");
    let list = h.get("/api/v1/users").await.json();
    assert_eq!(list["total"], 2);
    let demote = r#"{"metadata":{"name":"admin","resourceVersion":1},"spec":{"role":"view"}}"#;
    h.put("/api/v1/users/admin", demote).await.error(409, "Conflict");
    h.delete("/api/v1/users/admin").await.error(409, "Conflict");
    let promote = r#"{"metadata":{"name":"dev","resourceVersion":1},"spec":{"role":"admin"}}"#;
    assert_eq!(h.put("/api/v1/users/dev", promote).await.json()["spec"]["role"], "admin");
    h.put("/api/v1/users/dev", promote).await.error(409, "Conflict");
    assert_eq!(h.delete("/api/v1/users/dev").await.status.as_u16(), 204);
    h.get("/api/v1/users/dev").await.error(404, "NotFound");
}

#[actix_web::test]
async fn the_database_holds_no_plaintext_password_or_token() {
    let h = harness().await;
    let password = "plaintext-canary-password";
    let user =
        format!(r#"{{"metadata":{{"name":"carol"}},"spec":{{"role":"view","password":"{password}"}}}}"#);
    assert_eq!(h.post("/api/v1/users", &user).await.status.as_u16(), 201);
    let token =
        h.post("/api/v1/users/carol/tokens", r#"{"metadata":{"name":"ci"},"spec":{"expiresIn":"1h"}}"#).await;
    let value = token.json()["status"]["token"].as_str().expect("token").to_string();
    let secret = value.rsplit('_').next().expect("secret part").to_string();
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(h.dir()).expect("data dir") {
        bytes.extend(std::fs::read(entry.expect("entry").path()).expect("read"));
    }
    let text = String::from_utf8_lossy(&bytes);
    assert!(!bytes.is_empty());
    for needle in [password, ADMIN_PASSWORD, value.as_str(), secret.as_str()] {
        assert!(!text.contains(needle), "{needle} reached the database");
    }
}

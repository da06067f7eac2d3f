//! Authentication against the real binary: tokens, roles, throttling, and
//! that no password or token reaches the log or the database file.

use cms_e2e::fixtures::{TENANTS, tenant, tenant_path};
use cms_e2e::{ADMIN_PASSWORD, Api, Server};
use serde_json::json;

async fn user(admin: &Api, name: &str, role: &str, password: &str) {
    let body = json!({"metadata": {"name": name}, "spec": {"role": role, "password": password}});
    admin.post("/api/v1/users", &body).await.expect(201);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_and_tokens_hold_over_http() {
    let server = Server::start().await;
    let admin = server.api();
    let anonymous = admin.with_token(None);
    anonymous.get(TENANTS).await.expect_error(401, "Unauthorized");
    let reply = anonymous.get(TENANTS).await;
    assert_eq!(reply.header("www-authenticate").as_deref(), Some("Bearer"));
    admin.post(TENANTS, &tenant("alpha")).await.expect(201);

    user(&admin, "viewer", "view", "viewer-password").await;
    let viewer = anonymous.clone().login("viewer", "viewer-password").await;
    let created = viewer
        .post(
            "/api/v1/users/viewer/tokens",
            &json!({"metadata": {"name": "ci"}, "spec": {"expiresIn": "24h"}}),
        )
        .await
        .expect(201);
    let token = created["status"]["token"].as_str().expect("the token, shown once").to_string();
    let api_token = anonymous.with_token(Some(token));
    api_token.get(&tenant_path("alpha")).await.expect(200);
    api_token.post(TENANTS, &tenant("beta")).await.expect_error(403, "Forbidden");
    api_token.delete(&tenant_path("alpha")).await.expect_error(403, "Forbidden");
    api_token.get("/api/v1/users").await.expect_error(403, "Forbidden");

    admin.delete("/api/v1/users/viewer/tokens/ci").await.expect_empty(204);
    api_token.get(&tenant_path("alpha")).await.expect_error(401, "Unauthorized");
    admin.delete("/api/v1/users/viewer").await.expect_empty(204);
    viewer.get(&tenant_path("alpha")).await.expect_error(401, "Unauthorized");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sixth_failed_login_is_throttled() {
    let server = Server::start().await;
    let anonymous = server.api().with_token(None);
    let login = |password: &str| json!({"username": "admin", "password": password});
    for _ in 0..5 {
        anonymous
            .post("/api/v1/auth/login", &login("wrong-password"))
            .await
            .expect_error(401, "Unauthorized");
    }
    let throttled = anonymous.post("/api/v1/auth/login", &login(ADMIN_PASSWORD)).await;
    throttled.expect_error(429, "TooManyRequests");
    assert!(throttled.header("retry-after").is_some_and(|s| s.parse::<u64>().is_ok()), "{throttled:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_password_or_token_reaches_the_log_or_the_database() {
    let server = Server::options().env("CMS_LOG", "debug").start().await;
    let admin = server.api();
    let password = "canary-password-4711";
    user(&admin, "carol", "edit", password).await;
    let carol = admin.with_token(None).login("carol", password).await;
    let login_token = carol.token().expect("a login token").to_string();
    let created = carol
        .post("/api/v1/users/carol/tokens", &json!({"metadata": {"name": "ci"}, "spec": {"expiresIn": "1h"}}))
        .await
        .expect(201);
    let api_token = created["status"]["token"].as_str().expect("token").to_string();
    admin.with_token(Some(api_token.clone())).get(TENANTS).await.expect(200);
    let wrong = json!({"username": "carol", "password": "canary-wrong-password"});
    admin.with_token(None).post("/api/v1/auth/login", &wrong).await.expect_error(401, "Unauthorized");
    admin.with_token(Some(format!("{api_token}x"))).get(TENANTS).await.expect_error(401, "Unauthorized");

    let secrets = [
        password,
        "canary-wrong-password",
        ADMIN_PASSWORD,
        &login_token,
        &api_token,
        admin.token().expect("token"),
    ];
    let log = server.output();
    let stopped = server.terminate().await;
    let mut database = Vec::new();
    for entry in std::fs::read_dir(stopped.data_dir().path()).expect("the data directory") {
        let path = entry.expect("an entry").path();
        if path.is_file() {
            database.extend(std::fs::read(path).expect("a database file"));
        }
    }
    let database = String::from_utf8_lossy(&database);
    assert!(log.contains("failed login"), "the log is captured: {log}");
    for secret in secrets {
        assert!(!log.contains(secret), "a secret reached the log: {secret}");
        assert!(!database.contains(secret), "a secret reached the database: {secret}");
    }
    let secret_part = api_token.rsplit('_').next().expect("the secret part");
    assert!(!database.contains(secret_part));
}

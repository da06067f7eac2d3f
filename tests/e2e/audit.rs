//! The audit log against the real binary: creates, updates, deletes and
//! denied writes are recorded with the right actor; only admins read it; it
//! pages; requests that name nobody are counted, not kept, so a flood of
//! them pushes nothing out; it survives `kill -9`; and no password or token
//! secret is in it.

use cms_e2e::fixtures::{TENANTS, config_patch, config_patches_path, tenant, tenant_path};
use cms_e2e::{ADMIN_PASSWORD, Api, Server};
use serde_json::{Value, json};

const AUDIT: &str = "/api/v1/audit";

/// `(actor, method, path, status, outcome)` of each record, newest first.
fn summaries(log: &Value) -> Vec<(String, String, String, u64, String)> {
    let text = |record: &Value, field: &str| record[field].as_str().unwrap_or_default().to_string();
    log["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|r| {
            (
                text(r, "actor"),
                text(r, "method"),
                text(r, "path"),
                r["status"].as_u64().unwrap_or(0),
                text(r, "outcome"),
            )
        })
        .collect()
}

fn row(
    actor: &str,
    method: &str,
    path: &str,
    status: u64,
    outcome: &str,
) -> (String, String, String, u64, String) {
    (actor.into(), method.into(), path.into(), status, outcome.into())
}

/// The 401s counted by `cms_audit_anonymous_total`, from an anonymous scrape.
async fn anonymous_counted(anonymous: &Api) -> f64 {
    crate::metrics::value(
        &crate::metrics::scrape(anonymous).await,
        "cms_audit_anonymous_total",
        &[("status", "401")],
    )
}

async fn records(admin: &Api, query: &str) -> Value {
    admin.get(&format!("{AUDIT}{query}")).await.expect(200)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutations_are_recorded_with_their_actor_and_no_secret() {
    let server = Server::start().await;
    let admin = server.api();
    let anonymous = admin.with_token(None);

    let created = admin.post(TENANTS, &tenant("acme")).await.expect(201);
    let mut changed = created.clone();
    changed["spec"]["kubernetesVersion"] = json!("1.31.2");
    admin.put(&tenant_path("acme"), &changed).await.expect(200);
    admin.post(&config_patches_path("acme"), &config_patch("sysctl")).await.expect(201);
    admin.delete(&format!("{}/sysctl", config_patches_path("acme"))).await.expect_empty(204);

    let viewer_user =
        json!({"metadata": {"name": "viewer"}, "spec": {"role": "view", "password": "viewer-password"}});
    admin.post("/api/v1/users", &viewer_user).await.expect(201);
    let viewer = anonymous.clone().login("viewer", "viewer-password").await;
    viewer.post(TENANTS, &tenant("nope")).await.expect_error(403, "Forbidden");
    anonymous.delete(&tenant_path("acme")).await.expect_error(401, "Unauthorized");
    viewer.get(AUDIT).await.expect_error(403, "Forbidden");
    anonymous.get(AUDIT).await.expect_error(401, "Unauthorized");

    let token = admin
        .post("/api/v1/users/admin/tokens", &json!({"metadata": {"name": "ci"}, "spec": {"expiresIn": "1h"}}))
        .await
        .expect(201);
    let secret = token["status"]["token"].as_str().expect("the token, shown once").to_string();
    let with_token = anonymous.with_token(Some(secret.clone()));
    with_token.delete(&tenant_path("acme")).await.expect(202);

    let log = records(&admin, "").await;
    let seen = summaries(&log);
    let expected = [
        row("admin", "DELETE", "/api/v1/tenants/acme", 202, "succeeded"),
        row("admin", "POST", "/api/v1/users/admin/tokens", 201, "succeeded"),
        row("viewer", "POST", "/api/v1/tenants", 403, "denied"),
        row("viewer", "POST", "/api/v1/auth/login", 200, "succeeded"),
        row("admin", "POST", "/api/v1/users", 201, "succeeded"),
        row("admin", "DELETE", "/api/v1/tenants/acme/configpatches/sysctl", 204, "succeeded"),
        row("admin", "POST", "/api/v1/tenants/acme/configpatches", 201, "succeeded"),
        row("admin", "PUT", "/api/v1/tenants/acme", 200, "succeeded"),
        row("admin", "POST", "/api/v1/tenants", 201, "succeeded"),
        row("admin", "POST", "/api/v1/auth/login", 200, "succeeded"),
    ];
    // The anonymous delete names nobody: counted, not on the log.
    assert_eq!(seen, expected, "{log:#}");
    assert_eq!(log["total"], 10);
    let items = log["items"].as_array().expect("items");
    let token_id = secret.split('_').nth(1).expect("the token's id");
    assert_eq!(items[0]["actorToken"], token_id, "a token's use names the token and its owner");
    assert_eq!(items[0]["target"], json!({"kind": "Tenant", "tenant": "acme", "name": "acme"}));
    assert_eq!(items[2]["actorRole"], "view");
    assert_eq!(items[8]["target"], json!({"kind": "Tenant", "tenant": "acme", "name": "acme"}));

    let text = log.to_string();
    let login_token = admin.token().expect("admin's login token");
    for secret in [ADMIN_PASSWORD, "viewer-password", secret.as_str(), login_token] {
        assert!(!text.contains(secret), "a secret is in the audit log: {text}");
    }
    assert!(!server.output().contains(&secret), "the token's secret is not logged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_pages_is_bounded_and_survives_kill_9() {
    let server = Server::options().env("CMS_AUDIT_RETENTION", "6").start().await;
    let admin = server.api();
    for name in ["t1", "t2", "t3", "t4", "t5"] {
        admin.post(TENANTS, &tenant(name)).await.expect(201);
    }
    // The admin's login and five creates: six records, the retention.
    let all = records(&admin, "").await;
    assert_eq!(all["total"], 6, "{all:#}");
    let ids: Vec<u64> =
        all["items"].as_array().expect("items").iter().map(|r| r["id"].as_u64().expect("id")).collect();
    let page = records(&admin, "?limit=2&offset=2").await;
    let page_ids: Vec<u64> =
        page["items"].as_array().expect("items").iter().map(|r| r["id"].as_u64().expect("id")).collect();
    assert_eq!((page_ids.as_slice(), page["total"].as_u64()), (&ids[2..4], Some(6)));
    assert_eq!(records(&admin, "?tenant=t3").await["total"], 1);
    admin.get(&format!("{AUDIT}?limit=0")).await.expect_error(400, "BadRequest");
    admin.get(&format!("{AUDIT}?offset=x")).await.expect_error(400, "BadRequest");

    // A flood of requests that name nobody, twice the retention, pushes
    // nothing out: they are counted instead.
    let anonymous = admin.with_token(None);
    let counted = anonymous_counted(&anonymous).await;
    for _ in 0..12 {
        anonymous.delete(&tenant_path("t1")).await.expect_error(401, "Unauthorized");
    }
    assert_eq!(anonymous_counted(&anonymous).await, counted + 12.0);
    assert_eq!(summaries(&records(&admin, "").await), summaries(&all), "the flood left the log as it was");

    admin.post(TENANTS, &tenant("t6")).await.expect(201);
    let server = server.kill().await.restart().await;
    let admin = server.api();
    let after = records(&admin, "").await;
    let seen = summaries(&after);
    assert_eq!(after["total"], 6, "still bounded: {after:#}");
    assert_eq!(seen[0], row("admin", "POST", "/api/v1/auth/login", 200, "succeeded"), "the harness's login");
    assert_eq!(seen[1], row("admin", "POST", "/api/v1/tenants", 201, "succeeded"));
    assert_eq!(after["items"][1]["target"]["name"], "t6", "the acknowledged create survived kill -9");
}

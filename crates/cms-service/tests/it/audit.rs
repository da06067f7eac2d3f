//! The audit log over HTTP: what each kind of mutation records, who may read
//! it, its pages and filters, and that no secret reaches it.

use actix_web::test::TestRequest;
use cms_model::UserRole;
use serde_json::{Value, json};

use crate::{ADMIN_PASSWORD, harness, json as with_json};

const AUDIT: &str = "/api/v1/audit";

/// The audit records, newest first, as the admin reads them.
async fn records<S>(h: &crate::Harness<S>, query: &str) -> Value
where
    S: actix_web::dev::Service<
            actix_http::Request,
            Response = actix_web::dev::ServiceResponse<actix_web::body::BoxBody>,
            Error = actix_web::Error,
        >,
{
    let reply = h.get(&format!("{AUDIT}{query}")).await;
    assert_eq!(reply.status.as_u16(), 200, "{}", reply.text());
    reply.json()
}

/// The fields of a record that tests compare.
fn summary(record: &Value) -> (String, String, String, u64, String) {
    let text = |field: &str| record[field].as_str().unwrap_or_default().to_string();
    (text("actor"), text("method"), text("path"), record["status"].as_u64().unwrap_or(0), text("outcome"))
}

#[actix_web::test]
async fn every_mutation_is_recorded_with_its_actor_and_outcome() {
    let h = harness().await;
    h.tenant("acme").await;
    let tenant = h.get("/api/v1/tenants/acme").await.json();
    let update = json!({"metadata": {"name": "acme", "resourceVersion": tenant["metadata"]["resourceVersion"]},
                        "spec": {"kubernetesVersion": "1.31.1"}});
    assert_eq!(h.put("/api/v1/tenants/acme", &update.to_string()).await.status.as_u16(), 200);
    let patch = r#"{"metadata":{"name":"dns"},"spec":{"format":"strategic","patches":[{"machine":{"network":{"hostname":"x"}}}]}}"#;
    let created = h.post("/api/v1/tenants/acme/configpatches", patch).await;
    assert_eq!(created.status.as_u16(), 201, "{}", created.text());
    assert_eq!(h.delete("/api/v1/tenants/acme/configpatches/dns").await.status.as_u16(), 204);
    let viewer = h.user("viewer", UserRole::View).await;
    let denied = TestRequest::post()
        .uri("/api/v1/tenants")
        .insert_header(("authorization", format!("Bearer {viewer}")));
    let denied = h.send_as(with_json(denied, r#"{"metadata":{"name":"nope"},"spec":{}}"#)).await;
    denied.error(403, "Forbidden");
    let anonymous = h.send_as(TestRequest::delete().uri("/api/v1/tenants/acme")).await;
    anonymous.error(401, "Unauthorized");
    h.post("/api/v1/tenants/acme/configpatches", r#"{"metadata":{"name":"x"},"spec":{"cout":1}}"#)
        .await
        .error(422, "Invalid");
    // A GET is never recorded.
    assert_eq!(h.get("/api/v1/tenants").await.status.as_u16(), 200);

    let log = records(&h, "").await;
    let items = log["items"].as_array().expect("items");
    let seen: Vec<_> = items.iter().map(summary).collect();
    // The anonymous delete names nobody: counted, not kept.
    let expected = [
        ("admin", "POST", "/api/v1/tenants/acme/configpatches", 422, "failed"),
        ("viewer", "POST", "/api/v1/tenants", 403, "denied"),
        ("admin", "DELETE", "/api/v1/tenants/acme/configpatches/dns", 204, "succeeded"),
        ("admin", "POST", "/api/v1/tenants/acme/configpatches", 201, "succeeded"),
        ("admin", "PUT", "/api/v1/tenants/acme", 200, "succeeded"),
        ("admin", "POST", "/api/v1/tenants", 201, "succeeded"),
    ];
    let expected: Vec<_> = expected
        .iter()
        .map(|(a, m, p, s, o)| (a.to_string(), m.to_string(), p.to_string(), *s, o.to_string()))
        .collect();
    assert_eq!(seen, expected, "newest first");
    assert_eq!(log["total"], 6);
    let create = &items[5];
    assert_eq!(create["target"], json!({"kind": "Tenant", "tenant": "acme", "name": "acme"}));
    assert_eq!(
        (create["actorRole"].as_str(), create["route"].as_str()),
        (Some("admin"), Some("/api/v1/tenants"))
    );
    assert_eq!(items[3]["target"], json!({"kind": "ConfigPatch", "tenant": "acme", "name": "dns"}));
    assert_eq!(items[1]["actorRole"], "view");
    for item in items {
        let id = item["requestId"].as_str().expect("request id");
        assert_eq!(id.len(), 36, "{item}");
        let time = item["time"].as_str().expect("time");
        assert!(chrono::DateTime::parse_from_rfc3339(time).is_ok() && time.ends_with('Z'), "{time}");
    }
}

#[actix_web::test]
async fn logins_and_tokens_are_recorded_without_their_secrets() {
    let h = harness().await;
    let login = |user: &str, password: &str| {
        let body = json!({"username": user, "password": password}).to_string();
        with_json(TestRequest::post().uri("/api/v1/auth/login"), &body)
    };
    assert_eq!(h.send_as(login("admin", ADMIN_PASSWORD)).await.status.as_u16(), 200);
    h.send_as(login("admin", "wrong-password-42")).await.error(401, "Unauthorized");
    let token =
        h.post("/api/v1/users/admin/tokens", r#"{"metadata":{"name":"ci"},"spec":{"expiresIn":"1h"}}"#).await;
    assert_eq!(token.status.as_u16(), 201, "{}", token.text());
    let secret = token.json()["status"]["token"].as_str().expect("token value").to_string();
    let with_token = TestRequest::post()
        .uri("/api/v1/tenants")
        .insert_header(("authorization", format!("Bearer {secret}")));
    let created = h
        .send_as(with_json(with_token, r#"{"metadata":{"name":"ci"},"spec":{"kubernetesVersion":"1.31.0"}}"#))
        .await;
    assert_eq!(created.status.as_u16(), 201, "{}", created.text());
    let user = r#"{"metadata":{"name":"dev"},"spec":{"role":"edit","password":"dev-secret-password"}}"#;
    assert_eq!(h.post("/api/v1/users", user).await.status.as_u16(), 201);

    let log = records(&h, "").await;
    let text = log.to_string();
    for secret in [ADMIN_PASSWORD, "wrong-password-42", "dev-secret-password", secret.as_str(), &h.token] {
        assert!(!text.contains(secret), "a secret is in the audit log: {text}");
    }
    let items = log["items"].as_array().expect("items");
    let seen: Vec<_> = items.iter().map(summary).collect();
    assert_eq!(seen[0], ("admin".into(), "POST".into(), "/api/v1/users".into(), 201, "succeeded".into()));
    assert_eq!(items[0]["target"], json!({"kind": "User", "name": "dev"}));
    let token_id = secret.split('_').nth(1).expect("token id");
    assert_eq!(
        (items[1]["actor"].as_str(), items[1]["actorToken"].as_str()),
        (Some("admin"), Some(token_id))
    );
    assert_eq!(items[2]["target"], json!({"kind": "ApiToken", "name": "ci"}));
    assert_eq!(
        summary(&items[3]),
        ("admin".into(), "POST".into(), "/api/v1/auth/login".into(), 401, "denied".into())
    );
    assert_eq!(summary(&items[4]).4, "succeeded");
    assert!(items[3].get("actorRole").is_none(), "a login attempt names the user, not a role");
}

#[actix_web::test]
async fn only_admins_read_the_audit_log() {
    let h = harness().await;
    for role in [UserRole::View, UserRole::Edit] {
        let token = h.user(role.as_str(), role).await;
        h.get_as(AUDIT, &token).await.error(403, "Forbidden");
    }
    h.send_as(TestRequest::get().uri(AUDIT)).await.error(401, "Unauthorized");
}

#[actix_web::test]
async fn pages_and_filters() {
    let h = harness().await;
    for name in ["a1", "a2", "a3"] {
        h.tenant(name).await;
    }
    let viewer = h.user("viewer", UserRole::View).await;
    let denied = TestRequest::delete()
        .uri("/api/v1/tenants/a2")
        .insert_header(("authorization", format!("Bearer {viewer}")));
    h.send_as(denied).await.error(403, "Forbidden");

    let all = records(&h, "").await;
    assert_eq!(all["total"], 4);
    let ids: Vec<u64> =
        all["items"].as_array().expect("items").iter().map(|i| i["id"].as_u64().expect("id")).collect();
    assert!(ids.windows(2).all(|pair| pair[0] > pair[1]), "newest first: {ids:?}");
    let page = records(&h, "?limit=2&offset=1").await;
    let page_ids: Vec<u64> =
        page["items"].as_array().expect("items").iter().map(|i| i["id"].as_u64().expect("id")).collect();
    assert_eq!((page_ids.as_slice(), page["total"].as_u64()), (&ids[1..3], Some(4)));
    assert_eq!(records(&h, "?actor=viewer").await["total"], 1);
    let a2 = records(&h, "?tenant=a2").await;
    assert_eq!(a2["total"], 2, "its create and the denied delete: {a2}");
    assert_eq!(records(&h, "?tenant=a2&actor=admin").await["total"], 1);
    for bad in ["?limit=0", "?limit=x", "?offset=-1", "?actr=viewer", "?tenant="] {
        h.get(&format!("{AUDIT}{bad}")).await.error(400, "BadRequest");
    }
}

/// The anonymous requests counted so far, by status, from an anonymous
/// scrape of `/metrics`.
async fn anonymous_counted<S>(h: &crate::Harness<S>, status: u16) -> u64
where
    S: actix_web::dev::Service<
            actix_http::Request,
            Response = actix_web::dev::ServiceResponse<actix_web::body::BoxBody>,
            Error = actix_web::Error,
        >,
{
    counted(h, &format!("cms_audit_anonymous_total{{status=\"{status}\"}}")).await
}

/// Requests that name nobody, in any number, leave the log as it was: a
/// flood of more than the retention of unauthenticated writes, writes to
/// unserved paths, logins as users that do not exist and throttled logins
/// is counted by `cms_audit_anonymous_total`, and the admin's records and
/// the failed logins against the real account stay.
#[actix_web::test]
async fn a_flood_of_anonymous_requests_is_counted_and_keeps_the_log() {
    let retention = 8;
    let h = crate::harness_keeping(cms_service::ServiceOptions::default(), retention).await;
    cms_service::metrics_handle();
    h.tenant("kept").await;
    let login = |user: &str| {
        let body = json!({"username": user, "password": "not-the-password"}).to_string();
        with_json(TestRequest::post().uri("/api/v1/auth/login"), &body)
    };
    // Five failures against the real account, then the throttle's refusals.
    for _ in 0..5 {
        h.send_as(login("admin")).await.error(401, "Unauthorized");
    }
    let flood = retention + 2;
    for n in 0..flood {
        h.send_as(TestRequest::delete().uri("/api/v1/tenants/kept")).await.error(401, "Unauthorized");
        h.send_as(TestRequest::post().uri(&format!("/api/v1/nowhere-{n}"))).await.error(404, "NotFound");
        h.send_as(login(&format!("nobody-{n}"))).await.error(401, "Unauthorized");
        h.send_as(login("admin")).await.error(429, "TooManyRequests");
    }
    assert_eq!(h.get("/api/v1/tenants/kept").await.status.as_u16(), 200, "the flood deleted nothing");

    let log = records(&h, "").await;
    let seen: Vec<_> = log["items"].as_array().expect("items").iter().map(summary).collect();
    let failed_login = ("admin".into(), "POST".into(), "/api/v1/auth/login".into(), 401, "denied".into());
    let mut expected = vec![failed_login; 5];
    expected.push(("admin".into(), "POST".into(), "/api/v1/tenants".into(), 201, "succeeded".into()));
    assert_eq!(seen, expected, "{log:#}");
    assert_eq!(anonymous_counted(&h, 401).await, 2 * flood);
    assert_eq!(anonymous_counted(&h, 404).await, flood);
    assert_eq!(anonymous_counted(&h, 429).await, flood);
}

/// The value of one series of `/metrics` (its name with its labels, as
/// printed), from an anonymous scrape; 0 when it is not there.
async fn counted<S>(h: &crate::Harness<S>, series: &str) -> u64
where
    S: actix_web::dev::Service<
            actix_http::Request,
            Response = actix_web::dev::ServiceResponse<actix_web::body::BoxBody>,
            Error = actix_web::Error,
        >,
{
    let scrape = h.send_as(TestRequest::get().uri("/metrics")).await.text();
    let prefix = format!("{series} ");
    scrape
        .lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .map_or(0, |value| value.trim().parse().expect("a count"))
}

/// A login as `user` with a wrong password from `peer`: through the API,
/// or through the console's form.
fn wrong_login(console: bool, user: &str, peer: &str) -> TestRequest {
    let peer = peer.parse().expect("a socket address");
    if console {
        TestRequest::post()
            .uri("/login")
            .peer_addr(peer)
            .insert_header(("content-type", "application/x-www-form-urlencoded"))
            .set_payload(format!("username={user}&password=not-the-password&next=%2F"))
    } else {
        let body = json!({"username": user, "password": "not-the-password"}).to_string();
        with_json(TestRequest::post().uri("/api/v1/auth/login").peer_addr(peer), &body)
    }
}

/// With password login off, a login checks no password, so it costs its
/// sender nothing: a flood of them naming `admin`, through the API and the
/// console, keeps nothing on the log and is counted.
#[actix_web::test]
async fn logins_while_password_login_is_off_are_counted_not_kept() {
    let h = harness().await;
    cms_service::metrics_handle();
    let options = cms_auth::AuthOptions {
        password_login: false,
        signing_key: Some(crate::SIGNING_KEY.to_vec().into()),
        ..Default::default()
    };
    let accounts: std::sync::Arc<dyn cms_store::Accounts> = h.store.clone();
    let auth = cms_auth::Authenticator::new(accounts, options).await.expect("authenticator");
    let state = &h.state;
    let off = cms_service::AppState::new(
        state.tenancy.clone(),
        std::sync::Arc::new(auth),
        state.audit.clone(),
        state.prober.clone(),
        state.options.clone(),
    );
    let service = actix_web::test::init_service(cms_service::app(off)).await;
    let flood = 20;
    for n in 0..flood {
        let peer = format!("[2001:db8:{n:x}::1]:4000");
        for console in [false, true] {
            let reply =
                actix_web::test::call_service(&service, wrong_login(console, "admin", &peer).to_request())
                    .await;
            assert_eq!(reply.status().as_u16(), 403, "console: {console}");
        }
    }
    assert_eq!(records(&h, "").await["total"], 0, "nothing kept");
    assert_eq!(anonymous_counted(&h, 403).await, 2 * flood);
}

/// With password login on, a guesser spread over many addresses (each
/// IPv6 /64 gets its own tries from the throttle) has its failures against
/// `admin` kept at most five a minute, through the API and the console
/// together; the rest are counted.
#[actix_web::test]
async fn failed_logins_from_many_addresses_keep_at_most_the_bound() {
    let h = harness().await;
    cms_service::metrics_handle();
    let tries = 12;
    for n in 0..tries {
        let peer = format!("[2001:db8:0:{n:x}::1]:4000");
        let reply = h.send_as(wrong_login(n % 2 == 1, "admin", &peer)).await;
        assert_eq!(reply.status.as_u16(), 401, "{}", reply.text());
    }
    let log = records(&h, "").await;
    let seen: Vec<_> = log["items"].as_array().expect("items").iter().map(summary).collect();
    let paths: Vec<_> =
        seen.iter().map(|(actor, _, path, status, _)| (actor.as_str(), path.as_str(), *status)).collect();
    let (api, console) = (("admin", "/api/v1/auth/login", 401), ("admin", "/login", 401));
    let expected = [api, console, api, console, api];
    assert_eq!(paths, expected, "the first five, newest first: {log:#}");
    assert_eq!(counted(&h, "cms_audit_failed_logins_not_kept_total").await, tries - 5);
}

//! Workload identity: bearer tokens of a trusted issuer served over HTTP
//! (discovery and keys), mapped to roles by subject pattern segment by
//! segment, with every check failing closed (audience, expiry, issuer, key,
//! a `*` that would have to cross a segment), and a key rollover at the
//! issuer accepted while the server runs.

use std::time::{Duration, Instant};

use cms_e2e::Api;
use cms_e2e::Server;
use cms_e2e::issuer::WorkloadIssuer;
use cms_oidc::testing::{TestKey, claims};
use serde_json::json;

const AUDIENCE: &str = "https://cms.e2e";
const MAIN: &str = "repo:acme/infra:ref:refs/heads/main";

fn token(key: &TestKey, issuer: &str, audience: &str, subject: &str, lifetime: i64) -> Option<String> {
    Some(key.sign(&claims(issuer, audience, subject, lifetime)))
}

#[tokio::test]
async fn workload_tokens_get_their_role_and_every_bad_one_is_401() {
    let old = TestKey::generate("ci-2026-1");
    let issuer = WorkloadIssuer::start(vec![old.clone()]).await;
    let trust = json!([{"issuer": issuer.url(), "audience": AUDIENCE,
        "subjects": {"repo:acme/*:ref:refs/heads/main": "edit", "repo:acme/*:ref:refs/heads/*": "view"}}]);
    let server = Server::options().env("CMS_WORKLOAD_ISSUERS", trust.to_string()).start().await;
    let as_token = |token: Option<String>| server.api().with_token(token);
    let url = issuer.url();

    // The main branch edits; another branch views.
    let main = as_token(token(&old, &url, AUDIENCE, MAIN, 300));
    let tenant = json!({"metadata": {"name": "from-ci"}, "spec": {"kubernetesVersion": "1.31.1"}});
    main.post("/api/v1/tenants", &tenant).await.expect(201);
    let branch = as_token(token(&old, &url, AUDIENCE, "repo:acme/infra:ref:refs/heads/dev", 300));
    branch.get("/api/v1/tenants/from-ci").await.expect(200);
    branch.post("/api/v1/tenants", &tenant).await.expect_error(403, "Forbidden");

    // Every bad token is a 401, whatever the route.
    let untrusted = TestKey::generate("ci-2026-1");
    let bad = [
        ("another audience", token(&old, &url, "https://elsewhere.e2e", MAIN, 300)),
        ("expired", token(&old, &url, AUDIENCE, MAIN, -120)),
        ("an untrusted issuer", token(&old, "https://untrusted.e2e", AUDIENCE, MAIN, 300)),
        ("a key the issuer does not publish", token(&untrusted, &url, AUDIENCE, MAIN, 300)),
        (
            "a subject no rule matches",
            token(&old, &url, AUDIENCE, "repo:evil/infra:ref:refs/heads/main", 300),
        ),
        (
            "a subject that a `*` would match only across segments",
            token(&old, &url, AUDIENCE, "repo:acme/x:ref:refs/heads/evil/y:ref:refs/heads/main", 300),
        ),
        ("a repository nested deeper", token(&old, &url, AUDIENCE, "repo:acme/a/b:ref:refs/heads/main", 300)),
    ];
    for (what, token) in bad {
        let message = as_token(token).get("/api/v1/tenants").await.expect_error(401, "Unauthorized");
        assert!(!message.contains("eyJ"), "{what}: the message never echoes the token: {message}");
    }

    // The issuer rolls its key over and retires the old one: the new key is
    // taken up without a restart, and the old one refused.
    let new = TestKey::generate("ci-2026-2");
    issuer.publish(vec![new.clone()]);
    let rolled = as_token(token(&new, &url, AUDIENCE, MAIN, 300));
    accepted_within(&rolled, Duration::from_secs(15)).await;
    let retired = as_token(token(&old, &url, AUDIENCE, MAIN, 300));
    retired.get("/api/v1/tenants").await.expect_error(401, "Unauthorized");

    // The audit log names the workload's issuer and subject.
    let audit = server.api().get("/api/v1/audit?tenant=from-ci").await.expect(200);
    let create = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|record| record["method"] == "POST" && record["status"] == 201)
        .expect("the create is on the audit log")
        .clone();
    assert_eq!(create["actor"], MAIN);
    assert_eq!(create["actorSource"], "workload");
    assert_eq!(create["actorIssuer"], url);
    assert_eq!(create["actorSubject"], MAIN);
}

/// Waits until `api` is served: a key the server has not fetched yet is
/// looked up again once a few seconds have passed since the last fetch.
async fn accepted_within(api: &Api, limit: Duration) {
    let began = Instant::now();
    loop {
        let reply = api.get("/api/v1/tenants").await;
        if reply.status == 200 {
            return;
        }
        assert!(began.elapsed() < limit, "the rolled-over key is still refused: {}", reply.json());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

//! The audit middleware over a `MockAudit`: what a record holds, which
//! requests make one, and that a failing audit log never fails a request.

use std::sync::{Arc, Mutex};

use actix_web::test::{self, TestRequest};
use cms_model::{AuditEntry, AuditOutcome, AuditTarget, UserRole};
use cms_store::{Key, MockAudit, MockStore, StoreError};

use super::*;
use crate::tests::{state, store_with_tenant};
use crate::{ServiceOptions, app};

fn check_target(
    pattern: &str,
    path: &str,
    created: Option<&str>,
    expected: Option<(&str, Option<&str>, Option<&str>)>,
) {
    let expected = expected.map(|(kind, tenant, name)| AuditTarget {
        kind: kind.into(),
        tenant: tenant.map(Into::into),
        name: name.map(Into::into),
    });
    assert_eq!(target(pattern, path, created), expected, "{pattern} {path}");
}

#[test]
fn targets_come_from_the_route() {
    check_target(
        "/api/v1/tenants",
        "/api/v1/tenants",
        Some("acme"),
        Some(("Tenant", Some("acme"), Some("acme"))),
    );
    check_target(
        "/api/v1/tenants/{name}",
        "/api/v1/tenants/acme",
        None,
        Some(("Tenant", Some("acme"), Some("acme"))),
    );
    check_target(
        "/api/v1/tenants/{tenant}/node-groups",
        "/api/v1/tenants/acme/node-groups",
        Some("workers"),
        Some(("NodeGroup", Some("acme"), Some("workers"))),
    );
    check_target(
        "/api/v1/tenants/{tenant}/configpatches/{name}",
        "/api/v1/tenants/acme/configpatches/dns",
        None,
        Some(("ConfigPatch", Some("acme"), Some("dns"))),
    );
    check_target(
        "/api/v1/tenants/{tenant}/machines/{id}/status",
        "/api/v1/tenants/acme/machines/workers-0/status",
        None,
        Some(("Machine", Some("acme"), Some("workers-0"))),
    );
    check_target("/api/v1/users/{name}", "/api/v1/users/dev", None, Some(("User", None, Some("dev"))));
    check_target(
        "/api/v1/users/{name}/tokens/{tokenName}",
        "/api/v1/users/dev/tokens/ci",
        None,
        Some(("ApiToken", None, Some("ci"))),
    );
    check_target("/api/v1/tenants", "/api/v1/tenants", None, Some(("Tenant", None, None)));
    check_target("/api/v1/auth/login", "/api/v1/auth/login", None, None);
    check_target("/healthz", "/healthz", None, None);
    check_target(
        "/tenants/{name}/node-groups/{group}/scale",
        "/tenants/acme/node-groups/cp/scale",
        None,
        Some(("NodeGroup", Some("acme"), Some("cp"))),
    );
    check_target("/tenants/new", "/tenants/new", Some("acme"), Some(("Tenant", Some("acme"), Some("acme"))));
    check_target("/logout", "/logout", None, None);
}

#[test]
fn names_are_clipped() {
    assert_eq!(clipped("dev"), "dev");
    assert_eq!(clipped(&"x".repeat(500)).len(), MAX_NAME);
    assert_eq!(clipped(&"é".repeat(40)).len(), MAX_NAME, "cut on a character boundary");
}

fn line(req: &HttpRequest, route: &str) -> RequestLine {
    RequestLine { route: Some(route.to_string()), ..RequestLine::of(req) }
}

#[test]
fn entries_name_the_caller() {
    let req = TestRequest::delete().uri("/api/v1/tenants/acme").to_http_request();
    let id = RequestId(uuid::Uuid::nil());
    req.extensions_mut().insert(id);
    req.extensions_mut().insert(Caller::local(
        "dev",
        UserRole::Edit,
        Credential::ApiToken { id: "0123456789abcdef".into() },
    ));
    let time = Utc::now();
    assert_eq!(
        entry(line(&req, "/api/v1/tenants/{name}"), Some(&req.extensions()), 403, time),
        AuditEntry {
            time,
            actor: "dev".into(),
            actor_role: Some(UserRole::Edit),
            actor_token: Some("0123456789abcdef".into()),
            actor_source: Some("local".into()),
            actor_issuer: None,
            actor_subject: Some("dev".into()),
            method: "DELETE".into(),
            route: Some("/api/v1/tenants/{name}".into()),
            path: "/api/v1/tenants/acme".into(),
            target: Some(AuditTarget {
                kind: "Tenant".into(),
                tenant: Some("acme".into()),
                name: Some("acme".into())
            }),
            status: 403,
            outcome: AuditOutcome::Denied,
            request_id: id.to_string(),
        }
    );
    let login = TestRequest::post().uri("/api/v1/auth/login").to_http_request();
    note_login(&login, "ops");
    let attempt = entry(line(&login, "/api/v1/auth/login"), Some(&login.extensions()), 401, time);
    assert_eq!((attempt.actor.as_str(), attempt.actor_role, attempt.target), ("ops", None, None));
    let workload = TestRequest::post().uri("/api/v1/tenants").to_http_request();
    workload.extensions_mut().insert(Caller {
        user: "repo:acme/infra:ref:refs/heads/main".into(),
        role: Some(UserRole::Edit),
        credential: Credential::Workload,
        source: cms_auth::Source::Workload {
            issuer: "https://token.actions.githubusercontent.com".into(),
            subject: "repo:acme/infra:ref:refs/heads/main".into(),
        },
        groups: Vec::new(),
        grants: cms_auth::Grants::default(),
    });
    let by_workload = entry(line(&workload, "/api/v1/tenants"), Some(&workload.extensions()), 201, time);
    assert_eq!(by_workload.actor_source.as_deref(), Some("workload"));
    assert_eq!(by_workload.actor_issuer.as_deref(), Some("https://token.actions.githubusercontent.com"));
    assert_eq!(by_workload.actor_subject.as_deref(), Some("repo:acme/infra:ref:refs/heads/main"));
    assert_eq!(by_workload.actor_token, None);
    let nobody = TestRequest::post().uri("/api/v1/nowhere").to_http_request();
    let unknown = entry(RequestLine::of(&nobody), None, 404, time);
    assert_eq!(
        (unknown.actor.as_str(), unknown.outcome, unknown.route),
        (ANONYMOUS, AuditOutcome::Failed, None)
    );
}

/// Runs `req` through the application with `audit` and the tenant `t1` in
/// a mock store.
async fn call(audit: MockAudit, store: MockStore, req: TestRequest) -> u16 {
    let mut state = state(Arc::new(store), ServiceOptions::default()).await;
    state.audit = Arc::new(audit);
    let service = test::init_service(app(state)).await;
    test::call_service(&service, req.to_request()).await.status().as_u16()
}

fn recording() -> (MockAudit, Arc<Mutex<Vec<AuditEntry>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut audit = MockAudit::new();
    let sink = seen.clone();
    audit.expect_record().returning(move |entry| {
        sink.lock().expect("lock").push(entry);
        Ok(7)
    });
    (audit, seen)
}

#[actix_web::test]
async fn mutations_are_recorded_with_their_status() {
    let (audit, seen) = recording();
    let mut store = store_with_tenant();
    store.expect_delete().returning(|_: Key| Err(StoreError::Refused("no".into())));
    let status = call(audit, store, TestRequest::delete().uri("/api/v1/tenants/t1/node-groups/g1")).await;
    assert_eq!(status, 409);
    let entries = seen.lock().expect("lock").clone();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let entry = &entries[0];
    assert_eq!((entry.method.as_str(), entry.status, entry.outcome), ("DELETE", 409, AuditOutcome::Failed));
    assert_eq!(entry.route.as_deref(), Some("/api/v1/tenants/{tenant}/node-groups/{name}"));
    assert_eq!(entry.target.as_ref().and_then(|t| t.tenant.as_deref()), Some("t1"));
    assert!(!entry.request_id.is_empty(), "the request id is recorded");
}

#[actix_web::test]
async fn invalid_bodies_are_recorded_without_the_body() {
    let (audit, seen) = recording();
    let body =
        r#"{"metadata":{"name":"acme"},"spec":{"kubernetesVersion":"1.31.0","cout":3,"secret":"hunter2"}}"#;
    let req = TestRequest::post().uri("/api/v1/tenants").insert_header(("content-type", "application/json"));
    let status = call(audit, store_with_tenant(), req.set_payload(body)).await;
    assert_eq!(status, 422);
    let entries = seen.lock().expect("lock").clone();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].outcome, AuditOutcome::Failed);
    let json = serde_json::to_string(&entries[0]).expect("json");
    assert!(!json.contains("hunter2") && !json.contains("cout"), "{json}");
}

#[actix_web::test]
async fn reads_are_not_recorded() {
    let mut audit = MockAudit::new();
    audit.expect_record().never();
    assert_eq!(call(audit, store_with_tenant(), TestRequest::get().uri("/api/v1/tenants/t1")).await, 200);
}

#[actix_web::test]
async fn a_failing_audit_log_does_not_fail_the_request() {
    let mut audit = MockAudit::new();
    audit.expect_record().times(1).returning(|_| Err(StoreError::Corrupt("disk on fire".into())));
    let mut store = store_with_tenant();
    store.expect_delete().returning(|_: Key| Ok(cms_store::Deleted::Removed));
    let status = call(audit, store, TestRequest::delete().uri("/api/v1/tenants/t1/configpatches/p1")).await;
    assert_eq!(status, 204);
}

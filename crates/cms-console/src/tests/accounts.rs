//! The account pages: the audit log, users and API tokens; what a viewer
//! sees of them and is refused; forms without their token.

use bytes::Bytes;
use chrono::{TimeDelta, Utc};
use cms_auth::Credential;
use cms_model::{AuditEntry, AuditOutcome, AuditTarget, UserRole};
use cms_store::Audit;
use http::{Method, StatusCode};

use super::{ADMIN, Fixture, VIEWER, location, request};
use crate::CreatedName;

/// Records a request of `actor` on tenant `tenant`, `seconds` ago.
async fn record(f: &Fixture, actor: &str, tenant: &str, seconds: i64) {
    let entry = AuditEntry {
        time: Utc::now() - TimeDelta::seconds(seconds),
        actor: actor.to_string(),
        actor_role: Some(UserRole::Admin),
        actor_token: None,
        actor_source: None,
        actor_issuer: None,
        actor_subject: None,
        method: "DELETE".to_string(),
        route: Some("/api/v1/tenants/{name}".to_string()),
        path: format!("/api/v1/tenants/{tenant}"),
        target: Some(AuditTarget {
            kind: "Tenant".to_string(),
            tenant: Some(tenant.to_string()),
            name: Some(tenant.to_string()),
        }),
        status: 202,
        outcome: AuditOutcome::Succeeded,
        request_id: format!("request-{seconds}"),
    };
    f.store.record(entry).await.expect("recorded");
}

/// How many audit rows a page shows.
fn rows(body: &str) -> usize {
    body.matches("<tr data-audit-id=").count()
}

#[tokio::test]
async fn an_admin_reads_the_audit_log_newest_first_filtered_and_paged() {
    let f = Fixture::new().await;
    for second in 0..60 {
        record(&f, "alice", "demo", 1000 - second).await;
    }
    for second in 0..5 {
        record(&f, "bob", "other", 100 - second).await;
    }
    let admin = f.sign_in(ADMIN).await;
    let first = f.get("/audit", Some(&admin)).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    let body = &first.body;
    assert_eq!(rows(body), 50);
    assert!(body.contains("Audit records 1 to 50 of 65"), "{body}");
    assert!(body.contains("<tr data-audit-id=\"65\">"), "the newest first: {body}");
    assert!(body.find("data-audit-id=\"65\"") < body.find("data-audit-id=\"64\""));
    for expected in [
        "<label for=\"actor\">Actor</label>",
        "<label for=\"tenant\">Tenant</label>",
        "<th class=\"actor\" scope=\"row\">bob</th>",
        "<td class=\"method\">DELETE</td>",
        "<code>/api/v1/tenants/other</code>",
        "<td class=\"target\">Tenant <span class=\"name\">other</span></td>",
        "<td class=\"outcome\" data-outcome=\"succeeded\">succeeded</td>",
        "<a rel=\"next\" href=\"/audit?page=2\">",
    ] {
        assert!(body.contains(expected), "{expected} in {body}");
    }
    let second = f.get("/audit?page=2", Some(&admin)).await;
    assert_eq!(rows(&second.body), 15);
    assert!(second.body.contains("Audit records 51 to 65 of 65"));
    assert!(second.body.contains("<a rel=\"prev\" href=\"/audit\">"));
    assert!(!second.body.contains("rel=\"next\""));

    let bob = f.get("/audit?actor=bob&tenant=", Some(&admin)).await;
    assert_eq!(rows(&bob.body), 5);
    assert!(!bob.body.contains(">alice<"), "{}", bob.body);
    assert!(bob.body.contains("id=\"actor\" name=\"actor\" type=\"search\" value=\"bob\""));
    let demo = f.get("/audit?tenant=demo&page=2", Some(&admin)).await;
    assert_eq!(rows(&demo.body), 10);
    assert!(demo.body.contains("<a rel=\"prev\" href=\"/audit?tenant=demo\">"), "{}", demo.body);
    let nobody = f.get("/audit?actor=nobody", Some(&admin)).await;
    assert!(nobody.body.contains("<p id=\"no-records\">No records match.</p>"));
    assert_eq!(f.get("/audit?page=0", Some(&admin)).await.status, StatusCode::BAD_REQUEST);
    assert_eq!(location(&f.get("/audit", None).await), "/login?next=%2Faudit");
}

#[tokio::test]
async fn a_viewer_sees_only_its_tokens_and_is_refused_the_admin_pages_and_forms() {
    let f = Fixture::new().await;
    let admin = f.sign_in(ADMIN).await;
    let home = f.get("/", Some(&admin)).await;
    for link in ["href=\"/audit\"", "href=\"/users\"", "href=\"/tokens\""] {
        assert!(home.body.contains(link), "an admin sees {link}");
    }
    let viewer = f.sign_in(VIEWER).await;
    let home = f.get("/", Some(&viewer)).await;
    assert!(home.body.contains("<a id=\"nav-tokens\" href=\"/tokens\">API tokens</a>"), "{}", home.body);
    for link in ["href=\"/audit\"", "href=\"/users\""] {
        assert!(!home.body.contains(link), "a viewer sees no {link}");
    }
    for (path, message) in
        [("/audit", "role view may not read the audit log"), ("/users", "role view may not manage users")]
    {
        let reply = f.get(path, Some(&viewer)).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{path}");
        assert!(reply.body.contains(message), "{path}: {}", reply.body);
    }
    assert_eq!(f.get("/tokens", Some(&viewer)).await.status, StatusCode::OK);

    let forged = [
        ("/users/new", vec![("name", "forged"), ("role", "admin"), ("password", "forged-password")]),
        ("/users/viewer/role", vec![("role", "admin")]),
        ("/users/admin/delete", vec![("confirm", "admin")]),
    ];
    for (path, fields) in forged {
        let reply = f.submit(path, &viewer, &fields).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{path}");
        assert!(reply.body.contains("<h1>Forbidden</h1>"), "a page: {}", reply.body);
        assert!(reply.body.contains("role view may not manage users"), "{path}: {}", reply.body);
    }
    let users = f.auth.accounts().users().await.expect("users");
    let roles: Vec<(&str, Option<UserRole>)> =
        users.iter().map(|user| (user.name.as_str(), user.role)).collect();
    assert_eq!(roles, [(ADMIN, Some(UserRole::Admin)), (VIEWER, Some(UserRole::View))], "nothing changed");
}

#[tokio::test]
async fn forms_without_their_token_change_nothing() {
    let f = Fixture::new().await;
    let admin = f.sign_in(ADMIN).await;
    let (_, record) = f.auth.create_token(ADMIN, "ci", 24).await.expect("a token");
    let attempts = [
        ("/users/new", vec![("name", "mallory"), ("role", "admin"), ("password", "mallory-password")]),
        ("/users/viewer/role", vec![("role", "admin"), ("csrf", "0000")]),
        ("/users/viewer/delete", vec![("confirm", "viewer")]),
        ("/tokens/new", vec![("name", "stolen"), ("expiresIn", "24h")]),
        ("/tokens/ci/revoke", vec![]),
    ];
    for (path, fields) in attempts {
        let reply = f.post(path, Some(&admin), &fields).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{path}");
        assert!(reply.body.contains("security token"), "{path}: {}", reply.body);
        assert_eq!(location(&f.post(path, None, &fields).await), "/login", "{path} without a session");
    }
    let users = f.auth.accounts().users().await.expect("users");
    assert_eq!(users.len(), 2);
    assert!(users.iter().all(|user| user.name != "viewer" || user.role == Some(UserRole::View)));
    let tokens = f.auth.accounts().tokens(ADMIN.to_string()).await.expect("tokens");
    assert_eq!(tokens.iter().map(|token| token.id.as_str()).collect::<Vec<_>>(), [record.id.as_str()]);
}

#[tokio::test]
async fn creating_changing_and_deleting_users_shows_refusals_at_their_fields() {
    let f = Fixture::new().await;
    let admin = f.sign_in(ADMIN).await;
    let page = f.get("/users", Some(&admin)).await;
    assert_eq!(page.status, StatusCode::OK);
    for expected in [
        "<tr data-user=\"viewer\">",
        "<td class=\"role\">view</td>",
        "<label for=\"user-name\">Name</label>",
        "<label for=\"user-role\">Role</label>",
        "<label for=\"user-password\">Password</label>",
        "<label for=\"role-viewer\">Role of viewer</label>",
        "action=\"/users/viewer/delete\"",
    ] {
        assert!(page.body.contains(expected), "{expected} in {}", page.body);
    }

    let bad_name = f
        .submit("/users/new", &admin, &[("name", "Alice"), ("role", "edit"), ("password", "alice-pw-1")])
        .await;
    assert_eq!(bad_name.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", bad_name.body);
    assert!(bad_name.body.contains("<p class=\"field-error\" id=\"user-name-error\">"), "{}", bad_name.body);
    assert!(
        bad_name.body.contains("aria-describedby=\"user-name-hint user-name-error\" aria-invalid=\"true\"")
    );
    assert!(bad_name.body.contains("<div class=\"failure\" id=\"form-error\" role=\"alert\">"));
    let short =
        f.submit("/users/new", &admin, &[("name", "alice"), ("role", "edit"), ("password", "short")]).await;
    assert_eq!(short.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        short
            .body
            .contains("<p class=\"field-error\" id=\"user-password-error\">must be at least 8 characters")
    );
    assert!(short.body.contains("value=\"alice\""), "the name is kept");
    assert!(!short.body.contains("value=\"short\""), "the password is never sent back");
    assert!(f.auth.accounts().user("alice".into()).await.expect("read").is_none());

    let fields = [("name", "alice"), ("role", "edit"), ("password", "alice-password")];
    let created = f.console.handle(form_request("/users/new", &admin, &fields)).await;
    assert_eq!(created.status(), StatusCode::SEE_OTHER);
    assert_eq!(created.extensions().get::<CreatedName>(), Some(&CreatedName("alice".into())));
    let alice = f.auth.accounts().user("alice".into()).await.expect("read").expect("alice exists");
    assert_eq!(alice.role, Some(UserRole::Edit));
    let again = f.submit("/users/new", &admin, &fields).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert!(again.body.contains("<p class=\"field-error\" id=\"user-name-error\">"), "{}", again.body);

    let version = alice.resource_version.to_string();
    let promoted =
        f.submit("/users/alice/role", &admin, &[("role", "admin"), ("resourceVersion", &version)]).await;
    assert_eq!(location(&promoted), "/users");
    let stale =
        f.submit("/users/alice/role", &admin, &[("role", "view"), ("resourceVersion", &version)]).await;
    assert_eq!(stale.status, StatusCode::CONFLICT, "{}", stale.body);
    assert!(stale.body.contains("<p class=\"field-error\" id=\"role-alice-error\">"), "{}", stale.body);
    let alice = f.auth.accounts().user("alice".into()).await.expect("read").expect("alice exists");
    assert_eq!(alice.role, Some(UserRole::Admin));
    assert_eq!(
        f.submit("/users/nobody/role", &admin, &[("role", "view")]).await.status,
        StatusCode::NOT_FOUND
    );

    let unconfirmed = f.submit("/users/alice/delete", &admin, &[]).await;
    assert_eq!(unconfirmed.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(unconfirmed.body.contains("<p class=\"field-error\" id=\"confirm-alice-error\">"));
    let deleted = f.submit("/users/alice/delete", &admin, &[("confirm", "alice")]).await;
    assert_eq!(location(&deleted), "/users");
    assert!(f.auth.accounts().user("alice".into()).await.expect("read").is_none());
    let last = f.submit("/users/admin/delete", &admin, &[("confirm", "admin")]).await;
    assert_eq!(last.status, StatusCode::CONFLICT, "the last admin stays: {}", last.body);
    assert!(last.body.contains("<p class=\"field-error\" id=\"confirm-admin-error\">"), "{}", last.body);
}

#[tokio::test]
async fn a_token_is_shown_once_works_and_is_revoked() {
    let f = Fixture::new().await;
    let viewer = f.sign_in(VIEWER).await;
    let page = f.get("/tokens", Some(&viewer)).await;
    assert!(page.body.contains("<p id=\"no-tokens\">"), "{}", page.body);
    assert!(page.body.contains("<label for=\"token-expires-in\">Expires in</label>"));

    let days = f.submit("/tokens/new", &viewer, &[("name", "ci"), ("expiresIn", "30d")]).await;
    assert_eq!(days.status, StatusCode::UNPROCESSABLE_ENTITY, "the API's lifetimes: {}", days.body);
    assert!(days.body.contains("<p class=\"field-error\" id=\"token-expires-in-error\">"), "{}", days.body);
    assert!(days.body.contains("value=\"30d\""), "the form keeps what was typed");

    let fields = [("name", "ci"), ("expiresIn", "24h")];
    let created = f.console.handle(form_request("/tokens/new", &viewer, &fields)).await;
    assert_eq!(created.extensions().get::<CreatedName>(), Some(&CreatedName("ci".into())));
    let created =
        f.send(form_request("/tokens/new", &viewer, &[("name", "deploy"), ("expiresIn", "24h")])).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.header("cache-control"), "no-store");
    let value = token_value(&created.body);
    assert!(value.starts_with("cms_"), "{value}");
    assert!(created.body.contains("readonly"), "{}", created.body);
    assert!(created.body.contains("data-copy"));
    let caller = f.auth.authenticate(&value).await.expect("the token works");
    assert_eq!(caller.user, VIEWER);
    assert!(matches!(caller.credential, Credential::ApiToken { .. }));

    let list = f.get("/tokens", Some(&viewer)).await;
    assert!(list.body.contains("<tr data-token=\"deploy\">") && list.body.contains("<tr data-token=\"ci\">"));
    assert!(!list.body.contains(&value), "the value is shown only once");
    assert!(!list.body.contains("id=\"token-value\""));
    let admin = f.sign_in(ADMIN).await;
    assert!(!f.get("/tokens", Some(&admin)).await.body.contains("data-token="), "each sees their own");

    let again = f.submit("/tokens/new", &viewer, &fields).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert!(again.body.contains("<p class=\"field-error\" id=\"token-name-error\">"), "{}", again.body);

    let revoked = f.submit("/tokens/deploy/revoke", &viewer, &[]).await;
    assert_eq!(location(&revoked), "/tokens");
    assert!(f.auth.authenticate(&value).await.is_err(), "a revoked token stops working");
    assert!(!f.get("/tokens", Some(&viewer)).await.body.contains("data-token=\"deploy\""));
    assert_eq!(f.submit("/tokens/deploy/revoke", &viewer, &[]).await.status, StatusCode::NOT_FOUND);
    assert_eq!(f.submit("/tokens/ci/revoke", &admin, &[]).await.status, StatusCode::NOT_FOUND, "not theirs");
}

/// A caller signed in at the identity provider under a local user's name
/// is not that user: the token pages answer 403, as the API does, and no
/// token of the local user is shown, made or revoked. An admin from the
/// provider manages the local user's tokens, as it may through the API.
#[tokio::test]
async fn a_single_sign_on_user_named_like_a_local_user_gets_none_of_its_tokens() {
    let f = Fixture::new().await;
    let (kept, _) = f.auth.create_token(VIEWER, "kept", 24).await.expect("a token of the local viewer");
    let impostor = f.sso_session(VIEWER, &["devs"]);
    let caller = f.auth.authenticate(&impostor).await.expect("a valid session");
    assert_eq!((caller.user.as_str(), caller.source.kind()), (VIEWER, "oidc"));

    let page = f.get("/tokens", Some(&impostor)).await;
    assert_eq!(page.status, StatusCode::FORBIDDEN, "{}", page.body);
    assert!(page.body.contains("API tokens belong to local users"), "{}", page.body);
    assert!(!page.body.contains("data-token="), "{}", page.body);
    let fields = [("name", "stolen"), ("expiresIn", "24h")];
    let created = f.submit("/tokens/new", &impostor, &fields).await;
    assert_eq!(created.status, StatusCode::FORBIDDEN, "{}", created.body);
    assert!(!created.body.contains("id=\"token-value\""), "{}", created.body);
    let revoked = f.submit("/tokens/kept/revoke", &impostor, &[]).await;
    assert_eq!(revoked.status, StatusCode::FORBIDDEN, "{}", revoked.body);

    let stored = f.auth.accounts().tokens(VIEWER.to_string()).await.expect("the viewer's tokens");
    let names: Vec<&str> = stored.iter().map(|token| token.name.as_str()).collect();
    assert_eq!(names, ["kept"], "no token made for the impostor, none revoked");
    assert_eq!(f.auth.authenticate(&kept.value).await.expect("the token still works").user, VIEWER);

    let admin = f.sso_session(VIEWER, &["platform"]);
    let page = f.get("/tokens", Some(&admin)).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("<tr data-token=\"kept\">"), "{}", page.body);
    assert!(page.body.contains("id=\"tokens-of-local-user\""), "the page says whose tokens: {}", page.body);
}

/// A posted form with `session`'s form token.
fn form_request(path: &str, session: &str, fields: &[(&str, &str)]) -> crate::Request {
    let token = crate::csrf::token_for(session);
    let body: String = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .append_pair("csrf", &token)
        .finish();
    request(Method::POST, path, Some(session), Bytes::from(body))
}

/// The token value of the page that shows it once.
fn token_value(body: &str) -> String {
    let field = body.find("id=\"token-value\"").expect("the token's field");
    let rest = &body[field..];
    let start = rest.find("value=\"").expect("a value") + "value=\"".len();
    rest[start..].split('"').next().unwrap_or_default().to_string()
}

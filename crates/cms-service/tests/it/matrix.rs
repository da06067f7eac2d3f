//! The role × route matrix: every route of the application's route table,
//! called by every kind of caller, answers as the permission matrix says.

use actix_web::http::Method;
use actix_web::test::TestRequest;
use base64::Engine;
use cms_auth::{Authenticator, LoginClaims, SsoClaims};
use cms_model::{Kind, UserRole};
use cms_oidc::testing::TestKey;
use cms_service::{Access, ROUTES, RouteInfo};
use cms_store::{Accounts, Draft, Key, Store, TokenRecord};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use secrecy::SecretString;

use crate::{Harness, SIGNING_KEY, SSO_ISSUER, WORKLOAD_AUDIENCE, WORKLOAD_ISSUER, harness};

/// Who calls, and how it proves it.
struct Caller {
    label: &'static str,
    /// The `Authorization` header, if any.
    token: Option<String>,
    /// Whether its credential is accepted at all.
    gets_in: bool,
    /// Its global role.
    role: Option<UserRole>,
    /// Its role on tenant `t1`: its global role joined with its grants.
    on_t1: Option<UserRole>,
    /// The role its grants give it, on whichever tenant.
    granted: Option<UserRole>,
    user: &'static str,
}

impl Caller {
    /// A caller whose role is `role` on every tenant, or one turned away (`None`).
    fn global(
        label: &'static str,
        token: Option<String>,
        role: Option<UserRole>,
        user: &'static str,
    ) -> Caller {
        Caller { label, token, gets_in: role.is_some(), role, on_t1: role, granted: None, user }
    }

    /// A caller whose global role is `role` and whose grants give it `granted`,
    /// which on `t1` makes `on_t1`.
    fn granted(
        label: &'static str,
        token: String,
        role: Option<UserRole>,
        granted: UserRole,
        on_t1: Option<UserRole>,
        user: &'static str,
    ) -> Caller {
        Caller { label, token: Some(token), gets_in: true, role, on_t1, granted: Some(granted), user }
    }
}

fn forge(claims: &LoginClaims, header: Header, key: &[u8]) -> String {
    jsonwebtoken::encode(&header, claims, &EncodingKey::from_secret(key)).expect("encode")
}

fn claims(user: &str, expires_in: i64) -> LoginClaims {
    let now = chrono::Utc::now().timestamp();
    LoginClaims {
        iss: "cms".into(),
        aud: "cms-api".into(),
        sub: user.into(),
        iat: now - 120,
        exp: now + expires_in,
        jti: "forged".into(),
        typ: "login".into(),
        sso: None,
    }
}

/// A login token of a user signed in at the identity provider `issuer`
/// with `groups`, signed as this server signs them.
fn sso_login(user: &str, issuer: &str, groups: &[&str]) -> String {
    let tokens =
        cms_auth::LoginTokens::new(&SIGNING_KEY.to_vec().into(), std::time::Duration::from_secs(600))
            .expect("tokens");
    let sso = SsoClaims {
        iss: issuer.into(),
        sub: format!("sub-{user}"),
        groups: groups.iter().map(|group| group.to_string()).collect(),
    };
    tokens.issue_with(user, Some(sso)).expect("token").0
}

/// A workload token from `issuer` for `audience` about `subject`, signed by `key`.
fn workload(key: &TestKey, issuer: &str, audience: &str, subject: &str, lifetime: i64) -> String {
    key.sign(&cms_oidc::testing::claims(issuer, audience, subject, lifetime))
}

fn unsigned(claims: &LoginClaims) -> String {
    let encode = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let body = serde_json::to_vec(claims).expect("claims");
    format!("{}.{}.", encode(br#"{"alg":"none","typ":"JWT"}"#), encode(&body))
}

async fn login(auth: &Authenticator, user: &str, password: &str) -> String {
    auth.login(user, &SecretString::from(password.to_string()), None).await.expect("login").0
}

async fn callers<S>(h: &Harness<S>) -> Vec<Caller> {
    let auth = &h.state.auth;
    for (name, role) in [("viewer", UserRole::View), ("editor", UserRole::Edit)] {
        auth.create_user(name, role, &SecretString::from(format!("{name}-password"))).await.expect("user");
    }
    let (revoked, _) = auth.create_token("viewer", "revoked", 1).await.expect("token");
    auth.revoke_token("viewer", "revoked").await.expect("revoke");
    let (fresh, record) = auth.create_token("editor", "fresh", 1).await.expect("token");
    let expired_id = "00000000000000ee";
    let past = chrono::Utc::now() - chrono::Duration::hours(2);
    let expired = TokenRecord {
        id: expired_id.into(),
        name: "expired".into(),
        expires_at: past + chrono::Duration::hours(1),
        created_at: past,
        ..record.clone()
    };
    h.store.create_token(expired).await.expect("expired token");
    let expired_value = fresh.value.replace(&record.id, expired_id);
    let mut wrong_aud = claims("admin", 600);
    wrong_aud.aud = "somebody-else".into();
    let hs256 = Header::new(Algorithm::HS256);
    let denied = |label, token: String| Caller::global(label, Some(token), None, "admin");
    let key = h.workload_key.clone();
    let ci = |key: &TestKey, subject: &str, lifetime| {
        workload(key, WORKLOAD_ISSUER, WORKLOAD_AUDIENCE, subject, lifetime)
    };
    let grants = granted_callers(h).await;
    let mut callers = vec![
        Caller::global("anonymous", None, None, "admin"),
        Caller::global(
            "view",
            Some(login(auth, "viewer", "viewer-password").await),
            Some(UserRole::View),
            "viewer",
        ),
        Caller::global(
            "edit",
            Some(login(auth, "editor", "editor-password").await),
            Some(UserRole::Edit),
            "editor",
        ),
        Caller::global("admin", Some(h.token.clone()), Some(UserRole::Admin), "admin"),
        denied("expired JWT", forge(&claims("admin", -120), hs256.clone(), SIGNING_KEY)),
        denied("JWT with the wrong aud", forge(&wrong_aud, hs256.clone(), SIGNING_KEY)),
        denied("JWT with alg none", unsigned(&claims("admin", 600))),
        denied("JWT signed with another key", forge(&claims("admin", 600), hs256, &[9u8; 32])),
        denied("revoked API token", revoked.value),
        denied("expired API token", expired_value),
        federated(
            "SSO user in viewers",
            sso_login("v@example.com", SSO_ISSUER, &["viewers"]),
            UserRole::View,
        ),
        federated(
            "SSO user in viewers and devs",
            sso_login("e@example.com", SSO_ISSUER, &["viewers", "devs"]),
            UserRole::Edit,
        ),
        federated(
            "SSO user in platform",
            sso_login("a@example.com", SSO_ISSUER, &["platform"]),
            UserRole::Admin,
        ),
        denied("SSO user in no mapped group", sso_login("n@example.com", SSO_ISSUER, &["others"])),
        denied(
            "SSO login of another provider",
            sso_login("a@example.com", "https://other.test", &["platform"]),
        ),
        federated("workload on main", ci(&key, "repo:acme/infra:ref:refs/heads/main", 300), UserRole::Edit),
        federated(
            "workload on a branch",
            ci(&key, "repo:acme/infra:ref:refs/heads/dev", 300),
            UserRole::View,
        ),
        denied("workload of another org", ci(&key, "repo:evil/infra:ref:refs/heads/main", 300)),
        denied("expired workload token", ci(&key, "repo:acme/infra:ref:refs/heads/main", -120)),
        denied(
            "workload token for another audience",
            workload(&key, WORKLOAD_ISSUER, "https://elsewhere.test", "repo:acme/x", 300),
        ),
        denied(
            "workload token of an untrusted issuer",
            workload(&key, "https://untrusted.test", WORKLOAD_AUDIENCE, "repo:acme/x", 300),
        ),
        denied(
            "workload token signed by a key the issuer does not publish",
            workload(&TestKey::generate("ci-1"), WORKLOAD_ISSUER, WORKLOAD_AUDIENCE, "repo:acme/x", 300),
        ),
    ];
    callers.extend(grants);
    callers
}

/// A caller from elsewhere: its permissions are its role's, but API tokens
/// are only for local users.
fn federated(label: &'static str, token: String, role: UserRole) -> Caller {
    Caller::global(label, Some(token), Some(role), "admin")
}

/// Grants, and the callers they give roles on tenants: `t1` (labelled
/// `team=a`) by name and by selector, `t2` only, and none at all.
async fn granted_callers<S>(h: &Harness<S>) -> Vec<Caller> {
    let auth = &h.state.auth;
    let grant = |role: &str, kind: &str, subject: &str, tenants: serde_json::Value| {
        let spec = serde_json::json!({"role": role, "subjects": [{"kind": kind, "name": subject}], "tenants": tenants});
        serde_json::from_value::<cms_model::GrantSpec>(spec).expect("a grant spec")
    };
    let grants = [
        ("t1-viewers", grant("view", "Group", "t1-viewers", serde_json::json!({"names": ["t1"]}))),
        ("team-a-edit", grant("edit", "Group", "team-a", serde_json::json!({"selector": "team=a"}))),
        ("t2-devs", grant("edit", "Group", "t2-devs", serde_json::json!({"names": ["t2"]}))),
        ("raised", grant("edit", "User", "granted-viewer", serde_json::json!({"names": ["t1"]}))),
        ("roleless", grant("view", "User", "granted-only", serde_json::json!({"selector": "team in (a,b)"}))),
        (
            "ci-other",
            grant(
                "edit",
                "Workload",
                "repo:other/*:ref:refs/heads/main",
                serde_json::json!({"names": ["t1"]}),
            ),
        ),
    ];
    for (name, spec) in grants {
        auth.create_grant(name, spec).await.expect("grant");
    }
    auth.create_user("granted-viewer", UserRole::View, &SecretString::from("granted-viewer-password"))
        .await
        .expect("user");
    for name in ["granted-only", "no-role"] {
        auth.create_user(name, None, &SecretString::from(format!("{name}-password"))).await.expect("user");
    }
    let ci = workload(
        &h.workload_key,
        WORKLOAD_ISSUER,
        WORKLOAD_AUDIENCE,
        "repo:other/x:ref:refs/heads/main",
        300,
    );
    use UserRole::{Edit, View};
    vec![
        Caller::granted(
            "SSO user in no mapped group with a view grant on t1",
            sso_login("gv@example.com", SSO_ISSUER, &["others", "t1-viewers"]),
            None,
            View,
            Some(View),
            "admin",
        ),
        Caller::granted(
            "SSO user with an edit grant on t1's label",
            sso_login("ga@example.com", SSO_ISSUER, &["team-a"]),
            None,
            Edit,
            Some(Edit),
            "admin",
        ),
        Caller::granted(
            "SSO user with an edit grant on another tenant",
            sso_login("gb@example.com", SSO_ISSUER, &["t2-devs"]),
            None,
            Edit,
            None,
            "admin",
        ),
        Caller::granted(
            "SSO viewer with an edit grant on t1's label",
            sso_login("gva@example.com", SSO_ISSUER, &["viewers", "team-a"]),
            Some(View),
            Edit,
            Some(Edit),
            "admin",
        ),
        Caller::granted(
            "viewer with an edit grant on t1",
            login(auth, "granted-viewer", "granted-viewer-password").await,
            Some(View),
            Edit,
            Some(Edit),
            "granted-viewer",
        ),
        Caller::granted(
            "user with no role and a view grant on t1's label",
            login(auth, "granted-only", "granted-only-password").await,
            None,
            View,
            Some(View),
            "granted-only",
        ),
        Caller {
            gets_in: true,
            ..Caller::global(
                "user with no role and no grant",
                Some(login(auth, "no-role", "no-role-password").await),
                None,
                "no-role",
            )
        },
        Caller::granted("workload matched by a grant only, edit on t1", ci, None, Edit, Some(Edit), "admin"),
    ]
}

/// The concrete URI of a route, with its parameters filled for `user`.
fn uri(route: &RouteInfo, user: &str) -> String {
    let path = route
        .path
        .replace("{tenant}", "t1")
        .replace("{id}", "m1")
        .replace("{kind}", "machine")
        .replace("{token}", "no-such-token")
        .replace("/users/{name}", &format!("/users/{user}"))
        .replace("{name}", "t1");
    if route.api { format!("{}{path}", cms_service::API_PREFIX) } else { path }
}

fn request(route: &RouteInfo, caller: &Caller) -> TestRequest {
    let method = Method::from_bytes(route.method.as_bytes()).expect("method");
    let mut request = TestRequest::default().method(method.clone()).uri(&uri(route, caller.user));
    if method == Method::POST || method == Method::PUT {
        request = request.insert_header(("content-type", "application/json")).set_payload("{}");
    }
    if let Some(token) = &caller.token {
        request = request.insert_header(("authorization", format!("Bearer {token}")));
    }
    request
}

#[actix_web::test]
async fn every_route_answers_every_caller_as_the_matrix_says() {
    let h = harness().await;
    // A control-plane group and machine, so that the client and machine
    // configs of t1 can be built and only the caller decides the answer.
    let tenant = r#"{"metadata":{"name":"t1","labels":{"team":"a"}},"spec":{"kubernetesVersion":"1.31.0",
        "controlPlaneEndpoint":"https://10.0.0.1:6443","nodeGroups":[
        {"name":"cp","role":"controlplane","count":1,"providerClass":"metal:m",
         "providerConfig":{"hosts":[{"address":"10.0.0.1"}]}}]}}"#;
    assert_eq!(h.post("/api/v1/tenants", tenant).await.status.as_u16(), 201);
    let spec = serde_json::json!({"nodeGroup": "cp", "managementAddress": "10.0.0.1:50000"});
    let machine = Draft { spec, ..Draft::default() };
    h.store.create(Key::child(Kind::Machine, "t1", "m1"), machine).await.expect("machine");
    let item = cms_model::Projected {
        tenant: "t1".into(),
        kind: "Machine".into(),
        tf_type: "terraform_data".into(),
        name: "m1".into(),
        spec: serde_json::json!({}),
    };
    h.store.set_projection("t1".into(), vec![item]).await.expect("projection");
    let callers = callers(&h).await;
    assert!(ROUTES.len() >= 30, "the table holds every route: {}", ROUTES.len());
    for route in ROUTES {
        for caller in &callers {
            let reply = h.send_as(request(route, caller)).await;
            let what = format!("{} {} as {}", route.method, route.path, caller.label);
            let status = reply.status.as_u16();
            let from_elsewhere = caller.label.starts_with("SSO") || caller.label.starts_with("workload");
            match route.access {
                // `/metrics` needs no token, but checks one that is sent,
                // which would show tenant names.
                Access::Public if route.path == "/metrics" && caller.token.is_some() && !caller.gets_in => {
                    reply.error(401, "Unauthorized");
                }
                Access::Public => assert!(status != 401 && status != 403, "{what}: {status}"),
                _ if !caller.gets_in => {
                    reply.error(401, "Unauthorized");
                }
                Access::Requires(_)
                    if from_elsewhere
                        && route.path.starts_with("/users/{name}/tokens")
                        && caller.role != Some(UserRole::Admin) =>
                {
                    let message = reply.error(403, "Forbidden");
                    assert!(message.contains("local users"), "{what}: {message}");
                }
                Access::Requires(permission) if !permission.allows_global(caller.role) => {
                    let message = reply.error(403, "Forbidden");
                    assert!(message.contains(UserRole::global_name(caller.role)), "{what}: {message}");
                }
                Access::OnTenants(permission)
                    if !permission.allows_global(caller.role)
                        && !caller.granted.is_some_and(|role| permission.allows(role)) =>
                {
                    let message = reply.error(403, "Forbidden");
                    assert!(message.contains(UserRole::global_name(caller.role)), "{what}: {message}");
                }
                Access::OnTenant(_) if caller.on_t1.is_none() => {
                    let message = reply.error(404, "NotFound");
                    assert_eq!(message, "tenant \"t1\" not found", "{what}: as a tenant that does not exist");
                }
                Access::OnTenant(permission) if !caller.on_t1.is_some_and(|role| permission.allows(role)) => {
                    let message = reply.error(403, "Forbidden");
                    let role = caller.on_t1.map(UserRole::as_str).unwrap_or_default();
                    assert!(message.contains(role), "{what}: the role on t1 is named: {message}");
                }
                access => {
                    let body = reply.json();
                    assert!(!matches!(status, 401 | 403 | 405 | 500..), "{what}: {status} {body}");
                    let document = ["/kubeconfig", "/talosconfig", "/secrets", "/config"];
                    if document.iter().any(|end| route.path.ends_with(end)) {
                        assert_eq!(status, 200, "{what}: the documents of t1 are served: {body}");
                    }
                    let unrouted = body["error"].as_str().is_some_and(|e| e.starts_with("no route"));
                    assert!(!unrouted, "{what}: the route is not served: {body}");
                    // The lists across tenants hold what there is of t1
                    // (one tenant, machine, projected item, health) for a
                    // caller that sees t1, and nothing for one that does not.
                    if matches!(access, Access::OnTenants(_)) && route.method == "GET" {
                        let count = body["total"]
                            .as_u64()
                            .or_else(|| body["tenants"].as_array().map(|all| all.len() as u64));
                        let expected = u64::from(caller.on_t1.is_some());
                        assert_eq!(count, Some(expected), "{what}: lists hold the tenants it sees: {body}");
                    }
                }
            }
        }
    }
}

#[actix_web::test]
async fn a_view_token_reads_but_cannot_write_or_touch_other_tokens() {
    let h = harness().await;
    h.tenant("t1").await;
    let auth = &h.state.auth;
    auth.create_user("viewer", UserRole::View, &SecretString::from("viewer-password")).await.expect("user");
    let token = login(auth, "viewer", "viewer-password").await;
    let as_viewer =
        |request: TestRequest| request.insert_header(("authorization", format!("Bearer {token}")));
    let body = r#"{"metadata":{"name":"ci"},"spec":{"expiresIn":"24h"}}"#;
    let created =
        h.send_as(crate::json(as_viewer(TestRequest::post().uri("/api/v1/users/viewer/tokens")), body)).await;
    assert_eq!(created.status.as_u16(), 201, "{:?}", created.json());
    let value = created.json()["status"]["token"].as_str().expect("token shown once").to_string();
    assert!(value.starts_with("cms_"));
    let bearer = |request: TestRequest| request.insert_header(("authorization", format!("Bearer {value}")));
    let read = h.send_as(bearer(TestRequest::get().uri("/api/v1/tenants/t1"))).await;
    assert_eq!(read.status.as_u16(), 200);
    let tenant = r#"{"metadata":{"name":"t2"},"spec":{"kubernetesVersion":"1.31.0"}}"#;
    h.send_as(crate::json(bearer(TestRequest::post().uri("/api/v1/tenants")), tenant))
        .await
        .error(403, "Forbidden");
    let listed = h.send_as(bearer(TestRequest::get().uri("/api/v1/users/viewer/tokens"))).await;
    assert_eq!(listed.json()["items"][0]["metadata"]["name"], "ci");
    assert!(listed.json()["items"][0]["status"].get("token").is_none(), "values are shown only once");
    h.send_as(bearer(TestRequest::get().uri("/api/v1/users/admin/tokens"))).await.error(403, "Forbidden");
}

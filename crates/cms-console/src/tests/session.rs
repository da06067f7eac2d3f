//! Signing in and out, the cookie's attributes, redirects to the sign-in
//! page and back, the form token, and the headers every answer carries.

use http::{Method, StatusCode};

use super::{ADMIN, Fixture, location, request};
use crate::ConsoleOptions;

#[tokio::test]
async fn signing_in_sets_a_strict_http_only_cookie() {
    let f = Fixture::new().await;
    let reply = f.post("/login", None, &[("username", ADMIN), ("password", "admin-password")]).await;
    assert_eq!(location(&reply), "/");
    let cookie = reply.header("set-cookie");
    let token = reply.session_cookie().expect("a session token");
    assert_eq!(cookie, format!("cms_session={token}; HttpOnly; SameSite=Strict; Path=/"));
    let caller = f.auth.authenticate(&token).await.expect("the cookie holds a login token");
    assert_eq!(caller.user, ADMIN);
    assert_eq!(f.get("/", Some(&token)).await.status, StatusCode::OK);

    let secure =
        Fixture::with_options(ConsoleOptions { secure_cookies: true, ..ConsoleOptions::default() }).await;
    let reply = secure.post("/login", None, &[("username", ADMIN), ("password", "admin-password")]).await;
    assert!(reply.header("set-cookie").ends_with("; HttpOnly; SameSite=Strict; Path=/; Secure"));
}

#[tokio::test]
async fn wrong_passwords_and_throttling_show_on_the_form() {
    let f = Fixture::new().await;
    let wrong = [("username", ADMIN), ("password", "not-the-password")];
    let reply = f.post("/login", None, &wrong).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    assert!(reply.body.contains("Invalid user name or password."), "{}", reply.body);
    assert!(reply.body.contains("value=\"admin\""), "the name is kept");
    assert!(reply.session_cookie().is_none());
    let mut last = reply;
    for _ in 0..6 {
        last = f.post("/login", None, &wrong).await;
    }
    assert_eq!(last.status, StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = last.header("retry-after").parse().expect("Retry-After in seconds");
    assert!(last.body.contains(&format!("Try again in {retry} second")), "{}", last.body);
}

#[tokio::test]
async fn pages_send_the_signed_out_to_sign_in_and_back() {
    let f = Fixture::new().await;
    f.tenant("demo", serde_json::json!({}), "active").await;
    let reply = f.get("/tenants/demo?tab=spec", None).await;
    assert_eq!(location(&reply), "/login?next=%2Ftenants%2Fdemo%3Ftab%3Dspec");
    let expired = f.get("/tenants/demo", Some("not-a-valid-token")).await;
    assert_eq!(location(&expired), "/login?next=%2Ftenants%2Fdemo");
    assert_eq!(location(&f.get("/", None).await), "/login");

    let login = f.get("/login?next=%2Ftenants%2Fdemo%3Ftab%3Dspec", None).await;
    assert_eq!(login.status, StatusCode::OK);
    assert!(login.body.contains("name=\"next\" value=\"/tenants/demo?tab=spec\""), "{}", login.body);
    let fields = [("username", ADMIN), ("password", "admin-password"), ("next", "/tenants/demo?tab=spec")];
    let signed_in = f.post("/login", None, &fields).await;
    assert_eq!(location(&signed_in), "/tenants/demo?tab=spec");
    let token = signed_in.session_cookie().expect("a session");
    assert_eq!(location(&f.get("/login?next=%2Ftenants%2Fdemo", Some(&token)).await), "/tenants/demo");

    for next in ["//evil.example/", "https://evil.example/", "/\\evil.example"] {
        let fields = [("username", ADMIN), ("password", "admin-password"), ("next", next)];
        assert_eq!(location(&f.post("/login", None, &fields).await), "/", "{next}");
    }
}

#[tokio::test]
async fn forms_without_the_session_s_token_are_refused() {
    let f = Fixture::new().await;
    f.tenant("demo", serde_json::json!({}), "active").await;
    let token = f.sign_in(ADMIN).await;
    for csrf in [None, Some("0".repeat(64)), Some(crate::csrf::token_for("another-session"))] {
        let mut fields = vec![("confirm", "demo".to_string())];
        fields.extend(csrf.map(|csrf| ("csrf", csrf)));
        let fields: Vec<(&str, &str)> = fields.iter().map(|(name, value)| (*name, value.as_str())).collect();
        let reply = f.post("/tenants/demo/delete", Some(&token), &fields).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.body);
        assert!(reply.body.contains("security token is missing or does not match"), "{}", reply.body);
    }
    assert!(f.console.store().get(&cms_store::Key::tenant("demo")).is_some_and(|t| !t.deleting));
    let logout = f.post("/logout", Some(&token), &[]).await;
    assert_eq!(logout.status, StatusCode::FORBIDDEN);

    let page = f.get("/tenants/demo", Some(&token)).await;
    assert_eq!(page.csrf(), crate::csrf::token_for(&token));
    assert!(!page.body.contains(&token), "no page holds the session token");
    let out = f.submit("/logout", &token, &[]).await;
    assert_eq!(location(&out), "/login");
    assert_eq!(out.header("set-cookie"), "cms_session=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0");
}

#[tokio::test]
async fn a_sign_in_posted_from_another_site_is_refused() {
    let f = Fixture::new().await;
    let body = bytes::Bytes::from_static(b"username=admin&password=admin-password");
    let mut cross = request(Method::POST, "/login", None, body);
    cross.headers_mut().insert("sec-fetch-site", http::HeaderValue::from_static("cross-site"));
    let reply = f.send(cross).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    assert!(reply.session_cookie().is_none());
}

#[tokio::test]
async fn every_answer_carries_the_security_headers() {
    let f = Fixture::new().await;
    let token = f.sign_in(ADMIN).await;
    let script = crate::assets::script_path();
    let answers = [
        f.get("/login", None).await,
        f.get("/", None).await,
        f.get("/", Some(&token)).await,
        f.get("/tenants/missing", Some(&token)).await,
        f.get("/nowhere", None).await,
        f.get(&script, None).await,
        f.post("/tenants/x/delete", Some(&token), &[]).await,
        f.get("/logout", Some(&token)).await,
    ];
    for reply in &answers {
        assert_eq!(
            reply.header("content-security-policy"),
            "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
            "{reply:?}"
        );
        assert_eq!(reply.header("x-content-type-options"), "nosniff");
        assert_eq!(reply.header("referrer-policy"), "same-origin");
        assert!(!reply.body.contains("style=") && !reply.body.contains("onclick"), "{}", reply.body);
        assert!(!reply.body.contains("<script>"), "no inline script");
    }
    assert_eq!(answers[3].status, StatusCode::NOT_FOUND);
    assert_eq!(answers[7].status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(answers[7].header("allow"), "POST");
    assert_eq!(answers[5].header("cache-control"), "public, max-age=31536000, immutable");
    assert_eq!(answers[5].header("content-type"), "text/javascript; charset=utf-8");
    assert!(answers[2].body.contains(&format!("<script src=\"{script}\" defer></script>")));
}

#[tokio::test]
async fn the_event_stream_refuses_the_signed_out_with_401() {
    let f = Fixture::new().await;
    let reply = f.get("/events", None).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    let reply = f.get("/events", Some("expired")).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
}

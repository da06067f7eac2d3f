//! The console's account pages in a real browser, against the real server:
//! an admin reads and filters the audit log, creates a user, and creates an
//! API token that is shown once and then works against the API. Every page
//! the test visits is checked with axe-core, and the test writes the
//! screenshots `docs/console/audit.png`, `users.png` and `tokens.png`.

use cms_e2e::browser::Browser;
use cms_e2e::fixtures::{TENANTS, tenant};
use cms_e2e::{ADMIN_PASSWORD, ADMIN_USER, Api, Server};
use serde_json::{Value, json};

use crate::console::{screenshot, sign_in};

/// The user the admin creates with the form.
const VIEWER: (&str, &str) = ("vera", "vera-password");

/// An admin opens the audit log and filters it by actor, creates a user
/// (refused at the password field first), then creates an API token, sees
/// its value once, copies it, uses it against the API and revokes it; the
/// audit log names the user and the token each form changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_reads_the_audit_log_creates_a_user_and_an_api_token() {
    let server = Server::start().await;
    let api = server.api();
    let base = format!("http://{}", server.addr());
    let browser = Browser::start().await;

    // The audit log, with a refused sign-in of another user on it: a wrong
    // password for an account that exists (one for an unknown name is
    // counted, not kept).
    let mallory =
        json!({"metadata": {"name": "mallory"}, "spec": {"role": "view", "password": "mallory-password"}});
    api.post("/api/v1/users", &mallory).await.expect(201);
    browser.goto(&format!("{base}/")).await;
    browser.wait_for_path("/login").await;
    sign_in(&browser, "mallory", "not-the-password").await;
    browser.find("#login-error").await;
    sign_in(&browser, ADMIN_USER, ADMIN_PASSWORD).await;
    browser.wait_for_path("/").await;
    api.post(TENANTS, &tenant("alpha")).await.expect(201);
    browser.click("#nav-audit").await;
    browser.wait_for_path("/audit").await;
    browser.find("#audit tbody tr").await;
    assert!(
        actors(&browser).await.iter().any(|actor| actor == "mallory"),
        "the refused sign-in is on record"
    );
    browser.assert_accessible("the audit page").await;
    browser.screenshot(&screenshot("audit")).await;
    browser.fill("#actor", "mallory").await;
    browser.submit("#audit-filters").await;
    browser.wait_for_path("/audit?actor=mallory&tenant=").await;
    let shown = actors(&browser).await;
    assert!(!shown.is_empty() && shown.iter().all(|actor| actor == "mallory"), "{shown:?}");
    browser.assert_accessible("the filtered audit page").await;

    // A user, refused at its field first.
    let (viewer, password) = VIEWER;
    browser.click("#nav-users").await;
    browser.wait_for_path("/users").await;
    browser.assert_accessible("the users page").await;
    browser.fill("#user-name", viewer).await;
    browser.select("#user-role", "view").await;
    browser.fill("#user-password", "short").await;
    browser.submit("#create-user").await;
    browser.wait_for_text("#user-password-error", "at least 8 characters").await;
    assert_eq!(browser.attr("#user-password", "aria-invalid").await.as_deref(), Some("true"));
    browser.assert_accessible("the users page with a refused field").await;
    browser.fill("#user-password", password).await;
    browser.submit("#create-user").await;
    browser.wait_for_path("/users").await;
    assert_eq!(browser.text("tr[data-user=vera] .role").await, "view");
    let user = api.get(&format!("/api/v1/users/{viewer}")).await.expect(200);
    assert_eq!(user["spec"]["role"], "view", "{user}");
    top(&browser).await;
    browser.screenshot(&screenshot("users")).await;

    // An API token, shown once.
    browser.click("#nav-tokens").await;
    browser.wait_for_path("/tokens").await;
    browser.find("#no-tokens").await;
    browser.assert_accessible("the tokens page").await;
    browser.fill("#token-name", "ci").await;
    browser.fill("#token-expires-in", "24h").await;
    browser.submit("#create-token").await;
    let value = browser.attr("#token-value", "value").await.expect("the token's value");
    assert!(value.starts_with("cms_"), "{value}");
    assert_eq!(browser.attr("#token-value", "readonly").await.as_deref(), Some("true"));
    browser.click("#new-token button.copy").await;
    // Headless browsers may refuse the clipboard; either way the script says what it did.
    let said = browser
        .wait_until("the Copy button says what it did", || async {
            Some(browser.text("#token-value-status").await).filter(|text| !text.is_empty())
        })
        .await;
    assert!(said.contains("Copied") || said.contains("selected"), "{said}");
    browser.assert_accessible("the new token").await;
    top(&browser).await;
    browser.screenshot(&screenshot("tokens")).await;

    let bearer = api.with_token(Some(value.clone()));
    let tokens = bearer.get(&format!("/api/v1/users/{ADMIN_USER}/tokens")).await.expect(200);
    assert_eq!(tokens["items"][0]["metadata"]["name"], "ci", "the token works: {tokens}");
    browser.goto(&format!("{base}/tokens")).await;
    browser.find("tr[data-token=ci]").await;
    assert!(!browser.exists("#token-value").await, "the value is shown once");
    let leaked =
        browser.execute("return document.body.textContent.includes(arguments[0])", vec![json!(value)]).await;
    assert_eq!(leaked, false, "the list does not hold the value");
    browser.submit("tr[data-token=ci] form.revoke").await;
    browser.wait_gone("tr[data-token=ci]").await;
    bearer.get(TENANTS).await.expect_error(401, "Unauthorized");

    assert_audited(&api, viewer).await;
    browser.close().await;
}

/// The audit log names the user and the token that the console's forms
/// changed.
async fn assert_audited(api: &Api, viewer: &str) {
    let records = api.get(&format!("/api/v1/audit?actor={ADMIN_USER}")).await.expect(200);
    let items = records["items"].as_array().cloned().unwrap_or_default();
    let target = |path: &str, status: u16| -> Value {
        let record = items.iter().find(|record| record["path"] == path && record["status"] == status);
        record.map(|record| record["target"].clone()).unwrap_or(Value::Null)
    };
    assert_eq!(target("/users/new", 303), json!({"kind": "User", "name": viewer}), "{records}");
    assert_eq!(target("/tokens/new", 201), json!({"kind": "ApiToken", "name": "ci"}), "{records}");
    assert_eq!(target("/tokens/ci/revoke", 303), json!({"kind": "ApiToken", "name": "ci"}), "{records}");
}

/// The actor of every row of the audit table.
async fn actors(browser: &Browser) -> Vec<String> {
    let script =
        "return [...document.querySelectorAll('#audit tbody .actor')].map((cell) => cell.textContent)";
    let actors = browser.execute(script, Vec::new()).await;
    serde_json::from_value(actors).expect("a list of actors")
}

/// Scrolls to the top with nothing focused, for a screenshot.
async fn top(browser: &Browser) {
    browser.execute("document.activeElement.blur(); window.scrollTo(0, 0); return null", Vec::new()).await;
}

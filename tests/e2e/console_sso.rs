//! Signing in to the console at a real OpenID Connect provider
//! (oidc-provider-mock) in headless Chromium. The console is opened as
//! `localhost` and the provider runs on `127.0.0.1`, so the provider's
//! redirect back is a cross-site navigation, as with a real provider: the
//! sign-in must survive the `SameSite` rules of its cookies.

use cms_e2e::Server;
use cms_e2e::browser::{Browser, Fetch};
use cms_e2e::fixtures::TENANTS;
use cms_e2e::oidc::OidcProvider;
use serde_json::{Value, json};

use crate::metrics::{scrape, value};
use crate::sso::{kube_subject, sso_server, tenant};

/// The console's address as the browser uses it: another site than the
/// provider's `127.0.0.1`.
fn console_url(server: &Server) -> String {
    format!("http://localhost:{}", server.addr().port())
}

/// From the console's sign-in page through the provider's form as `sub`.
async fn sign_in_at_provider(browser: &Browser, server: &Server, sub: &str) {
    browser.goto(&format!("{}/", console_url(server))).await;
    browser.wait_for_path("/login").await;
    browser.click("#sso-login").await;
    browser.fill("input[name=sub]", sub).await;
    browser.click("button[type=submit]").await;
}

/// A user in `devs` signs in through the provider and lands on the tenants
/// as an editor: the header names them and their role, offers no API
/// tokens (those are for local users), and the kubeconfig the console
/// hands them carries their group. A user in no mapped group is turned
/// away on a page that says why, with no session. The page with both ways
/// of signing in, and the pages after, pass axe-core.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_signs_in_at_the_provider_and_gets_the_role_of_its_groups() {
    let provider = OidcProvider::start().await;
    provider.set_user("carol", json!({"email": "carol@example.com", "groups": ["devs"]})).await;
    provider.set_user("dave", json!({"email": "dave@example.com", "groups": ["contractors"]})).await;
    let server = sso_server(&provider).await;
    server.api().post(TENANTS, &tenant("web")).await.expect(201);
    let browser = Browser::start().await;

    browser.goto(&format!("{}/login", console_url(&server))).await;
    assert!(browser.exists("#login").await, "password sign-in stays beside single sign-on");
    browser.assert_accessible("the sign-in page with single sign-on").await;

    sign_in_at_provider(&browser, &server, "carol").await;
    browser.wait_for_path("/").await;
    assert_eq!(browser.text("#user").await, "carol@example.com");
    assert_eq!(browser.text("#role").await, "edit");
    assert!(!browser.exists("#nav-tokens").await, "API tokens are for local users");
    browser.find("a[href='/tenants/web']").await;
    browser.assert_accessible("the tenants of a user signed in at the provider").await;
    let download = browser.fetch(Fetch::get("/tenants/web/kubeconfig")).await;
    assert_eq!(download.status, 200, "{}", download.body);
    let (cn, groups) = kube_subject(&download.body);
    assert_eq!(
        (cn.as_str(), groups.as_slice()),
        ("oidc:carol@example.com", &["system:masters".to_string(), "oidc:devs".to_string()][..])
    );

    // Signed out, then a user whose groups map to no role.
    browser.click("#sign-out button").await;
    browser.wait_for_path("/login").await;
    sign_in_at_provider(&browser, &server, "dave").await;
    let failure = browser.wait_for_text("#failure", "dave@example.com").await;
    assert!(browser.path().await.starts_with("/sso/callback"), "{failure}");
    browser.assert_accessible("the refused sign-in").await;
    browser.goto(&format!("{}/", console_url(&server))).await;
    browser.wait_for_path("/login").await;
    browser.close().await;

    // The sign-in is on the audit log, without the code; the refusal,
    // which names no user of this server, is counted.
    let audit = server.api().get("/api/v1/audit?limit=100").await.expect(200);
    let callbacks: Vec<&Value> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|record| record["route"] == "/sso/callback")
        .collect();
    assert_eq!(callbacks.len(), 1, "dave's refusal names nobody the server knows: {audit}");
    let carol =
        callbacks.iter().find(|record| record["actor"] == "carol@example.com").expect("carol's sign-in");
    assert_eq!(
        (carol["status"].as_u64(), carol["actorSource"].as_str()),
        (Some(200), Some("oidc")),
        "{carol}"
    );
    assert_eq!(carol["actorSubject"], "carol");
    let counted = value(&scrape(&server.api()).await, "cms_audit_anonymous_total", &[("status", "403")]);
    assert_eq!(counted, 1.0, "dave's refusal is counted instead");
    assert!(!audit.to_string().contains("code="), "no authorization code on record");
}

/// With password login off, the sign-in page offers the provider alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_password_login_off_the_console_offers_the_provider_alone() {
    let provider = OidcProvider::start().await;
    provider.set_user("carol", json!({"email": "carol@example.com", "groups": ["viewers"]})).await;
    let server = Server::options()
        .env("CMS_SSO_ISSUER", provider.issuer())
        .env("CMS_SSO_CLIENT_ID", "cms-e2e")
        .env("CMS_SSO_CLIENT_SECRET", "e2e-client-secret")
        .env("CMS_SSO_GROUP_ROLES", "viewers=view")
        .env("CMS_PASSWORD_LOGIN", "false")
        .start()
        .await;
    let browser = Browser::start().await;
    browser.goto(&format!("{}/login", console_url(&server))).await;
    browser.find("#sso-login").await;
    assert!(!browser.exists("#password").await, "no password field");
    browser.assert_accessible("the sign-in page with the provider alone").await;
    sign_in_at_provider(&browser, &server, "carol").await;
    browser.wait_for_path("/").await;
    assert_eq!(browser.text("#role").await, "view");
    browser.close().await;
}

//! The tenants page's label filter in a real browser: a Kubernetes label
//! selector narrows the table, the live updates respect it (the server says
//! whether each tenant matches), and a malformed one is shown at its field.

use cms_e2e::browser::Browser;
use cms_e2e::fixtures::{TENANTS, tenant};
use cms_e2e::{ADMIN_PASSWORD, ADMIN_USER, Api, Server};
use serde_json::{Value, json};

use crate::console::sign_in;

async fn labelled(api: &Api, name: &str, labels: Value) {
    let mut body = tenant(name);
    body["metadata"]["labels"] = labels;
    api.post(TENANTS, &body).await.expect(201);
}

/// The names of the table's rows, in order.
async fn rows(browser: &Browser) -> Value {
    let script =
        "return [...document.querySelectorAll('#tenants tbody tr')].map((row) => row.dataset.tenant)";
    browser.execute(script, Vec::new()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tenant_list_filters_by_label_selector_and_follows_it_live() {
    let server = Server::start().await;
    let api = server.api();
    labelled(&api, "web", json!({"team": "a", "env": "dev"})).await;
    labelled(&api, "db", json!({"team": "a", "env": "prod"})).await;
    labelled(&api, "ops", json!({"team": "c"})).await;
    labelled(&api, "cache", json!({"team": "b"})).await;
    let base = format!("http://{}", server.addr());
    let browser = Browser::start().await;
    browser.goto(&format!("{base}/")).await;
    browser.wait_for_path("/login").await;
    sign_in(&browser, ADMIN_USER, ADMIN_PASSWORD).await;
    browser.wait_for_path("/").await;
    browser.find("tr[data-tenant=ops]").await;

    browser.fill("#label", "team in (a,b),env!=prod").await;
    browser.submit("#filters").await;
    browser.wait_for_text("#tenants caption", "Tenants 1 to 2 of 2").await;
    assert_eq!(rows(&browser).await, json!(["cache", "web"]));
    assert_eq!(browser.attr("#label", "value").await.as_deref(), Some("team in (a,b),env!=prod"));
    let hint = browser.attr("#label", "aria-describedby").await.unwrap_or_default();
    assert_eq!(hint, "label-hint", "the field is described by its hint");
    browser.assert_accessible("the tenants page filtered by labels").await;

    // Live: a tenant the selector refuses stays off the table, one it takes
    // comes in, in name order; the server judges, the script follows.
    browser.execute("window.cmsConsoleTest = 'not reloaded'; return null", Vec::new()).await;
    labelled(&api, "bulk", json!({"team": "b", "env": "prod"})).await;
    labelled(&api, "api", json!({"team": "b"})).await;
    browser.find("tr[data-tenant=api]").await;
    browser.wait_for_text("#tenants caption", "Tenants 1 to 3 of 3").await;
    assert_eq!(rows(&browser).await, json!(["api", "cache", "web"]), "bulk (env=prod) is not listed");
    let marker = browser.execute("return window.cmsConsoleTest || null", Vec::new()).await;
    assert_eq!(marker, "not reloaded");

    // A malformed selector: the message at the field, no table, no 500.
    browser.fill("#label", "team in (a").await;
    browser.submit("#filters").await;
    let message = browser.wait_for_text("#label-error", "is not valid").await;
    assert!(message.contains("\"team in (a\"") && message.contains("expected ',' or ')'"), "{message}");
    assert_eq!(browser.attr("#label", "aria-invalid").await.as_deref(), Some("true"));
    let described = browser.attr("#label", "aria-describedby").await.unwrap_or_default();
    assert!(described.split(' ').any(|id| id == "label-error"), "{described}");
    assert!(!browser.exists("#tenants").await, "a malformed selector lists nothing");
    assert_eq!(browser.text("h1").await, "Tenants");
    browser.assert_accessible("the tenants page with a malformed label selector").await;
    browser.close().await;
}

//! Config patches and the YAML editor of the web console in a real browser
//! (`cms_e2e::browser`), against the real server: an admin adds a config
//! patch from the tenant page, is refused an invalid one at its field,
//! edits the tenant as YAML, and meets a tenant changed through the API
//! meanwhile. Every page is checked with axe-core, and the test writes
//! `docs/console/config-patches.png` and `docs/console/yaml-editor.png`.

use cms_e2e::browser::Browser;
use cms_e2e::fixtures::{TENANTS, config_patches_path, tenant, tenant_path};
use cms_e2e::{ADMIN_PASSWORD, ADMIN_USER, Server};
use serde_json::json;

use crate::console::{screenshot, sign_in};

/// A strategic patch as the operator types it.
const PATCH: &str = "machine:\n  network:\n    hostname: alpha-node\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_edits_config_patches_and_the_tenant_as_yaml() {
    let server = Server::start().await;
    let api = server.api();
    let base = format!("http://{}", server.addr());
    api.post(TENANTS, &tenant("alpha")).await.expect(201);
    let browser = Browser::start().await;
    browser.goto(&format!("{base}/tenants/alpha")).await;
    browser.wait_for_path("/login?next=%2Ftenants%2Falpha").await;
    sign_in(&browser, ADMIN_USER, ADMIN_PASSWORD).await;
    browser.wait_for_path("/tenants/alpha").await;

    // A config patch, added from the tenant page.
    browser.find("#no-config-patches").await;
    browser.fill("#patch-name", "hostname").await;
    browser.fill("#patch-body", PATCH).await;
    browser.submit("#create-config-patch").await;
    let row = "tr[data-config-patch=hostname]";
    browser.find(row).await;
    assert_eq!(browser.text(&format!("{row} .state")).await, "enabled");
    assert_eq!(browser.text(&format!("{row} .referenced")).await, "nothing (not applied)");
    let stored = api.get(&format!("{}/hostname", config_patches_path("alpha"))).await.expect(200);
    assert_eq!(stored["spec"]["patches"][0]["machine"]["network"]["hostname"], "alpha-node", "{stored}");
    browser.assert_accessible("the tenant page with a config patch").await;

    // An invalid one, refused at its field.
    browser.fill("#patch-name", "scalar").await;
    browser.fill("#patch-body", "3").await;
    browser.submit("#create-config-patch").await;
    browser.wait_for_text("#patch-body-error", "must be an object").await;
    assert_eq!(browser.attr("#patch-body", "aria-invalid").await.as_deref(), Some("true"));
    let described = browser.attr("#patch-body", "aria-describedby").await.unwrap_or_default();
    assert!(described.split(' ').any(|id| id == "patch-body-error"), "{described}");
    let focused = browser.execute("return document.activeElement.id", Vec::new()).await;
    assert_eq!(focused, "patch-body", "the script moves the focus to the refused field");
    browser.assert_accessible("the tenant page with a refused config patch").await;
    api.get(&format!("{}/scalar", config_patches_path("alpha"))).await.expect_error(404, "NotFound");
    browser
        .execute(
            "document.activeElement.blur();
             document.getElementById('config-patches-heading').scrollIntoView(); return null",
            Vec::new(),
        )
        .await;
    browser.screenshot(&screenshot("config-patches")).await;

    // The YAML editor: a label changed and saved.
    browser.click("#edit-as-yaml").await;
    browser.wait_for_path("/tenants/alpha/edit").await;
    browser.assert_accessible("the YAML editor").await;
    let text = editor_text(&browser).await;
    assert!(text.contains("name: alpha") && text.contains("resourceVersion:"), "{text}");
    assert!(!text.contains("phase"), "no status in the editor: {text}");
    set_editor_text(&browser, &text.replace("labels: {}", "labels:\n    env: prod")).await;
    browser.execute("document.activeElement.blur(); window.scrollTo(0, 0); return null", Vec::new()).await;
    browser.screenshot(&screenshot("yaml-editor")).await;
    browser.submit("#yaml-editor").await;
    browser.wait_for_path("/tenants/alpha").await;
    let stored = api.get(&tenant_path("alpha")).await.expect(200);
    assert_eq!(stored["metadata"]["labels"], json!({"env": "prod"}), "{stored}");
    browser.click("#edit-as-yaml").await;
    browser.wait_for_path("/tenants/alpha/edit").await;
    assert!(editor_text(&browser).await.contains("env: prod"), "the editor shows the saved label");

    // The tenant changes through the API while the editor is open.
    let mut meanwhile = api.get(&tenant_path("alpha")).await.expect(200);
    meanwhile["metadata"]["labels"]["changed"] = json!("meanwhile");
    api.put(&tenant_path("alpha"), &meanwhile).await.expect(200);
    let mine = editor_text(&browser).await.replace("env: prod", "env: staging");
    set_editor_text(&browser, &mine).await;
    browser.submit("#yaml-editor").await;
    browser.wait_for_text("#form-error", "changed since you opened it").await;
    assert_eq!(editor_text(&browser).await, mine, "the operator's text is kept");
    browser.assert_accessible("the YAML editor with a stale version").await;
    let stored = api.get(&tenant_path("alpha")).await.expect(200);
    assert_eq!(stored["metadata"]["labels"]["env"], "prod", "nothing was saved: {stored}");
    browser.click("#reload-editor").await;
    browser.wait_for_path("/tenants/alpha/edit").await;
    let reloaded = editor_text(&browser).await;
    assert!(reloaded.contains("changed: meanwhile") && reloaded.contains("env: prod"), "{reloaded}");
    assert!(!browser.exists("#form-error").await);
    browser.close().await;
}

/// The YAML editor's text.
async fn editor_text(browser: &Browser) -> String {
    let value = browser.execute("return document.getElementById('yaml').value", Vec::new()).await;
    value.as_str().expect("the editor's text").to_string()
}

/// Replaces the YAML editor's text, as pasting would.
async fn set_editor_text(browser: &Browser, text: &str) {
    browser
        .execute("document.getElementById('yaml').value = arguments[0]; return null", vec![json!(text)])
        .await;
}

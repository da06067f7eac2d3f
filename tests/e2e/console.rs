//! The web console in a real browser: headless Chromium, driven through
//! chromedriver by `cms_e2e::browser`, against the real server. Every page a
//! test visits is checked with axe-core for serious and critical
//! accessibility violations, and the operator's test writes the screenshots
//! in `docs/console/`.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use cms_e2e::browser::{Browser, Fetch};
use cms_e2e::fixtures::{TENANTS, tenant, tenant_path, tenant_with_groups};
use cms_e2e::{ADMIN_PASSWORD, ADMIN_USER, Api, Server};
use serde_json::{Value, json};

/// The viewer the tests create through the API.
const VIEWER: (&str, &str) = ("vera", "vera-password");

/// The harness itself, on pages the server serves besides the console: the
/// browser loads a page whose script renders the OpenAPI document it fetches,
/// `fetch` runs from the page, and axe-core runs and does report violations
/// (a bare text reply has no title and no language, both serious).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browser_drives_pages_of_the_real_server() {
    let server = Server::start().await;
    let base = format!("http://{}", server.addr());
    let browser = Browser::start().await;

    browser.goto(&format!("{base}/docs")).await;
    browser.wait_for_text("h1", "cms").await;
    assert!(browser.exists("[id^=op-]").await, "the page renders the operations of /openapi.json");
    assert_eq!(browser.path().await, "/docs");

    let document = browser.fetch(Fetch::get("/openapi.json")).await;
    assert_eq!(document.status, 200, "{}", document.body);
    let document: Value = serde_json::from_str(&document.body).expect("the document is JSON");
    assert_eq!(document["openapi"], "3.1.0");

    browser.goto(&format!("{base}/healthz")).await;
    let rules: Vec<String> = browser.axe().await.into_iter().map(|violation| violation.id).collect();
    for rule in ["document-title", "html-has-lang"] {
        assert!(rules.iter().any(|id| id == rule), "axe-core reports {rule} on a bare text reply: {rules:?}");
    }
    browser.close().await;
}

/// An admin signs in, is refused a Kubernetes version at its field, creates
/// a tenant with the form, scales its node group, downloads its kubeconfig,
/// and watches the tenants table follow changes made through the API
/// without a reload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_creates_scales_downloads_and_follows_tenants() {
    let server = Server::start().await;
    let api = server.api();
    let base = format!("http://{}", server.addr());
    let browser = Browser::start().await;

    browser.goto(&format!("{base}/")).await;
    browser.wait_for_path("/login").await;
    browser.assert_accessible("the sign-in page").await;
    browser.screenshot(&screenshot("login")).await;
    sign_in(&browser, ADMIN_USER, "not-the-password").await;
    browser.wait_for_text("#login-error", "Invalid user name or password").await;
    browser.assert_accessible("the refused sign-in").await;
    sign_in(&browser, ADMIN_USER, ADMIN_PASSWORD).await;
    browser.wait_for_path("/").await;
    browser.find("#no-tenants").await;
    assert_eq!(browser.text("#role").await, "admin");

    browser.click("#create-tenant").await;
    browser.wait_for_path("/tenants/new").await;
    browser.assert_accessible("the create form").await;
    browser.fill("#name", "alpha").await;
    browser.fill("#kubernetesVersion", "1.31.1").await;
    browser.fill("#controlPlaneEndpoint", "https://10.0.0.10:6443").await;
    browser.fill("#hosts", "10.0.0.1\n10.0.0.2").await;
    browser.execute("document.activeElement.blur(); window.scrollTo(0, 0); return null", Vec::new()).await;
    browser.screenshot(&screenshot("create")).await;
    browser.fill("#kubernetesVersion", "1.31").await;
    browser.submit("#create-tenant").await;

    let field = "[data-field='spec.kubernetesVersion']";
    browser.find("#kubernetesVersion-error").await;
    assert!(browser.exists(&format!("div.field.invalid{field}")).await, "the refused field is marked");
    assert_eq!(browser.attr("#kubernetesVersion", "aria-invalid").await.as_deref(), Some("true"));
    let described = browser.attr("#kubernetesVersion", "aria-describedby").await.unwrap_or_default();
    assert!(described.split(' ').any(|id| id == "kubernetesVersion-error"), "{described}");
    browser.find("#form-error").await;
    let focused = browser.execute("return document.activeElement.id", Vec::new()).await;
    assert_eq!(focused, "kubernetesVersion", "the script moves the focus to the refused field");
    assert_eq!(browser.path().await, "/tenants/new");
    browser.assert_accessible("the create form with a refused field").await;
    api.get(&tenant_path("alpha")).await.expect_error(404, "NotFound");

    browser.fill("#kubernetesVersion", "1.31.1").await;
    browser.submit("#create-tenant").await;
    browser.wait_for_path("/tenants/alpha").await;
    assert_eq!(browser.text("#spec .kubernetes").await, "1.31.1");
    let group = "tr[data-node-group=controlplane]";
    assert_eq!(browser.text(&format!("{group} .count")).await, "1");
    browser.assert_accessible("the tenant page").await;
    browser.screenshot(&screenshot("tenant")).await;

    browser.fill("#count-controlplane", "3").await;
    browser.submit(&format!("{group} form.scale")).await;
    browser.wait_for_text("#count-controlplane-error", "hosts").await;
    browser.assert_accessible("the tenant page with a refused scale").await;
    browser.fill("#count-controlplane", "2").await;
    browser.submit(&format!("{group} form.scale")).await;
    browser.wait_for_text(&format!("{group} .count"), "2").await;
    assert!(!browser.exists("#count-controlplane-error").await);
    let stored = api.get(&format!("{}/node-groups/controlplane", tenant_path("alpha"))).await.expect(200);
    assert_eq!(stored["spec"]["count"], 2, "the scale reached the store: {stored}");

    let href = browser.attr("#download-kubeconfig", "href").await.expect("the download link");
    let download = browser.fetch(Fetch::get(&href)).await;
    assert_eq!(download.status, 200, "{}", download.body);
    assert_eq!(download.content_type.as_deref(), Some("application/yaml"));
    check_kubeconfig(&download.body);

    browser.goto(&format!("{base}/")).await;
    browser.find("tr[data-tenant=alpha]").await;
    browser.execute("window.cmsConsoleTest = 'not reloaded'; return null", Vec::new()).await;
    api.post(TENANTS, &tenant("beta")).await.expect(201);
    let beta = "tr[data-tenant=beta]";
    browser.find(beta).await;
    assert_eq!(browser.text(&format!("{beta} .kubernetes")).await, "1.31.1");
    browser.wait_for_text("#tenants caption", "Tenants 1 to 2 of 2").await;
    let mut update = api.get(&tenant_path("beta")).await.expect(200);
    update["spec"]["kubernetesVersion"] = json!("1.31.2");
    api.put(&tenant_path("beta"), &update).await.expect(200);
    browser.wait_for_text(&format!("{beta} .kubernetes"), "1.31.2").await;
    let names = browser
        .execute(
            "return [...document.querySelectorAll('#tenants tbody tr')].map((row) => row.dataset.tenant)",
            Vec::new(),
        )
        .await;
    assert_eq!(names, json!(["alpha", "beta"]), "the new row is in name order");
    let marker = browser.execute("return window.cmsConsoleTest || null", Vec::new()).await;
    assert_eq!(marker, "not reloaded", "the table changed in place, without a reload");
    browser.assert_accessible("the tenants page").await;
    browser.screenshot(&screenshot("tenants")).await;
    browser.close().await;
}

/// A viewer sees no edit controls and a forged post of theirs is refused;
/// signing out ends the session; a corrupted session returns to the sign-in
/// page and then to where the operator was; a form posted without its token
/// is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn viewers_sessions_and_form_tokens_are_enforced() {
    let server = Server::start().await;
    let api = server.api();
    let base = format!("http://{}", server.addr());
    let group = json!({
        "name": "cp", "role": "controlplane", "count": 1, "providerClass": "metal:bare",
        "providerConfig": {"hosts": [{"address": "10.0.0.1"}, {"address": "10.0.0.2"}]}
    });
    api.post(TENANTS, &tenant_with_groups("alpha", vec![group])).await.expect(201);
    let (viewer, password) = VIEWER;
    let user = json!({"metadata": {"name": viewer}, "spec": {"role": "view", "password": password}});
    api.post("/api/v1/users", &user).await.expect(201);
    let browser = Browser::start().await;

    // A viewer.
    browser.goto(&format!("{base}/tenants/alpha")).await;
    browser.wait_for_path("/login?next=%2Ftenants%2Falpha").await;
    sign_in(&browser, viewer, password).await;
    browser.wait_for_path("/tenants/alpha").await;
    assert_eq!(browser.text("#role").await, "view");
    browser.find("tr[data-node-group=cp]").await;
    for control in ["form.scale", "#delete-tenant", "input[id^=count-]"] {
        assert!(!browser.exists(control).await, "a viewer sees no {control}");
    }
    browser.assert_accessible("the tenant page, as a viewer").await;
    browser.goto(&format!("{base}/")).await;
    browser.find("tr[data-tenant=alpha]").await;
    assert!(!browser.exists("#create-tenant").await, "a viewer sees no create link");
    browser.assert_accessible("the tenants page, as a viewer").await;
    browser.goto(&format!("{base}/tenants/new")).await;
    browser.wait_for_text("h1", "Forbidden").await;
    browser.find("#failure").await;
    browser.assert_accessible("the refusal page").await;

    let token = browser.attr("#sign-out input[name=csrf]", "value").await.expect("the viewer's form token");
    let forged = [
        ("/tenants/alpha/node-groups/cp/scale", format!("csrf={token}&count=2")),
        ("/tenants/new", format!("csrf={token}&name=forged&kubernetesVersion=1.31.1")),
        ("/tenants/alpha/delete", format!("csrf={token}&confirm=alpha")),
    ];
    for (path, body) in &forged {
        let reply = browser.fetch(Fetch::post_form(path, body)).await;
        assert_eq!(reply.status, 403, "a viewer's post to {path}: {}", reply.body);
        assert!(reply.body.contains("role view may not"), "{path}: {}", reply.body);
    }
    assert_unchanged(&api).await;

    // Signing out.
    browser.click("#sign-out button").await;
    browser.wait_for_path("/login").await;
    assert!(browser.client().get_named_cookie("cms_session").await.is_err(), "the cookie is gone");
    browser.goto(&format!("{base}/tenants/alpha")).await;
    browser.wait_for_path("/login?next=%2Ftenants%2Falpha").await;

    // An admin whose session is no longer valid.
    sign_in(&browser, ADMIN_USER, ADMIN_PASSWORD).await;
    browser.wait_for_path("/tenants/alpha").await;
    browser.find("form.scale").await;
    let client = browser.client();
    let mut corrupted = client.get_named_cookie("cms_session").await.expect("the session cookie");
    corrupted.set_value("not-a-valid-token");
    client.delete_cookie("cms_session").await.expect("the session cookie is deleted");
    client.add_cookie(corrupted).await.expect("a corrupted session cookie is set");
    browser.reload().await;
    browser.wait_for_path("/login?next=%2Ftenants%2Falpha").await;
    sign_in(&browser, ADMIN_USER, ADMIN_PASSWORD).await;
    browser.wait_for_path("/tenants/alpha").await;

    // Forms without their token.
    let reply = browser.fetch(Fetch::post_form("/tenants/alpha/node-groups/cp/scale", "count=2")).await;
    assert_eq!(reply.status, 403, "a post without the form token: {}", reply.body);
    assert!(reply.body.contains("security token"), "{}", reply.body);
    let reply = browser.fetch(Fetch::post_form("/tenants/alpha/delete", "csrf=0000&confirm=alpha")).await;
    assert_eq!(reply.status, 403, "a post with a wrong form token: {}", reply.body);
    let removed = browser
        .execute(
            "const form = document.querySelector('tr[data-node-group=cp] form.scale');
             form.querySelector('input[name=csrf]').remove();
             form.querySelector('input[name=count]').value = '2';
             form.submit();
             return true;",
            Vec::new(),
        )
        .await;
    assert_eq!(removed, true);
    browser.wait_for_text("#failure", "security token").await;
    browser.assert_accessible("the refused form").await;
    assert_unchanged(&api).await;
    browser.close().await;
}

/// Signs in on the sign-in page the browser shows.
pub(crate) async fn sign_in(browser: &Browser, user: &str, password: &str) {
    browser.fill("#username", user).await;
    browser.fill("#password", password).await;
    browser.submit("#login").await;
}

/// Where the screenshot of `page` goes.
pub(crate) fn screenshot(page: &str) -> std::path::PathBuf {
    cms_e2e::repository().join("docs/console").join(format!("{page}.png"))
}

/// The kubeconfig names a cluster server and a user with a client certificate.
fn check_kubeconfig(text: &str) {
    let kubeconfig: Value = serde_saphyr::from_str(text).expect("the kubeconfig is YAML");
    let server = kubeconfig["clusters"][0]["cluster"]["server"].as_str().unwrap_or_default();
    assert!(server.starts_with("https://"), "a cluster server: {kubeconfig}");
    let certificate =
        kubeconfig["users"][0]["user"]["client-certificate-data"].as_str().expect("a client certificate");
    let certificate = STANDARD.decode(certificate).expect("base64");
    assert!(certificate.starts_with(b"-----BEGIN CERTIFICATE-----"), "a PEM certificate");
    assert!(kubeconfig["users"][0]["user"]["client-key-data"].is_string(), "with its key");
}

/// The forged and token-less posts changed nothing.
async fn assert_unchanged(api: &Api) {
    let group = api.get(&format!("{}/node-groups/cp", tenant_path("alpha"))).await.expect(200);
    assert_eq!(group["spec"]["count"], 1, "{group}");
    let alpha = api.get(&tenant_path("alpha")).await.expect(200);
    assert!(alpha["metadata"]["deletionTimestamp"].is_null(), "{alpha}");
    api.get(&tenant_path("forged")).await.expect_error(404, "NotFound");
}

//! A tenant's etcd backups in the web console, in headless Chromium, with
//! the real server, its reconciler and the engine over fake nodes (the
//! setup of `backups.rs`): an admin takes a backup from the page, downloads
//! it through the console with the session cookie (the same bytes as the
//! API's download of it), and, after every control plane was lost and
//! replaced, restores it with the tenant's name typed: the page shows the
//! `Restoring` condition while the node's bootstrap is held, then, live,
//! that it is done. A viewer sees the list without a control, and a forged
//! restore or delete of theirs is refused. Every page is checked with axe.

use cms_e2e::Server;
use cms_e2e::browser::{Browser, Fetch};
use cms_e2e::{ADMIN_PASSWORD, ADMIN_USER};
use cms_fake_node::{Method, snapshot_bytes};
use reqwest::header::{CONTENT_DISPOSITION, CONTENT_TYPE, COOKIE};
use serde_json::{Value, json};

use crate::backups::{SNAPSHOT_SIZE, converged_tenant, replace_control_planes, sha256};
use crate::console::{screenshot, sign_in};
use crate::provisioning::Engine;

/// The viewer the tests create through the API.
const VIEWER: (&str, &str) = ("vera", "vera-password");

/// Set on the page's window; still there means the page was not reloaded.
const MARK: &str = "window.cmsNotReloaded = true; return null";
const MARKED: &str = "return window.cmsNotReloaded === true";

/// Takes a backup of `acme` from its backups page, open in `browser`, and
/// gives its id.
async fn take_from_the_page(browser: &Browser) -> String {
    browser.submit("#take-backup").await;
    let path = browser
        .wait_until("the page shows the new backup", || async {
            Some(browser.path().await).filter(|path| path.starts_with("/tenants/acme/backups?taken="))
        })
        .await;
    let id = path.trim_start_matches("/tenants/acme/backups?taken=").to_string();
    browser.wait_for_text("#backup-notice", &format!("Backup {id} taken: 256.00 KiB from cp-0.")).await;
    id
}

/// The console's download of `href` with the browser's session cookie, as
/// a client outside the page would send it: status, headers and bytes.
async fn download_with_the_session(server: &Server, browser: &Browser, href: &str) -> reqwest::Response {
    let cookie = browser.client().get_named_cookie("cms_session").await.expect("the session cookie");
    let url = format!("http://{}{href}", server.addr());
    let response = reqwest::Client::new()
        .get(&url)
        .header(COOKIE, format!("cms_session={}", cookie.value()))
        .send()
        .await
        .expect("the console answers");
    assert_eq!(response.status().as_u16(), 200, "{url}");
    response
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_takes_downloads_and_restores_a_backup_in_the_browser() {
    let engine = Engine::new();
    let server = engine.options().start().await;
    let api = server.api();
    let base = format!("http://{}", server.addr());
    let (bundle, cluster) = converged_tenant(&server).await;
    let browser = Browser::start().await;
    browser.goto(&format!("{base}/tenants/acme")).await;
    sign_in(&browser, ADMIN_USER, ADMIN_PASSWORD).await;
    browser.wait_for_path("/tenants/acme").await;
    browser.wait_for_text("#restoring-condition", "No restore has run.").await;
    browser.click("#backups-link").await;
    browser.wait_for_path("/tenants/acme/backups").await;
    browser.find("#no-backups").await;
    browser.assert_accessible("the backups page, empty").await;

    // Taken from the page.
    let id = take_from_the_page(&browser).await;
    let row = format!("tr[data-backup='{id}']");
    assert_eq!(browser.text(&format!("{row} .status")).await, "stored");
    assert_eq!(browser.attr(&format!("{row} .size"), "data-bytes").await, Some(SNAPSHOT_SIZE.to_string()));
    let location = browser.text(&format!("{row} .location")).await;
    assert!(location.ends_with(&format!("/backups/acme/{id}.etcd")), "{location}");
    browser.assert_accessible("the backups page with a backup").await;
    let stored = api.get(&format!("/api/v1/tenants/acme/backups/{id}")).await.expect(200);
    assert_eq!(stored["sha256"], sha256(&snapshot_bytes(SNAPSHOT_SIZE)), "{stored}");

    // Downloaded through the console: the archive the API serves.
    let href = browser.attr(&format!("{row} a.download"), "href").await.expect("the download link");
    assert_eq!(href, format!("/tenants/acme/backups/{id}/download"));
    let response = download_with_the_session(&server, &browser, &href).await;
    assert_eq!(response.headers()[CONTENT_TYPE], "application/octet-stream");
    let disposition = response.headers()[CONTENT_DISPOSITION].to_str().unwrap().to_string();
    assert_eq!(disposition, format!("attachment; filename=\"acme-{id}.db\""));
    let from_the_console = response.bytes().await.expect("the whole download");
    let api_download = format!("/api/v1/tenants/acme/backups/{id}/download");
    let from_the_api = api.request(reqwest::Method::GET, &api_download).send().await.unwrap();
    assert_eq!(from_the_api.status().as_u16(), 200);
    let from_the_api = from_the_api.bytes().await.expect("the API's download");
    assert_eq!(from_the_console.len(), SNAPSHOT_SIZE);
    assert!(from_the_console == from_the_api, "the console serves the API's bytes");

    // Every control plane is lost and replaced; the new one's bootstrap is
    // held, so the restore stays under way until the test lets it go.
    let cluster = replace_control_planes(&api, &bundle, cluster).await;
    let node = &cluster.node("cp-0").node;
    node.hold(Some(Method::Bootstrap));

    // Restored from the page, the tenant's name typed.
    browser.goto(&format!("{base}/tenants/acme/backups")).await;
    browser.click(&format!("#backup-{id}-actions summary")).await;
    let confirm = format!("#restore-{id}-confirm");
    let button = format!("#backup-{id}-actions form.restore-backup button");
    browser.fill(&confirm, "acm").await;
    assert_eq!(browser.attr(&button, "disabled").await.as_deref(), Some("true"), "the name is not typed yet");
    browser.assert_accessible("the backups page with a restore form open").await;
    browser.fill(&confirm, "acme").await;
    assert_eq!(browser.attr(&button, "disabled").await, None);
    browser.click(&button).await;
    browser.wait_for_path(&format!("/tenants/acme/backups?restoring={id}")).await;
    browser.execute(MARK, Vec::new()).await;
    let line = "#restoring-condition";
    let restoring = browser.wait_for_text(line, "Restoring: restoring backup").await;
    assert!(restoring.contains(&format!("{id} onto cp-0")), "{restoring}");
    assert_eq!(browser.attr(line, "data-status").await.as_deref(), Some("True"));
    browser.find("#backup-running[data-work=restore]").await;
    assert_eq!(browser.text(&format!("{row} .status")).await, "being restored");
    browser.assert_accessible("the backups page while a restore runs").await;
    browser.screenshot(&screenshot("backups")).await;
    browser
        .wait_until("the restore to reach the node's bootstrap", || async {
            (node.held() == 1).then_some(())
        })
        .await;

    // Let go: the page says it is done, without a reload.
    node.hold(None);
    let done = browser.wait_for_text(line, "Restored: etcd started from backup").await;
    assert!(done.contains(&format!("{id} on cp-0")), "{done}");
    assert_eq!(browser.attr(line, "data-reason").await.as_deref(), Some("Restored"));
    assert_eq!(browser.execute(MARKED, Vec::new()).await, Value::Bool(true), "the page was not reloaded");
    let expected = sha256(&snapshot_bytes(SNAPSHOT_SIZE));
    assert_eq!(node.recovered_sha256().as_deref(), Some(expected.as_str()));
    assert_eq!(cluster.etcd.restored_from().as_deref(), Some(expected.as_str()));
    browser.assert_accessible("the backups page after the restore").await;

    // The audit log has the console's backup, download and restore.
    let audit = api.get("/api/v1/audit?tenant=acme").await.expect(200);
    let routes: Vec<String> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|record| record["target"]["kind"] == "Backup" && record["actor"] == ADMIN_USER)
        .map(|record| format!("{} {} {}", record["method"], record["path"], record["target"]["name"]))
        .collect();
    for want in [
        format!("\"POST\" \"/tenants/acme/backups/new\" \"{id}\""),
        format!("\"GET\" \"/tenants/acme/backups/{id}/download\" \"{id}\""),
        format!("\"POST\" \"/tenants/acme/backups/{id}/restore\" \"{id}\""),
    ] {
        assert!(routes.contains(&want), "{want} not in {routes:?}");
    }
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_sees_the_backups_but_may_not_restore_or_delete_them() {
    let engine = Engine::new();
    let server = engine.options().start().await;
    let api = server.api();
    let base = format!("http://{}", server.addr());
    let (_bundle, _cluster) = converged_tenant(&server).await;
    let backup = api.post("/api/v1/tenants/acme/backups", &json!({})).await.expect(201);
    let id = backup["id"].as_str().unwrap().to_string();
    let (viewer, password) = VIEWER;
    let user = json!({"metadata": {"name": viewer}, "spec": {"role": "view", "password": password}});
    api.post("/api/v1/users", &user).await.expect(201);
    let browser = Browser::start().await;

    browser.goto(&format!("{base}/tenants/acme/backups")).await;
    sign_in(&browser, viewer, password).await;
    browser.wait_for_path("/tenants/acme/backups").await;
    let row = format!("tr[data-backup='{id}']");
    assert_eq!(browser.text(&format!("{row} .status")).await, "stored");
    for control in ["#take-backup", "a.download", "form.restore-backup", "form.delete-backup", "details"] {
        assert!(!browser.exists(control).await, "a viewer sees no {control}");
    }
    browser.assert_accessible("the backups page, as a viewer").await;

    let token = browser.attr("#sign-out input[name=csrf]", "value").await.expect("the viewer's form token");
    let body = format!("csrf={token}&confirm=acme");
    for action in ["restore", "delete"] {
        let path = format!("/tenants/acme/backups/{id}/{action}");
        let reply = browser.fetch(Fetch::post_form(&path, &body)).await;
        assert_eq!(reply.status, 403, "a viewer's {action}: {}", reply.body);
        assert!(reply.body.contains("role view may not restore or delete tenant backups"), "{}", reply.body);
    }
    let download = browser.fetch(Fetch::get(&format!("/tenants/acme/backups/{id}/download"))).await;
    assert_eq!(download.status, 403, "a viewer's download: {}", download.body);
    let taken = browser.fetch(Fetch::post_form("/tenants/acme/backups/new", &format!("csrf={token}"))).await;
    assert_eq!(taken.status, 403, "a viewer's backup: {}", taken.body);

    // Nothing changed: the one backup is there, and no restore began.
    let list = api.get("/api/v1/tenants/acme/backups").await.expect(200);
    assert_eq!(list["items"], json!([backup]), "{list}");
    let tenant = api.get("/api/v1/tenants/acme").await.expect(200);
    let conditions = tenant["status"]["conditions"].as_array().unwrap();
    assert!(!conditions.iter().any(|condition| condition["type"] == "Restoring"), "{conditions:?}");
    browser.close().await;
}

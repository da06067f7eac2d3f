//! A machine's logs in the web console, in headless Chromium, with the real
//! server, its reconciler and the engine over fake nodes (the setup of
//! `backups.rs`): an editor opens a machine's page from the tenant page,
//! reads the end of its machined log, then follows it and sees a line the
//! node writes after the panel opened appear in the page, as text (a line
//! that looks like markup stays text); stopping, or leaving the page, ends
//! the node's stream; the reads are on the audit log. A viewer sees a note
//! instead of the panel and the stream refuses them. Every page is checked
//! with axe.

use cms_e2e::Api;
use cms_e2e::browser::{Browser, Fetch};
use cms_fake_node::FakeNode;
use serde_json::{Value, json};

use crate::backups::converged_tenant;
use crate::console::{screenshot, sign_in};
use crate::provisioning::Engine;

const EDITOR: (&str, &str) = ("eddie", "eddie-password");
const VIEWER: (&str, &str) = ("vera", "vera-password");
const MACHINE: &str = "/tenants/acme/machines/cp-0";

async fn user(api: &Api, (name, password): (&str, &str), role: &str) {
    let user = json!({"metadata": {"name": name}, "spec": {"role": role, "password": password}});
    api.post("/api/v1/users", &user).await.expect(201);
}

/// The lines the panel shows.
async fn shown(browser: &Browser) -> Vec<String> {
    let script = "return Array.from(document.querySelectorAll('#logs-output span.line'))\
                  .map(function (line) { return line.textContent; })";
    serde_json::from_value(browser.execute(script, Vec::new()).await).expect("a list of lines")
}

async fn state(browser: &Browser) -> String {
    browser.attr("#logs-output", "data-state").await.unwrap_or_default()
}

/// Waits until the node has `count` followed log streams open.
async fn followers(browser: &Browser, node: &FakeNode, count: usize) {
    let what = format!("the node to have {count} followed log streams");
    browser.wait_until(&what, || async { (node.log_followers() == count).then_some(()) }).await;
}

/// Shows `service`'s log with `tail` earlier lines, following or not.
async fn show(browser: &Browser, service: &str, tail: &str, follow: bool) {
    browser.select("#logs-service", service).await;
    browser.fill("#logs-tail", tail).await;
    let checked = browser.execute("return document.getElementById('logs-follow').checked", Vec::new()).await;
    if checked != Value::Bool(follow) {
        browser.click("#logs-follow").await;
    }
    browser.click("#logs-start").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_follows_a_machine_s_log_live() {
    let engine = Engine::new();
    let server = engine.options().start().await;
    let api = server.api();
    let base = format!("http://{}", server.addr());
    let (_bundle, cluster) = converged_tenant(&server).await;
    let node = &cluster.node("cp-0").node;
    user(&api, EDITOR, "edit").await;
    let browser = Browser::start().await;
    browser.goto(&format!("{base}/tenants/acme")).await;
    sign_in(&browser, EDITOR.0, EDITOR.1).await;
    browser.wait_for_path("/tenants/acme").await;
    browser.click("tr[data-machine=cp-0] th.id a").await;
    browser.wait_for_path(MACHINE).await;
    assert_eq!(browser.text("#machine-facts .role").await, "controlplane");
    browser.find("#logs-form").await;
    browser.assert_accessible("the machine page").await;

    // The end of the log, read once: it ends by itself.
    node.log("machined", "written before the panel opened");
    show(&browser, "machined", "5", false).await;
    browser
        .wait_until("the read to end", || async { (state(&browser).await == "ended").then_some(()) })
        .await;
    let before = shown(&browser).await;
    assert!(!before.is_empty() && before.len() <= 5, "{before:?}");
    assert!(before.iter().any(|line| line.contains("written before the panel opened")), "{before:?}");
    browser.wait_for_text("#logs-status", "The log ended.").await;

    // Followed from now: no earlier line, then what the node writes next.
    show(&browser, "machined", "0", true).await;
    browser
        .wait_until("the stream to open", || async { (state(&browser).await == "open").then_some(()) })
        .await;
    followers(&browser, node, 1).await;
    let marker = "written after the panel opened <img src=x> & more";
    node.log("machined", marker);
    browser.wait_for_text("#logs-output", marker).await;
    let lines = shown(&browser).await;
    assert!(!lines.iter().any(|line| line.contains("written before the panel opened")), "{lines:?}");
    let line = lines.iter().find(|line| line.contains(marker)).expect("the line");
    assert!(line.contains("[talos] written after"), "machined's own format: {line}");
    assert!(!browser.exists("#logs-output img").await, "a line is text, never markup");
    browser.assert_accessible("the machine page following a log").await;
    browser.screenshot(&screenshot("machine-logs")).await;

    // Stopped, the node's stream ends; so it does when the page goes away.
    browser.click("#logs-stop").await;
    assert_eq!(state(&browser).await, "stopped");
    followers(&browser, node, 0).await;
    show(&browser, "dmesg", "10", true).await;
    browser.wait_for_text("#logs-output", "kern:").await;
    followers(&browser, node, 1).await;
    browser.goto(&format!("{base}/tenants/acme")).await;
    followers(&browser, node, 0).await;

    // Every read is on the audit log, with the machine as its target.
    let audit = api.get("/api/v1/audit?tenant=acme").await.expect(200);
    let reads: Vec<&Value> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|record| record["method"] == "GET" && record["actor"] == EDITOR.0)
        .collect();
    assert_eq!(reads.len(), 3, "{reads:?}");
    for record in reads {
        assert_eq!(
            record["target"],
            json!({"kind": "Machine", "tenant": "acme", "name": "cp-0"}),
            "{record}"
        );
        assert_eq!(record["route"], "/tenants/{name}/machines/{id}/logs", "{record}");
        assert_eq!(record["status"], 200, "{record}");
    }
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_sees_no_logs_panel() {
    let engine = Engine::new();
    let server = engine.options().start().await;
    let api = server.api();
    let base = format!("http://{}", server.addr());
    let (_bundle, cluster) = converged_tenant(&server).await;
    user(&api, VIEWER, "view").await;
    let browser = Browser::start().await;
    browser.goto(&format!("{base}{MACHINE}")).await;
    sign_in(&browser, VIEWER.0, VIEWER.1).await;
    browser.wait_for_path(MACHINE).await;
    let note = browser.text("#logs-refused").await;
    assert!(note.contains("your role on this tenant is view"), "{note}");
    for control in ["#logs-form", "#logs-output"] {
        assert!(!browser.exists(control).await, "a viewer sees no {control}");
    }
    browser.assert_accessible("the machine page, as a viewer").await;
    let refused = browser.fetch(Fetch::get(&format!("{MACHINE}/logs?service=machined"))).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(refused.body.contains("role view may not read machine logs"), "{}", refused.body);
    assert_eq!(cluster.node("cp-0").node.log_followers(), 0);

    // The refusal is on the audit log too.
    let audit = api.get("/api/v1/audit?tenant=acme").await.expect(200);
    let refusals = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|record| record["actor"] == VIEWER.0 && record["path"] == format!("{MACHINE}/logs"))
        .count();
    assert_eq!(refusals, 1, "{audit}");
    browser.close().await;
}

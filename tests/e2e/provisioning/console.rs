//! The web console following the reconciler, in headless Chromium: metal
//! tenants on fake nodes, built by the real engine. A tenant created
//! through the API appears in the open tenants table and its phase changes
//! in place; the tenant page records the phases it sees, shows a paused
//! rollout with its reason, probes on request and resumes the rollout.

use std::time::Duration;

use cms_e2e::browser::Browser;
use cms_e2e::cluster::FakeCluster;
use cms_e2e::nodes::StoreWriter;
use cms_e2e::{ADMIN_PASSWORD, ADMIN_USER};
use serde_json::{Value, json};

use super::cluster::fake_hosts;
use super::{CONVERGE, Engine, eventually, metal_tenant};
use crate::console::{screenshot, sign_in};

/// Set on the page's window; still there means the page was not reloaded.
const MARK: &str = "window.cmsNotReloaded = true; return null";
const MARKED: &str = "return window.cmsNotReloaded === true";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_follows_the_reconciler_live() {
    let engine = Engine::new();
    let server = engine.options().start().await;
    let api = server.api();
    let base = format!("http://{}", server.addr());
    let browser = Browser::start().await;
    browser.goto(&format!("{base}/login")).await;
    sign_in(&browser, ADMIN_USER, ADMIN_PASSWORD).await;
    browser.wait_for_path("/").await;
    browser.execute(MARK, Vec::new()).await;

    // Created through the API while the table is open; the worker's node
    // refuses upgrades.
    let mut body = metal_tenant("live", 1, 1);
    body["spec"]["talosVersion"] = json!("1.14.0");
    api.post("/api/v1/tenants", &body).await.expect(201);
    let bundle = StoreWriter::open(server.data_dir()).await.bundle("live").await;
    let cluster = FakeCluster::start(&bundle, &fake_hosts(1, 1), |host, options| {
        let options = options.upgrade_delay(Duration::from_secs(1));
        if host.control_plane { options } else { options.upgrade_failure("the disk is full") }
    })
    .await;
    browser.find("tr[data-tenant=live]").await;
    browser
        .wait_within(CONVERGE, "the row to turn active and ready in place", || async {
            let phase = browser.text("tr[data-tenant=live] .phase").await;
            let machines = browser.text("tr[data-tenant=live] .machines").await;
            (phase == "active" && machines == "2/2").then_some(())
        })
        .await;
    assert_eq!(browser.execute(MARKED, Vec::new()).await, Value::Bool(true), "the table was not reloaded");

    // The tenant page records the phases it sees, in place.
    browser.click("tr[data-tenant=live] a").await;
    browser.wait_for_path("/tenants/live").await;
    browser.execute(MARK, Vec::new()).await;
    assert_eq!(phases(&browser).await, ["active"]);
    let mut tenant = api.get("/api/v1/tenants/live").await.expect(200);
    tenant["spec"]["talosVersion"] = json!("1.14.1");
    api.put("/api/v1/tenants/live", &tenant).await.expect(200);
    browser
        .wait_within(CONVERGE, "the page to record the rollout", || async {
            (phases(&browser).await == ["active", "updating"]).then_some(())
        })
        .await;
    browser.wait_for_text("#message", "the disk is full").await;
    assert_eq!(browser.execute(MARKED, Vec::new()).await, Value::Bool(true), "the page was not reloaded");

    // Reloaded, it shows the paused rollout with its reason and progress.
    browser.reload().await;
    let paused = browser.wait_for_text("#upgrade-paused", "the disk is full").await;
    assert!(paused.contains("workers-0"), "{paused}");
    assert_eq!(browser.text("#upgrade-progress").await, "1 of 2 machines at their desired Talos version");
    browser.submit("#probe").await;
    browser.wait_for_text("#health-result", "reachable, Talos 1.14.1").await;
    browser.assert_accessible("the tenant page with a paused rollout").await;
    let scroll = "document.getElementById('node-groups-heading').scrollIntoView(); return null";
    browser.execute(scroll, Vec::new()).await;
    browser.screenshot(&screenshot("tenant-upgrade")).await;

    // Resumed, the rollout tries the worker again.
    let worker = cluster.nodes.iter().find(|node| !node.host.control_plane).expect("a worker");
    let upgrades = || worker.calls().into_iter().filter(|call| call["method"] == "Upgrade").count();
    assert_eq!(upgrades(), 1, "the failing worker is not retried while paused");
    browser.submit("#resume").await;
    browser.wait_for_path("/tenants/live").await;
    eventually("the worker asked again", CONVERGE, || async { (upgrades() == 2).then_some(()) }).await;
    browser.close().await;
}

/// The phases of the page's phase history, oldest first.
async fn phases(browser: &Browser) -> Vec<String> {
    let script = "return Array.from(document.querySelectorAll('#phase-history li'))\
                  .map(function (item) { return item.getAttribute('data-phase'); })";
    let value = browser.execute(script, Vec::new()).await;
    serde_json::from_value(value).expect("a list of phases")
}

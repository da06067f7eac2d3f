//! A metal tenant whose hosts cannot be reached says so at a glance: its
//! `status.message` names the first blocker on one line, each machine
//! carries its own error, the phase stays `provisioning` (it was never
//! ready), and the console's headline shows why, first and not green,
//! as each machine's row does. The hosts are loopback addresses where
//! nothing listens, so each refuses at once.

use cms_e2e::browser::Browser;
use cms_e2e::{ADMIN_PASSWORD, ADMIN_USER};
use serde_json::Value;

use super::{CONVERGE, Engine, eventually, host_address, metal_tenant};
use crate::console::{screenshot, sign_in};

/// The machines of the tenant: one control plane and three workers.
const MACHINES: [&str; 4] = ["cp-0", "workers-0", "workers-1", "workers-2"];

/// The console's green (`--ok`), which only a ready tenant may wear.
const GREEN: &str = "rgb(26, 127, 55)";

fn condition(tenant: &Value, kind: &str) -> Value {
    let conditions = tenant["status"]["conditions"].as_array().cloned().unwrap_or_default();
    conditions.into_iter().find(|c| c["type"] == kind).unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_that_cannot_be_reached_are_named_in_the_status_and_the_headline() {
    let engine = Engine::new();
    let server = engine.options().start().await;
    let api = server.api();
    api.post("/api/v1/tenants", &metal_tenant("dark", 1, 3)).await.expect(201);

    // The API: the first blocker, on one bounded line.
    let tenant = eventually("the blocker in the tenant's status", CONVERGE, || async {
        let tenant = api.get("/api/v1/tenants/dark").await.expect(200);
        let message = tenant["status"]["message"].as_str().unwrap_or_default();
        message.starts_with("4 of 4 machines unreachable: ").then_some(tenant)
    })
    .await;
    let status = &tenant["status"];
    assert_eq!(status["ready"], false, "{tenant}");
    assert_eq!(status["phase"], "provisioning", "applied but never ready, so not active: {tenant}");
    assert_eq!(condition(&tenant, "Provisioned")["status"], "True", "{tenant}");
    let blocker = status["message"].as_str().unwrap().to_string();
    let first = format!("cp-0: could not connect to {}:50000: connection refused", host_address(1, 1));
    assert_eq!(
        blocker,
        format!(
            "4 of 4 machines unreachable: {first} (and 3 more); check that the hosts are powered on and \
             reachable from the service"
        )
    );
    let machines_ready = condition(&tenant, "MachinesReady");
    assert_eq!(machines_ready["status"], "False", "{machines_ready}");
    assert_eq!(machines_ready["reason"], "Unreachable", "{machines_ready}");
    let sentence = machines_ready["message"].as_str().unwrap();
    assert!(
        sentence.starts_with("0 of 4 machines ready; 4 unreachable: cp-0 (could not connect to "),
        "{sentence}"
    );
    assert!(sentence.ends_with(": connection refused) and 1 more"), "{sentence}");
    assert!(sentence.chars().count() <= 320, "a condition's message is bounded: {sentence}");

    // Each machine: its own error.
    for id in MACHINES {
        let machine = api.get(&format!("/api/v1/tenants/dark/machines/{id}")).await.expect(200);
        let address = machine["spec"]["managementAddress"].as_str().unwrap();
        assert_eq!(machine["status"]["stage"], "provisioning", "{machine}");
        assert_eq!(machine["status"]["ready"], false, "{machine}");
        assert_eq!(
            machine["status"]["message"],
            format!("applying the machine config: could not connect to {address}: connection refused"),
            "{machine}"
        );
    }

    // The console: the tenants table says not ready, and why.
    let base = format!("http://{}", server.addr());
    let browser = Browser::start().await;
    browser.goto(&format!("{base}/login")).await;
    sign_in(&browser, ADMIN_USER, ADMIN_PASSWORD).await;
    browser.wait_for_path("/").await;
    let row = "tr[data-tenant=dark]";
    assert_eq!(browser.text(&format!("{row} .ready")).await, "no");
    assert_eq!(browser.text(&format!("{row} .phase")).await, "provisioning");
    assert_eq!(browser.text(&format!("{row} .message")).await, blocker);
    assert_eq!(colour(&browser, &format!("{row} .ready")).await, "rgb(138, 90, 0)", "not ready reads amber");
    browser.assert_accessible("the tenants table with a tenant that is not ready").await;

    // The tenant page: the headline first, in the first screen, with the
    // blocker, and nothing of it green.
    browser.click(&format!("{row} a")).await;
    browser.wait_for_path("/tenants/dark").await;
    let after_heading = "return document.querySelector('#tenant > h1').nextElementSibling.id";
    assert_eq!(browser.execute(after_heading, Vec::new()).await, "headline");
    let top = "var box = document.getElementById('message').getBoundingClientRect(); \
               return box.top >= 0 && box.bottom <= window.innerHeight";
    assert_eq!(browser.execute(top, Vec::new()).await, true, "the blocker shows without scrolling");
    assert_eq!(browser.text("#ready").await, "no");
    assert_eq!(browser.text("#message-label").await, "Why not ready");
    assert_eq!(browser.text("#message").await, blocker);
    assert_eq!(browser.text("#phase").await, "provisioning");
    let colours = "var seen = []; var headline = document.getElementById('headline'); \
                   [headline].concat(Array.from(headline.querySelectorAll('*'))).forEach(function (e) { \
                     var style = getComputedStyle(e); \
                     seen.push(style.color, style.backgroundColor, style.borderLeftColor); }); \
                   return seen";
    let seen: Vec<String> = serde_json::from_value(browser.execute(colours, Vec::new()).await).unwrap();
    assert!(!seen.iter().any(|colour| colour == GREEN), "green in a headline that is not ready: {seen:?}");
    let band = "return getComputedStyle(document.getElementById('headline')).borderLeftColor";
    assert_eq!(browser.execute(band, Vec::new()).await, "rgb(138, 90, 0)", "the band is amber");

    // Each machine's row says why.
    for id in MACHINES {
        let message = browser.text(&format!("tr[data-machine={id}] .message")).await;
        assert!(message.starts_with("applying the machine config: could not connect to "), "{id}: {message}");
        assert!(message.ends_with(":50000: connection refused"), "{id}: {message}");
    }
    browser.assert_accessible("the tenant page of a tenant whose hosts cannot be reached").await;
    browser.screenshot(&screenshot("tenant-not-ready")).await;
    browser.close().await;
}

/// The computed text colour of the element at `selector`.
async fn colour(browser: &Browser, selector: &str) -> Value {
    let script = format!("return getComputedStyle(document.querySelector('{selector}')).color");
    browser.execute(&script, Vec::new()).await
}

//! Faults of the tool: a destroy that fails, a run that hangs past its
//! timeout, output that is garbage. Each leaves the data intact, says
//! `failed` (or keeps deleting) with the reason, and is retried.

use std::time::Duration;

use serde_json::json;

use super::{CONVERGE, Engine, eventually, machine_ids, metal_tenant, provisioned};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_destroy_keeps_the_finalizers_until_it_succeeds() {
    let engine = Engine::new();
    let server = engine.options().start().await;
    let api = server.api();
    api.post("/api/v1/tenants", &metal_tenant("acme", 1, 1)).await.expect(201);
    provisioned(&api, "acme").await;
    engine.set("fail-destroy", true);
    api.delete("/api/v1/tenants/acme").await.expect(202);
    let tenant = eventually("the failed destroy in status", CONVERGE, || async {
        let tenant = api.get("/api/v1/tenants/acme").await.expect(200);
        let message = tenant["status"]["message"].as_str().unwrap_or_default().to_string();
        message.contains("injected failure of destroy").then_some(tenant)
    })
    .await;
    assert_eq!(tenant["metadata"]["finalizers"], json!(["service.io/machines", "service.io/secrets"]));
    assert_eq!(tenant["status"]["phase"], "deleting");
    assert_eq!(machine_ids(&api, "acme").await, ["cp-0", "workers-0"], "children stay");

    engine.set("fail-destroy", false);
    eventually("the tenant to go", CONVERGE, || async {
        (api.get("/api/v1/tenants/acme").await.status == 404).then_some(())
    })
    .await;
    assert!(engine.runs().iter().filter(|verb| *verb == "destroy").count() >= 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_run_is_killed_with_no_orphan_and_retried() {
    let engine = Engine::new();
    let server = engine.options().env("CMS_TOFU_TIMEOUT", "6s").start().await;
    let api = server.api();
    engine.set("hang-apply", true);
    api.post("/api/v1/tenants", &metal_tenant("acme", 1, 1)).await.expect(201);
    let tenant = eventually("the timeout in status", CONVERGE, || async {
        let tenant = api.get("/api/v1/tenants/acme").await.expect(200);
        (tenant["status"]["phase"] == "failed").then_some(tenant)
    })
    .await;
    let message = tenant["status"]["message"].as_str().unwrap();
    assert!(message.contains("timed out after 6s"), "{message}");
    // Every run's process group is gone, the hung `sleep` children included.
    for group in engine.pids() {
        let left = members_of_group(group);
        assert!(left.is_empty(), "processes left in group {group}: {left:?}");
    }
    engine.set("hang-apply", false);
    provisioned(&api, "acme").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_output_leaves_the_data_intact() {
    let engine = Engine::new();
    let server = engine.options().start().await;
    let api = server.api();
    api.post("/api/v1/tenants", &metal_tenant("acme", 1, 1)).await.expect(201);
    provisioned(&api, "acme").await;
    let projected = api.get("/api/v1/tenants/acme/projected").await.expect(200);

    engine.set("garbage-show", true);
    let mut group = api.get("/api/v1/tenants/acme/node-groups/workers").await.expect(200);
    group["spec"]["count"] = json!(2);
    api.put("/api/v1/tenants/acme/node-groups/workers", &group).await.expect(200);
    let tenant = eventually("the garbage in status", CONVERGE, || async {
        let tenant = api.get("/api/v1/tenants/acme").await.expect(200);
        (tenant["status"]["phase"] == "failed").then_some(tenant)
    })
    .await;
    assert!(tenant["status"]["message"].as_str().unwrap().contains("not its JSON state"), "{tenant}");
    assert_eq!(tenant["spec"]["nodeGroups"][1]["count"], 2, "the spec stands");
    assert_eq!(machine_ids(&api, "acme").await, ["cp-0", "workers-0"], "machines are as last applied");
    assert_eq!(api.get("/api/v1/tenants/acme/projected").await.expect(200), projected);

    engine.set("garbage-show", false);
    provisioned(&api, "acme").await;
    tokio::time::timeout(Duration::from_secs(30), async {
        while machine_ids(&api, "acme").await.len() != 3 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the third machine appears after the retry");
}

/// The live processes in `/proc` whose process group is `group`.
fn members_of_group(group: i32) -> Vec<i32> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        let Some((_, rest)) = stat.rsplit_once(')') else { continue };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(2).and_then(|pgrp| pgrp.parse::<i32>().ok()) == Some(group)
            && fields.first() != Some(&"Z")
        {
            members.push(pid);
        }
    }
    members
}

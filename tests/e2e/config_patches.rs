//! Create, get, list, update and delete of config patches.

use cms_e2e::Server;
use cms_e2e::fixtures::{TENANTS, config_patch, config_patches_path, item_names, resource_version, tenant};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_patch_lifecycle_over_http() {
    let server = Server::start().await;
    let api = server.api();
    api.post(TENANTS, &tenant("gamma")).await.expect(201);
    let patches = config_patches_path("gamma");

    assert_eq!(api.get(&patches).await.expect(200), json!({"items": [], "total": 0}));

    let created = api.post(&patches, &config_patch("sysctls")).await.expect(201);
    assert_eq!(created["metadata"]["name"], "sysctls");
    assert_eq!(resource_version(&created), 1);
    assert_eq!(created["spec"]["format"], "strategic");
    assert_eq!(created["spec"]["target"], "all");
    assert_eq!(created["spec"]["enabled"], true, "patches are enabled by default");
    assert_eq!(created["spec"]["patches"], config_patch("sysctls")["spec"]["patches"]);

    let path = format!("{patches}/sysctls");
    let fetched = api.get(&path).await.expect(200);
    assert_eq!(fetched, created);

    let mut json_patch = config_patch("hostname");
    json_patch["spec"] = json!({
        "format": "jsonpatch",
        "target": "worker",
        "patches": [{"op": "add", "path": "/machine/network/hostname", "value": "w"}]
    });
    api.post(&patches, &json_patch).await.expect(201);
    assert_eq!(item_names(&api.get(&patches).await.expect(200)), ["hostname", "sysctls"]);

    let mut update = fetched.clone();
    update["spec"]["enabled"] = json!(false);
    update["spec"]["target"] = json!("controlplane");
    let updated = api.put(&path, &update).await.expect(200);
    assert_eq!(updated["spec"]["enabled"], false);
    assert_eq!(updated["spec"]["target"], "controlplane");
    assert_eq!(resource_version(&updated), 2);
    assert_eq!(api.get(&path).await.expect(200), updated);

    // Patches are checked on write: an operation RFC 6902 does not know is 422.
    let mut bad = config_patch("broken");
    bad["spec"] = json!({"format": "jsonpatch", "patches": [{"op": "frobnicate", "path": "/x"}]});
    let message = api.post(&patches, &bad).await.expect_error(422, "Invalid");
    assert!(message.contains("spec.patches[0]"), "the message names the field: {message}");

    api.delete(&path).await.expect_empty(204);
    api.get(&path).await.expect_error(404, "NotFound");
    assert_eq!(item_names(&api.get(&patches).await.expect(200)), ["hostname"]);

    api.get(&config_patches_path("nobody")).await.expect_error(404, "NotFound");
    api.post(&patches, &json_patch).await.expect_error(409, "Conflict");
}

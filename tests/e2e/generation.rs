//! `metadata.generation` grows on spec changes only, while
//! `metadata.resourceVersion` grows on every write.

use cms_e2e::Server;
use cms_e2e::fixtures::{
    TENANTS, generation, node_group, node_groups_path, resource_version, tenant, tenant_path, worker_group,
};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generation_grows_only_on_spec_change() {
    let server = Server::start().await;
    let api = server.api();
    let path = tenant_path("kappa");
    let created = api.post(TENANTS, &tenant("kappa")).await.expect(201);
    assert_eq!((resource_version(&created), generation(&created)), (1, 1));

    let mut labelled = created.clone();
    labelled["metadata"]["labels"] = json!({"tier": "gold"});
    labelled["metadata"]["annotations"] = json!({"note": "metadata only"});
    let labelled = api.put(&path, &labelled).await.expect(200);
    assert_eq!((resource_version(&labelled), generation(&labelled)), (2, 1), "labels are not spec");

    // The same spec written differently (a leading v) is the same spec.
    let mut same = labelled.clone();
    same["spec"]["kubernetesVersion"] = json!("v1.31.1");
    let same = api.put(&path, &same).await.expect(200);
    assert_eq!(generation(&same), 1, "a normalized-equal spec is no change");

    let mut changed = same.clone();
    changed["spec"]["serviceNetwork"] = json!(["10.100.0.0/16"]);
    let changed = api.put(&path, &changed).await.expect(200);
    assert!(resource_version(&changed) > resource_version(&same));
    assert_eq!(generation(&changed), 2, "a spec change");

    // Values the server owns are ignored on input.
    let mut forged = changed.clone();
    forged["metadata"]["generation"] = json!(40);
    forged["status"] = json!({"phase": "active", "ready": true});
    let forged = api.put(&path, &forged).await.expect(200);
    assert_eq!(generation(&forged), 2, "generation is the server's");
    assert_eq!(forged["status"], changed["status"], "status is the controller's");

    // Node groups: their own generation, and the tenant's on spec changes only.
    let groups = node_groups_path("kappa");
    let group = api.post(&groups, &node_group(worker_group("workers", 1, 1))).await.expect(201);
    let tenant_before = api.get(&path).await.expect(200);
    let mut relabelled = group.clone();
    relabelled["metadata"]["labels"] = json!({"pool": "a"});
    let relabelled = api.put(&format!("{groups}/workers"), &relabelled).await.expect(200);
    assert_eq!((resource_version(&relabelled), generation(&relabelled)), (2, 1));
    let tenant_after = api.get(&path).await.expect(200);
    assert_eq!(
        generation(&tenant_after),
        generation(&tenant_before),
        "a group's labels are not the tenant's spec"
    );

    let mut scaled = relabelled.clone();
    scaled["spec"] = worker_group("workers", 2, 1);
    let scaled = api.put(&format!("{groups}/workers"), &scaled).await.expect(200);
    assert_eq!(generation(&scaled), 2);
    let tenant_scaled = api.get(&path).await.expect(200);
    assert_eq!(
        generation(&tenant_scaled),
        generation(&tenant_after) + 1,
        "a group's spec is the tenant's spec"
    );
}

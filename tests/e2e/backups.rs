//! Per-tenant etcd backups with the real server, its reconciler and the
//! engine, over fake nodes: an on-demand backup in the directory store,
//! listed and downloaded with the snapshot's SHA-256; a corrupted file is
//! refused before anything reaches a node; and after every control plane
//! is lost and replaced, a restore uploads identical bytes and bootstraps
//! etcd from them (the runbook of `docs/backups.md`).

use cms_e2e::cluster::FakeCluster;
use cms_e2e::nodes::StoreWriter;
use cms_e2e::{Api, Server};
use cms_fake_node::snapshot_bytes;
use cms_nodeapi::{ApplyMode, ApplyRequest, NodeApi, NodeCredentials, NodeTarget, TalosNodeClient};
use cms_talos::SecretsBundle;
use reqwest::Method;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::provisioning::cluster::fake_cluster;
use crate::provisioning::{Engine, converged, metal_tenant};

/// The fake node's snapshot size unless set: 256 KiB.
pub(crate) const SNAPSHOT_SIZE: usize = 256 * 1024;

pub(crate) fn sha256(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// The tenant `acme` on `server`, one control plane and one worker on fake
/// nodes, converged; with its secrets bundle.
pub(crate) async fn converged_tenant(server: &Server) -> (SecretsBundle, FakeCluster) {
    let api = server.api();
    api.post("/api/v1/tenants", &metal_tenant("acme", 1, 1)).await.expect(201);
    let bundle = StoreWriter::open(server.data_dir()).await.bundle("acme").await;
    let cluster = fake_cluster(&bundle, 1, 1).await;
    converged(&api, "acme").await;
    (bundle, cluster)
}

/// Every control plane of `acme` is lost: new fake nodes take the hosts,
/// with an etcd that waits for its bootstrap, and `cp-0` takes the tenant's
/// config in maintenance mode (the manual step of the runbook in
/// `docs/backups.md`; the tenant was bootstrapped once, so nothing
/// bootstraps a fresh etcd on it).
pub(crate) async fn replace_control_planes(
    api: &Api,
    bundle: &SecretsBundle,
    lost: FakeCluster,
) -> FakeCluster {
    drop(lost);
    // The old listeners close as their aborted tasks end.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let cluster = fake_cluster(bundle, 1, 1).await;
    let config = api.get("/api/v1/tenants/acme/machines/cp-0/config").await;
    assert_eq!(config.status, 200, "{}", config.body);
    let target = NodeTarget::parse(&cluster.node("cp-0").node.addr().to_string()).unwrap();
    let request = ApplyRequest { config: config.body.into_bytes(), mode: ApplyMode::Auto, dry_run: false };
    let client = TalosNodeClient::new(std::time::Duration::from_secs(10));
    client.apply_configuration(&target, &NodeCredentials::maintenance(), request).await.unwrap();
    cluster
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_is_taken_downloaded_refused_when_corrupt_and_restored() {
    let engine = Engine::new();
    let server = engine.options().start().await;
    let api = server.api();
    let (bundle, cluster) = converged_tenant(&server).await;

    // On demand, into `<data dir>/backups`.
    let backup = api.post("/api/v1/tenants/acme/backups", &json!({})).await.expect(201);
    let id = backup["id"].as_str().unwrap().to_string();
    let snapshot = snapshot_bytes(SNAPSHOT_SIZE);
    let expected = sha256(&snapshot);
    assert_eq!(backup["sha256"], expected, "{backup}");
    assert_eq!(backup["size"], SNAPSHOT_SIZE);
    assert_eq!(backup["machine"], "cp-0");
    let file = server.data_dir().path().join("backups").join("acme").join(format!("{id}.etcd"));
    let stored = std::fs::read(&file).unwrap();
    assert!(!stored.windows(64).any(|w| w == &snapshot[1000..1064]), "stored encrypted");
    let list = api.get("/api/v1/tenants/acme/backups").await.expect(200);
    assert_eq!(list["items"], json!([backup.clone()]));

    let item = format!("/api/v1/tenants/acme/backups/{id}");
    let response = api.request(Method::GET, &format!("{item}/download")).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.headers()["content-type"], "application/octet-stream");
    let downloaded = response.bytes().await.unwrap();
    assert_eq!(sha256(&downloaded), expected);

    // Every control plane is lost and replaced.
    let cluster = replace_control_planes(&api, &bundle, cluster).await;

    // A corrupted backup is refused, and no node hears of it.
    let mut corrupt = stored.clone();
    let middle = corrupt.len() / 2;
    corrupt[middle] ^= 0x40;
    std::fs::write(&file, &corrupt).unwrap();
    let error = api.post(&format!("{item}/restore"), &json!({})).await.expect_error(409, "Conflict");
    assert!(error.contains("does not verify"), "{error}");
    assert!(cluster.calls_of("EtcdRecover").is_empty(), "{:?}", cluster.calls_of("EtcdRecover"));

    // The good one comes back byte for byte.
    std::fs::write(&file, &stored).unwrap();
    let restored = api.post(&format!("{item}/restore"), &json!({})).await.expect(200);
    assert_eq!(restored["machine"], "cp-0", "{restored}");
    let node = &cluster.node("cp-0").node;
    assert_eq!(node.recovered_sha256().as_deref(), Some(expected.as_str()));
    let bootstraps = cluster.node("cp-0").calls_of("Bootstrap");
    assert_eq!(bootstraps.len(), 1, "{bootstraps:?}");
    assert_eq!(bootstraps[0]["payload"]["recoverEtcd"], true, "{bootstraps:?}");
    assert_eq!(cluster.etcd.restored_from().as_deref(), Some(expected.as_str()));
    // The tenant shows the restore in its `Restoring` condition, and the
    // backup in its status.
    let tenant = api.get("/api/v1/tenants/acme").await.expect(200);
    let conditions = tenant["status"]["conditions"].as_array().unwrap();
    let restoring = conditions.iter().find(|condition| condition["type"] == "Restoring").expect("Restoring");
    assert_eq!(
        (restoring["status"].as_str(), restoring["reason"].as_str()),
        (Some("False"), Some("Restored"))
    );
    assert!(restoring["message"].as_str().unwrap().contains(&id), "{restoring}");
    assert_eq!(tenant["status"]["backups"]["lastSuccess"]["id"], id.as_str(), "{tenant}");

    // Deleting a backup is for admins; a deleted backup is gone.
    let password = "backup-editor-password";
    let user = json!({"metadata": {"name": "backup-editor"}, "spec": {"role": "edit", "password": password}});
    api.post("/api/v1/users", &user).await.expect(201);
    let editor = cms_e2e::Api::new(server.addr()).login("backup-editor", password).await;
    editor.delete(&item).await.expect_error(403, "Forbidden");
    api.delete(&item).await.expect_empty(204);
    api.get(&item).await.expect_error(404, "NotFound");
    assert!(!file.exists(), "the file goes with the record");
    api.delete(&item).await.expect_error(404, "NotFound");

    // The audit log has the backup, the download and both restores.
    let audit = api.get("/api/v1/audit?tenant=acme").await.expect(200);
    let routes: Vec<String> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|record| record["target"]["kind"] == "Backup")
        .map(|record| format!("{} {}", record["method"].as_str().unwrap(), record["path"].as_str().unwrap()))
        .collect();
    let wanted = [
        "POST /api/v1/tenants/acme/backups".to_string(),
        format!("GET {item}/download"),
        format!("POST {item}/restore"),
        format!("DELETE {item}"),
    ];
    for want in wanted {
        assert!(routes.contains(&want), "{want} not in {routes:?}");
    }
}

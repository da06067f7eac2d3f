//! Per-tenant etcd backups in an S3-compatible bucket: the real server with
//! `CMS_BACKUP_URL=s3://backups/cms/prod` and the `AWS_*` variables pointing
//! at moto's S3 API, over fake nodes. An on-demand backup lands in the
//! bucket as its two objects, encrypted; it is listed and downloaded with
//! the snapshot's SHA-256; an object swapped for another backup's, or
//! corrupted, is refused on restore before anything reaches a node.

use cms_e2e::s3::MotoServer;
use cms_fake_node::snapshot_bytes;
use reqwest::Method;
use serde_json::json;

use crate::backups::{SNAPSHOT_SIZE, converged_tenant, sha256};
use crate::provisioning::Engine;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_lands_in_s3_and_a_swapped_or_corrupt_object_is_refused() {
    let moto = MotoServer::start().await;
    let engine = Engine::new();
    let mut options = engine.options().env("CMS_BACKUP_URL", "s3://backups/cms/prod");
    for (name, value) in moto.env() {
        options = options.env(name, value);
    }
    let server = options.start().await;
    assert!(server.output().contains("kept in an S3-compatible bucket"), "{}", server.output());
    assert!(
        !server.output().contains("AWS_SECRET") && !server.output().contains("moto-secret-7f3a"),
        "no credentials logged"
    );
    let api = server.api();
    let (_bundle, cluster) = converged_tenant(&server).await;

    // On demand, into the bucket under the URL's prefix; nothing local.
    let backup = api.post("/api/v1/tenants/acme/backups", &json!({})).await.expect(201);
    let id = backup["id"].as_str().unwrap().to_string();
    let snapshot = snapshot_bytes(SNAPSHOT_SIZE);
    let expected = sha256(&snapshot);
    assert_eq!(backup["sha256"], expected, "{backup}");
    assert_eq!(backup["size"], SNAPSHOT_SIZE);
    let file = format!("cms/prod/acme/{id}.etcd");
    let record = format!("cms/prod/acme/{id}.json");
    assert_eq!(moto.object_names().await, [file.clone(), record.clone()]);
    assert!(!server.data_dir().path().join("backups").exists(), "nothing in the data directory");
    let stored = moto.get_object(&file).await;
    assert!(!stored.windows(64).any(|w| w == &snapshot[1000..1064]), "stored encrypted");
    let described: serde_json::Value = serde_json::from_slice(&moto.get_object(&record).await).unwrap();
    assert_eq!(described["sha256"], expected, "{described}");

    let list = api.get("/api/v1/tenants/acme/backups").await.expect(200);
    assert_eq!(list["items"], json!([backup.clone()]));
    let item = format!("/api/v1/tenants/acme/backups/{id}");
    let response = api.request(Method::GET, &format!("{item}/download")).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.headers()["x-content-sha256"], expected.as_str());
    assert_eq!(sha256(&response.bytes().await.unwrap()), expected);

    // A second backup's file put in place of the first's does not open as
    // the first, and no node hears of it.
    let second = api.post("/api/v1/tenants/acme/backups", &json!({})).await.expect(201);
    let other = moto.get_object(&format!("cms/prod/acme/{}.etcd", second["id"].as_str().unwrap())).await;
    assert_eq!(moto.object_names().await.len(), 4);
    moto.put_object(&file, other).await;
    let error = api.post(&format!("{item}/restore"), &json!({})).await.expect_error(409, "Conflict");
    assert!(error.contains("does not verify"), "{error}");

    // Nor does a corrupted one.
    let mut corrupt = stored.clone();
    let middle = corrupt.len() / 2;
    corrupt[middle] ^= 0x40;
    moto.put_object(&file, corrupt).await;
    let error = api.post(&format!("{item}/restore"), &json!({})).await.expect_error(409, "Conflict");
    assert!(error.contains("does not verify"), "{error}");
    assert!(cluster.calls_of("EtcdRecover").is_empty(), "{:?}", cluster.calls_of("EtcdRecover"));
    assert!(cluster.calls_of("Bootstrap").iter().all(|(_, call)| call["payload"]["recoverEtcd"] != true));

    // Put back, it downloads whole again.
    moto.put_object(&file, stored).await;
    let response = api.request(Method::GET, &format!("{item}/download")).send().await.unwrap();
    assert_eq!(sha256(&response.bytes().await.unwrap()), expected);
}

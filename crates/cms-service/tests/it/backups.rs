//! `/tenants/{name}/backups` over the real app, store and directory store,
//! with a mocked node client: what is taken is what is downloaded and
//! restored, a corrupt backup reaches no node, a second backup while one
//! runs is a 409, and who may do what.

use std::sync::{Arc, Mutex};

use actix_web::body::BoxBody;
use actix_web::dev::{Service, ServiceResponse};
use actix_web::test::{self, TestRequest};
use cms_backup::{Backups, DirStore};
use cms_model::{Kind, UserRole};
use cms_service::{AppState, app};
use cms_store::{Draft, Key, Store};
use cms_tenancy::{EtcdMemberStatus, MockNodeClient, UploadStream};
use futures_util::StreamExt;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::{Harness, harness};

fn snapshot() -> Vec<u8> {
    (0..300_000u32).map(|i| (i % 251) as u8).collect()
}

/// A node client whose one control plane leads etcd and serves [`snapshot`];
/// uploads are handed to `uploads`.
fn nodes(uploads: Arc<Mutex<Vec<UploadStream>>>) -> MockNodeClient {
    let mut nodes = MockNodeClient::new();
    nodes.expect_etcd_status().returning(|_| {
        Ok(EtcdMemberStatus {
            member_id: 7,
            leader: 7,
            protocol_version: "3.5.0".into(),
            db_size: 0,
            raft_index: 1,
            raft_term: 1,
            errors: Vec::new(),
            is_learner: false,
        })
    });
    nodes.expect_version().returning(|_| Ok("1.14.0".into()));
    nodes.expect_etcd_snapshot().returning(|_| {
        let chunks: Vec<_> = snapshot().chunks(64 * 1024).map(|chunk| Ok(chunk.to_vec())).collect();
        Ok(Box::pin(futures_util::stream::iter(chunks)))
    });
    nodes.expect_etcd_recover().returning(move |_, chunks| {
        uploads.lock().unwrap().push(chunks);
        Ok(())
    });
    nodes.expect_bootstrap_recover().returning(|_, _| Ok(()));
    nodes
}

async fn control_plane<S>(h: &Harness<S>, tenant: &str) {
    let draft = Draft {
        spec: json!({"managementAddress": "127.0.0.1:50000"}),
        status: Some(json!({"stage": "ready", "role": "controlplane"})),
        ..Draft::default()
    };
    h.store.create(Key::child(Kind::Machine, tenant, "cp-0"), draft).await.unwrap();
}

async fn call(
    app: &impl Service<actix_http::Request, Response = ServiceResponse<BoxBody>, Error = actix_web::Error>,
    request: TestRequest,
    token: &str,
) -> (u16, actix_web::web::Bytes) {
    let request = request.insert_header(("authorization", format!("Bearer {token}")));
    let response = test::call_service(app, request.to_request()).await;
    let status = response.status().as_u16();
    (status, test::read_body(response).await)
}

fn parse(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap()
}

#[actix_web::test]
async fn a_backup_is_taken_listed_downloaded_and_restored() {
    let h = harness().await;
    h.tenant("acme").await;
    control_plane(&h, "acme").await;
    let uploads = Arc::new(Mutex::new(Vec::new()));
    let dir = h.dir().join("backups");
    let backups = Backups::new(
        h.store.clone(),
        Arc::new(nodes(uploads.clone())),
        h.state.tenancy.secrets().clone(),
        Arc::new(DirStore::new(&dir)),
    );
    let app = test::init_service(app(h.state.clone().with_backups(backups))).await;
    let token = h.token.clone();

    let (status, body) = call(&app, TestRequest::post().uri("/api/v1/tenants/acme/backups"), &token).await;
    assert_eq!(status, 201, "{body:?}");
    let backup = parse(&body);
    let id = backup["id"].as_str().unwrap().to_string();
    assert_eq!(backup["size"], 300_000);
    assert_eq!(backup["sha256"], hex::encode(Sha256::digest(snapshot())));
    assert_eq!((backup["machine"].as_str(), backup["talosVersion"].as_str()), (Some("cp-0"), Some("1.14.0")));
    assert_eq!(backup["etcdVersion"], "3.5.0");

    let (status, body) = call(&app, TestRequest::get().uri("/api/v1/tenants/acme/backups"), &token).await;
    assert_eq!((status, parse(&body)["items"].clone()), (200, json!([backup.clone()])));
    let item = format!("/api/v1/tenants/acme/backups/{id}");
    assert_eq!(parse(&call(&app, TestRequest::get().uri(&item), &token).await.1), backup);
    let (status, body) = call(&app, TestRequest::get().uri(&format!("{item}/download")), &token).await;
    assert_eq!(status, 200);
    assert_eq!(body.as_ref(), snapshot().as_slice());

    // Editors take backups but neither download nor restore them.
    let editor = h.user("ed", UserRole::Edit).await;
    assert_eq!(call(&app, TestRequest::get().uri(&format!("{item}/download")), &editor).await.0, 403);
    assert_eq!(call(&app, TestRequest::post().uri(&format!("{item}/restore")), &editor).await.0, 403);

    let (status, body) = call(&app, TestRequest::post().uri(&format!("{item}/restore")), &token).await;
    assert_eq!(status, 200, "{body:?}");
    assert_eq!(parse(&body)["machine"], "cp-0");
    let upload = uploads.lock().unwrap().pop().expect("an upload");
    let uploaded: Vec<Vec<u8>> = upload.map(Result::unwrap).collect().await;
    assert_eq!(uploaded.concat(), snapshot());

    // A corrupt file is refused before anything reaches a node.
    let file = dir.join("acme").join(format!("{id}.etcd"));
    let mut bytes = std::fs::read(&file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 1;
    std::fs::write(&file, bytes).unwrap();
    let (status, body) = call(&app, TestRequest::post().uri(&format!("{item}/restore")), &token).await;
    assert_eq!(status, 409, "{body:?}");
    assert!(parse(&body)["error"].as_str().unwrap().contains("does not verify"), "{body:?}");
    assert!(uploads.lock().unwrap().is_empty());

    let (_, body) = call(&app, TestRequest::get().uri("/api/v1/audit?tenant=acme"), &token).await;
    let kinds: Vec<(String, String)> = parse(&body)["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|record| record["target"]["kind"] == "Backup")
        .map(|record| {
            (record["method"].as_str().unwrap().into(), record["target"]["name"].as_str().unwrap().into())
        })
        .collect();
    assert!(kinds.contains(&("POST".into(), id.clone())), "{kinds:?}");
    // The take, the editor's refused restore, the restore and the refused one.
    assert_eq!(kinds.iter().filter(|(method, _)| method == "POST").count(), 4, "{kinds:?}");
    // The admin's download; the editor's was refused before its handler.
    assert_eq!(kinds.iter().filter(|(method, _)| method == "GET").count(), 1, "{kinds:?}");
}

#[actix_web::test]
async fn unknown_tenants_and_backups_are_404_and_no_control_plane_is_409() {
    let h = harness().await;
    h.tenant("acme").await;
    let backups = Backups::new(
        h.store.clone(),
        Arc::new(MockNodeClient::new()),
        h.state.tenancy.secrets().clone(),
        Arc::new(DirStore::new(h.dir().join("backups"))),
    );
    let app = test::init_service(app(h.state.clone().with_backups(backups))).await;
    let token = h.token.clone();
    for (request, status) in [
        (TestRequest::get().uri("/api/v1/tenants/nobody/backups"), 404),
        (TestRequest::post().uri("/api/v1/tenants/nobody/backups"), 404),
        (TestRequest::get().uri("/api/v1/tenants/acme/backups/20261125t074211123z-0000"), 404),
        (TestRequest::get().uri("/api/v1/tenants/acme/backups/20261125t074211123z-0000/download"), 404),
        (TestRequest::post().uri("/api/v1/tenants/acme/backups/20261125t074211123z-0000/restore"), 404),
        (TestRequest::post().uri("/api/v1/tenants/acme/backups"), 409),
    ] {
        let (got, body) = call(&app, request, &token).await;
        assert_eq!(got, status, "{body:?}");
        let body = parse(&body);
        assert_eq!(body["status"], status);
    }
    assert_eq!(
        parse(&call(&app, TestRequest::get().uri("/api/v1/tenants/acme/backups"), &token).await.1)["items"],
        json!([])
    );
    // Without backups configured, the routes say so.
    let unconfigured = AppState { backups: None, ..h.state.clone() };
    let service = test::init_service(cms_service::app(unconfigured)).await;
    assert_eq!(call(&service, TestRequest::get().uri("/api/v1/tenants/acme/backups"), &token).await.0, 503);
}

#[actix_web::test]
async fn a_backup_asked_for_while_one_runs_is_409() {
    let h = harness().await;
    h.tenant("acme").await;
    control_plane(&h, "acme").await;
    // The snapshot is held until `gate` opens; each one started is announced.
    let (gate, open) = tokio::sync::watch::channel(false);
    let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
    let mut held = MockNodeClient::new();
    held.expect_etcd_status().returning(|_| {
        Ok(EtcdMemberStatus {
            member_id: 7,
            leader: 7,
            protocol_version: "3.5.0".into(),
            db_size: 0,
            raft_index: 1,
            raft_term: 1,
            errors: Vec::new(),
            is_learner: false,
        })
    });
    held.expect_version().returning(|_| Ok("1.14.0".into()));
    held.expect_etcd_snapshot().returning(move |_| {
        let _ = started_tx.send(());
        let mut open = open.clone();
        Ok(Box::pin(async_stream::stream! {
            let _ = open.wait_for(|open| *open).await;
            yield Ok(snapshot());
        }))
    });
    let backups = Backups::new(
        h.store.clone(),
        Arc::new(held),
        h.state.tenancy.secrets().clone(),
        Arc::new(DirStore::new(h.dir().join("backups"))),
    );
    let app = test::init_service(app(h.state.clone().with_backups(backups))).await;
    let token = h.token.clone();

    let first = call(&app, TestRequest::post().uri("/api/v1/tenants/acme/backups"), &token);
    let second = async {
        started.recv().await.expect("the first backup's snapshot starts");
        // One that waited for the first, instead of being refused, would
        // wait for ever: the first is held until this one answered.
        let refused = call(&app, TestRequest::post().uri("/api/v1/tenants/acme/backups"), &token);
        let refused = tokio::time::timeout(std::time::Duration::from_secs(30), refused)
            .await
            .expect("the second backup is refused, not kept waiting for the first");
        gate.send_replace(true);
        refused
    };
    let ((first, _), (status, body)) = futures_util::join!(first, second);
    assert_eq!(status, 409, "{body:?}");
    let body = parse(&body);
    assert_eq!((body["code"].as_str(), body["status"].as_u64()), (Some("Conflict"), Some(409)));
    assert!(body["error"].as_str().unwrap().contains("already running"), "{body}");
    assert_eq!(first, 201);
}

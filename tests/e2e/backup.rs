//! Backup and restore of the embedded store: `cms-server backup` copies the
//! store of a server under load, and `cms-server restore` brings the copy
//! back in a fresh data directory, where a server with the same secrets key
//! serves the same tenants and opens their sealed secrets. A restore refuses
//! a file that is not a database, and a data directory a server runs on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cms_e2e::commands::server_command;
use cms_e2e::fixtures::{TENANTS, tenant_path, total};
use cms_e2e::{Api, DataDir, Server, ServerOptions};
use serde_json::{Value, json};

/// The sealing key of both servers: standard base64 of 32 bytes.
const SECRETS_KEY: &str = "QmFja3VwQmFja3VwQmFja3VwQmFja3VwQmFja3VwISE=";
/// Tenants created before the load starts.
const EARLY: usize = 3;
/// How long the load may take to make progress.
const PROGRESS: Duration = Duration::from_secs(120);

/// A tenant that a kubeconfig can be issued for: it names its endpoint.
fn tenant(name: &str) -> Value {
    let mut body = cms_e2e::fixtures::tenant(name);
    body["spec"]["controlPlaneEndpoint"] = json!("https://127.0.0.1:6443");
    body
}

fn options() -> ServerOptions {
    Server::options().env("CMS_SECRETS_KEY", SECRETS_KEY).env("CMS_SECRETS_KEY_ID", "e2e-backup")
}

/// What the load has written so far: the tenants it created, and how many
/// updates were acknowledged.
#[derive(Debug, Default)]
struct Written {
    created: Vec<String>,
    updates: usize,
}

/// Updates the early tenants' labels and creates new tenants, in turn,
/// until `stop`; every write must succeed (a lost update race aside).
async fn write_until_stopped(api: Api, stop: Arc<AtomicBool>, written: Arc<Mutex<Written>>) {
    let mut round = 0;
    while !stop.load(Ordering::SeqCst) {
        for early in 0..EARLY {
            let path = tenant_path(&format!("early-{early}"));
            let mut body = api.get(&path).await.expect(200);
            body["metadata"]["labels"] = json!({"round": round.to_string()});
            let reply = api.put(&path, &body).await;
            assert!(
                reply.status == 200 || reply.status == 409,
                "an update failed: {} {}",
                reply.status,
                reply.body
            );
            written.lock().expect("not poisoned").updates += usize::from(reply.status == 200);
        }
        let name = format!("load-{round:03}");
        api.post(TENANTS, &tenant(&name)).await.expect(201);
        written.lock().expect("not poisoned").created.push(name);
        round += 1;
    }
}

/// Waits until the load has created `count` tenants, and returns them.
async fn created_at_least(written: &Mutex<Written>, count: usize) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + PROGRESS;
    loop {
        let created = written.lock().expect("not poisoned").created.clone();
        if created.len() >= count {
            return created;
        }
        assert!(tokio::time::Instant::now() < deadline, "the load created {} tenants in time", created.len());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The `N tenants` of a `backup` or `restore` report.
fn tenants_reported(report: &str) -> u64 {
    let (before, _) =
        report.split_once(" tenants").unwrap_or_else(|| panic!("no tenant count in {report:?}"));
    before.rsplit(' ').next().and_then(|count| count.parse().ok()).expect("a count before `tenants`")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_under_load_restores_in_a_fresh_data_directory() {
    let server = options().start().await;
    let api = server.api();
    for early in 0..EARLY {
        api.post(TENANTS, &tenant(&format!("early-{early}"))).await.expect(201);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(Mutex::new(Written::default()));
    let load = tokio::spawn(write_until_stopped(api.clone(), stop.clone(), written.clone()));

    // Every tenant acknowledged before the backup starts must be in it.
    let mut before: Vec<String> = (0..EARLY).map(|early| format!("early-{early}")).collect();
    before.extend(created_at_least(&written, 2).await);
    let work = tempfile::tempdir().expect("a temporary directory");
    let file = work.path().join("cms-backup.db");
    let file_arg = file.to_str().expect("a UTF-8 path");
    let backup = server_command(&options(), server.data_dir(), &["backup", "--to", file_arg]).await;
    let report = backup.ok();
    assert!(report.contains(file_arg), "{report}");
    let backed_up = tenants_reported(report);
    assert!(backed_up >= before.len() as u64, "{report}");

    // The load goes on past the backup; the refusals come meanwhile.
    created_at_least(&written, before.len() - EARLY + 2).await;
    let again = server_command(&options(), server.data_dir(), &["backup", "--to", file_arg]).await;
    assert!(again.failed().contains("already exists"), "{again}");
    let busy = server_command(&options(), server.data_dir(), &["restore", "--from", file_arg]).await;
    assert!(busy.failed().contains("in use"), "{busy}");
    stop.store(true, Ordering::SeqCst);
    tokio::time::timeout(PROGRESS, load).await.expect("the load stops").expect("the load never fails");
    assert!(written.lock().expect("not poisoned").updates > 0, "the load updated tenants");
    let served = total(&api.get(TENANTS).await.expect(200));
    assert!(served > backed_up, "tenants were created after the backup: {served} > {backed_up}");
    server.terminate().await;

    let fresh = DataDir::fresh();
    let junk = work.path().join("notes.db");
    std::fs::write(&junk, "not a database\n".repeat(200)).expect("the file is written");
    let refused =
        server_command(&options(), &fresh, &["restore", "--from", junk.to_str().expect("UTF-8")]).await;
    assert!(refused.failed().contains("not a SQLite database"), "{refused}");
    assert!(!fresh.path().join("cms.db").exists(), "a refused restore writes no database");

    let restore = server_command(&options(), &fresh, &["restore", "--from", file_arg]).await;
    assert_eq!(tenants_reported(restore.ok()), backed_up, "{restore}");
    let restored = options().start_in(fresh.clone()).await;
    let api = restored.api();
    assert_eq!(total(&api.get(TENANTS).await.expect(200)), backed_up, "the restored store is the backup");
    for name in &before {
        api.get(&tenant_path(name)).await.expect(200);
        for document in ["kubeconfig", "secrets"] {
            let reply = api.get(&format!("{}/{document}", tenant_path(name))).await;
            assert_eq!(
                reply.status, 200,
                "{name}'s {document}: its secrets open with the same key: {}",
                reply.body
            );
        }
    }
    let busy = server_command(&options(), &fresh, &["restore", "--from", file_arg]).await;
    assert!(busy.failed().contains("in use"), "{busy}");
    restored.terminate().await;
}

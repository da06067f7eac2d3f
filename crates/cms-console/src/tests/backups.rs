//! A tenant's etcd backups in the console, over the real `cms_backup`
//! backups in a directory and a fake node client: the tenant page's
//! summary, the backups page, taking, downloading, restoring (the
//! `Restoring` condition while it runs) and deleting, each control shown
//! and each form allowed only with the API's permission.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use cms_backup::{Backups, DirStore};
use cms_model::{Condition, Tenant};
use cms_store::{Draft, Key, Store};
use cms_tenancy::{
    Bootstrapped, EtcdMember, EtcdMemberStatus, NodeClient, NodeError, NodeRef, SnapshotChunks, UploadStream,
};
use futures_util::StreamExt;
use http::StatusCode;
use serde_json::json;
use tokio::sync::Semaphore;

use super::{ADMIN, Fixture, VIEWER, location};
use crate::{Body, Recorded};

/// The fake control plane's snapshot: 300 KiB that differ from chunk to chunk.
fn snapshot() -> Vec<u8> {
    (0..300 * 1024u32).map(|i| (i % 251) as u8 ^ (i / 4096) as u8).collect()
}

/// A control plane that answers the calls of backups and restores: a
/// healthy leader, its snapshot in 64 KiB chunks, and a restore whose
/// bootstrap waits for a permit of `gate`.
struct FakeNodes {
    snapshot: Vec<u8>,
    recovered: Mutex<Vec<u8>>,
    gate: Semaphore,
}

#[async_trait]
impl NodeClient for FakeNodes {
    async fn etcd_status(&self, _: &NodeRef) -> Result<EtcdMemberStatus, NodeError> {
        Ok(EtcdMemberStatus {
            member_id: 1,
            leader: 1,
            protocol_version: "3.5.0".into(),
            db_size: 0,
            raft_index: 0,
            raft_term: 0,
            errors: Vec::new(),
            is_learner: false,
        })
    }

    async fn version(&self, _: &NodeRef) -> Result<String, NodeError> {
        Ok("1.11.0".into())
    }

    async fn etcd_snapshot(&self, _: &NodeRef) -> Result<SnapshotChunks, NodeError> {
        let chunks: Vec<Result<Vec<u8>, NodeError>> =
            self.snapshot.chunks(64 * 1024).map(|chunk| Ok(chunk.to_vec())).collect();
        Ok(Box::pin(futures_util::stream::iter(chunks)))
    }

    async fn etcd_recover(&self, _: &NodeRef, mut chunks: UploadStream) -> Result<(), NodeError> {
        let mut received = Vec::new();
        while let Some(chunk) = chunks.next().await {
            received.extend(chunk.expect("the upload reads"));
        }
        *self.recovered.lock().expect("lock") = received;
        Ok(())
    }

    async fn bootstrap_recover(&self, _: &NodeRef, _: bool) -> Result<(), NodeError> {
        self.gate.acquire().await.expect("the gate stays open").forget();
        Ok(())
    }

    async fn apply_config(&self, _: &NodeRef, _: &str, _: bool) -> Result<(), NodeError> {
        unreachable!("backups apply no config")
    }
    async fn apply_config_reboot(&self, _: &NodeRef, _: &str) -> Result<(), NodeError> {
        unreachable!("backups apply no config")
    }
    async fn boot_time(&self, _: &NodeRef) -> Result<u64, NodeError> {
        unreachable!("backups ask no boot time")
    }
    async fn upgrade(&self, _: &NodeRef, _: &str) -> Result<(), NodeError> {
        unreachable!("backups upgrade nothing")
    }
    async fn bootstrap(&self, _: &NodeRef) -> Result<Bootstrapped, NodeError> {
        unreachable!("a restore bootstraps with recover_etcd")
    }
    async fn etcd_members(&self, _: &NodeRef) -> Result<Vec<EtcdMember>, NodeError> {
        unreachable!("backups list no members")
    }
    async fn etcd_leave(&self, _: &NodeRef) -> Result<(), NodeError> {
        unreachable!("backups leave nothing")
    }
    async fn etcd_remove_member(&self, _: &NodeRef, _: u64) -> Result<(), NodeError> {
        unreachable!("backups remove no member")
    }
    async fn reset(&self, _: &NodeRef, _: bool) -> Result<(), NodeError> {
        unreachable!("backups reset nothing")
    }
    async fn etcd_forfeit_leadership(&self, _: &NodeRef) -> Result<Option<String>, NodeError> {
        unreachable!("backups move no leadership")
    }
}

/// The fixture's console serving backups under its directory, through
/// `nodes`; tenant `demo` with control plane `m-1`.
async fn with_backups(nodes: Arc<FakeNodes>) -> (Fixture, tempfile::TempDir) {
    let mut f = Fixture::new().await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let objects = Arc::new(DirStore::new(dir.path().join("backups")));
    let backups = Backups::new(f.store.clone(), nodes, f.console.tenancy.secrets().clone(), objects);
    f.console = f.console.clone().with_backups(backups);
    f.tenant("demo", json!({}), "active").await;
    f.machine("demo", "m-1", true).await;
    (f, dir)
}

fn nodes(permits: usize) -> Arc<FakeNodes> {
    Arc::new(FakeNodes { snapshot: snapshot(), recovered: Mutex::default(), gate: Semaphore::new(permits) })
}

/// The tenant's `Restoring` condition, as stored.
fn restoring(f: &Fixture) -> Option<Condition> {
    let tenant: Tenant = f.store.get(&Key::tenant("demo")).expect("stored").parse().expect("parses");
    tenant.status.conditions.into_iter().find(|condition| condition.kind == "Restoring")
}

/// Takes a backup of `demo` as `session` and gives its id.
async fn take(f: &Fixture, session: &str) -> String {
    let taken = f.submit("/tenants/demo/backups/new", session, &[]).await;
    let to = location(&taken).to_string();
    let id = to.strip_prefix("/tenants/demo/backups?taken=").and_then(|rest| rest.split('#').next());
    id.expect("the new backup's id").to_string()
}

#[tokio::test]
async fn an_admin_takes_downloads_restores_and_deletes_a_backup() {
    let nodes = nodes(0);
    let (f, dir) = with_backups(nodes.clone()).await;
    let admin = f.sign_in(ADMIN).await;

    let tenant = f.get("/tenants/demo", Some(&admin)).await;
    for expected in [
        "<h2 id=\"backups-heading\">Backups</h2>",
        "<dd id=\"backup-schedule\">none: backups are taken on demand</dd>",
        "data-status=\"\" data-reason=\"\" role=\"status\">No restore has run.</p>",
        "<a id=\"backups-link\" href=\"/tenants/demo/backups\">Backups of demo</a>",
    ] {
        assert!(tenant.body.contains(expected), "{expected}: {}", tenant.body);
    }
    let empty = f.get("/tenants/demo/backups", Some(&admin)).await;
    assert_eq!(empty.status, StatusCode::OK, "{}", empty.body);
    assert!(empty.body.contains("<p id=\"no-backups\">"), "{}", empty.body);
    assert!(empty.body.contains("action=\"/tenants/demo/backups/new\""), "{}", empty.body);

    // Taken: the form needs its token; then the page shows the backup.
    let tokenless = f.post("/tenants/demo/backups/new", Some(&admin), &[]).await;
    assert_eq!(tokenless.status, StatusCode::FORBIDDEN, "{}", tokenless.body);
    let id = take(&f, &admin).await;
    let page = f.get(&format!("/tenants/demo/backups?taken={id}"), Some(&admin)).await;
    let file = dir.path().join("backups").join("demo").join(format!("{id}.etcd"));
    for expected in [
        format!("Backup {id} taken: 300.00 KiB from m-1."),
        format!("<tr id=\"backup-{id}\" data-backup=\"{id}\">"),
        "<td class=\"size\" data-bytes=\"307200\">300.00 KiB</td>".to_string(),
        "<td class=\"status\" data-status=\"stored\">stored</td>".to_string(),
        "<td class=\"machine\">m-1, Talos 1.11.0, etcd 3.5.0</td>".to_string(),
        format!("<td class=\"location\"><code>{}</code></td>", file.display()),
        format!("href=\"/tenants/demo/backups/{id}/download\" download>"),
        format!("action=\"/tenants/demo/backups/{id}/restore\""),
        format!("<label for=\"restore-{id}-confirm\">Type the tenant's name, <code>demo</code>"),
        format!("action=\"/tenants/demo/backups/{id}/delete\""),
    ] {
        assert!(page.body.contains(&expected), "{expected}: {}", page.body);
    }
    let tenant = f.get("/tenants/demo", Some(&admin)).await;
    assert!(tenant.body.contains(&format!("<code>{id}</code>, 300.00 KiB")), "{}", tenant.body);

    // Downloaded: the snapshot itself, with the API's headers, on the audit log.
    let mut response = f.open(&format!("/tenants/demo/backups/{id}/download"), &admin).await;
    assert_eq!(response.status(), StatusCode::OK);
    let header = |name: &str| response.headers()[name].to_str().expect("ascii").to_string();
    assert_eq!(header("content-type"), "application/octet-stream");
    assert_eq!(header("content-disposition"), format!("attachment; filename=\"demo-{id}.db\""));
    assert_eq!(header("cache-control"), "no-store");
    assert!(response.extensions().get::<Recorded>().is_some(), "the download is on the audit log");
    let Body::Fallible(chunks) = response.body_mut() else { panic!("the download is streamed") };
    let chunks: Vec<Bytes> = chunks.map(|chunk| chunk.expect("the backup reads")).collect().await;
    assert_eq!(chunks.concat(), nodes.snapshot, "the download is the snapshot");

    // Restored only when the tenant's name is typed.
    let path = format!("/tenants/demo/backups/{id}/restore");
    let mistyped = f.submit(&path, &admin, &[("confirm", "dem")]).await;
    assert_eq!(mistyped.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", mistyped.body);
    let error = format!("<p class=\"field-error\" id=\"restore-{id}-confirm-error\">Type demo exactly");
    assert!(mistyped.body.contains(&error), "{}", mistyped.body);
    assert!(mistyped.body.contains(&format!("id=\"backup-{id}-actions\" open>")), "{}", mistyped.body);
    assert_eq!(restoring(&f), None, "nothing was restored");

    // While the node's bootstrap waits, the page shows the restore running.
    let started = f.submit(&path, &admin, &[("confirm", "demo")]).await;
    assert_eq!(location(&started), format!("/tenants/demo/backups?restoring={id}#restoring-condition"));
    let running = f.get(&format!("/tenants/demo/backups?restoring={id}"), Some(&admin)).await;
    for expected in [
        format!("The restore of backup {id} started"),
        "data-status=\"True\" data-reason=\"Restoring\" role=\"status\">Restoring: restoring backup"
            .to_string(),
        format!("id=\"backup-running\" data-work=\"restore\">Backup <code>{id}</code> is being restored"),
        "<td class=\"status\" data-status=\"restoring\">being restored</td>".to_string(),
    ] {
        assert!(running.body.contains(&expected), "{expected}: {}", running.body);
    }
    let again = f.submit(&path, &admin, &[("confirm", "demo")]).await;
    assert_eq!(again.status, StatusCode::CONFLICT, "{}", again.body);
    assert!(again.body.contains("which still runs; nothing new was started"), "{}", again.body);
    let delete = format!("/tenants/demo/backups/{id}/delete");
    let early = f.submit(&delete, &admin, &[("confirm", "demo")]).await;
    assert_eq!(early.status, StatusCode::CONFLICT, "a backup being restored stays: {}", early.body);

    nodes.gate.add_permits(1);
    let done = wait_for(|| restoring(&f).filter(|condition| condition.status == "False")).await;
    assert_eq!(done.reason, "Restored", "{done:?}");
    assert_eq!(*nodes.recovered.lock().expect("lock"), nodes.snapshot, "the node got the snapshot");
    wait_for(|| f.console.running.get("demo").is_none().then_some(())).await;
    let restored = f.get("/tenants/demo/backups", Some(&admin)).await;
    assert!(
        restored.body.contains(&format!("Restored: etcd started from backup {id} on m-1")),
        "{}",
        restored.body
    );
    assert!(!restored.body.contains("id=\"backup-running\""), "{}", restored.body);

    // Deleted only when the tenant's name is typed.
    let mistyped = f.submit(&delete, &admin, &[("confirm", "")]).await;
    assert_eq!(mistyped.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", mistyped.body);
    assert!(file.exists(), "nothing was deleted");
    let deleted = f.submit(&delete, &admin, &[("confirm", "demo")]).await;
    assert_eq!(location(&deleted), format!("/tenants/demo/backups?deleted={id}"));
    assert!(!file.exists(), "the file is gone");
    let page = f.get(&format!("/tenants/demo/backups?deleted={id}"), Some(&admin)).await;
    assert!(page.body.contains(&format!("Backup {id} deleted.")), "{}", page.body);
    assert!(page.body.contains("<p id=\"no-backups\">"), "{}", page.body);
    let gone = f.submit(&delete, &admin, &[("confirm", "demo")]).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND, "{}", gone.body);
}

/// Polls `probe` every few milliseconds for up to five seconds.
async fn wait_for<T>(mut probe: impl FnMut() -> Option<T>) -> T {
    for _ in 0..500 {
        if let Some(value) = probe() {
            return value;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("waited five seconds in vain")
}

#[tokio::test]
async fn viewers_see_the_list_and_editors_take_but_neither_restores_nor_deletes() {
    let nodes = nodes(1);
    let (f, dir) = with_backups(nodes).await;
    let admin = f.sign_in(ADMIN).await;
    let id = take(&f, &admin).await;
    let file = dir.path().join("backups").join("demo").join(format!("{id}.etcd"));

    let viewer = f.sign_in(VIEWER).await;
    let page = f.get("/tenants/demo/backups", Some(&viewer)).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains(&format!("data-backup=\"{id}\"")), "a viewer reads the list: {}", page.body);
    for control in
        ["take-backup", "/download\"", "/restore\"", "/delete\"", "restore-hint", "Restore or delete"]
    {
        assert!(!page.body.contains(control), "a viewer sees no {control}: {}", page.body);
    }
    let editor = f.sso_session("dev@example.com", &["devs"]);
    let page = f.get("/tenants/demo/backups", Some(&editor)).await;
    assert!(page.body.contains("action=\"/tenants/demo/backups/new\""), "an editor may take: {}", page.body);
    for control in ["/download\"", "/restore\"", "/delete\""] {
        assert!(!page.body.contains(control), "an editor sees no {control}: {}", page.body);
    }

    // Forged, with the right form tokens: refused by the permission table.
    for (session, role) in [(&viewer, "view"), (&editor, "edit")] {
        for action in ["restore", "delete"] {
            let path = format!("/tenants/demo/backups/{id}/{action}");
            let forged = f.submit(&path, session, &[("confirm", "demo")]).await;
            assert_eq!(forged.status, StatusCode::FORBIDDEN, "{role} {action}: {}", forged.body);
            assert!(forged.body.contains(&format!("role {role} may not")), "{}", forged.body);
        }
        let download = f.get(&format!("/tenants/demo/backups/{id}/download"), Some(session)).await;
        assert_eq!(download.status, StatusCode::FORBIDDEN, "{role} download: {}", download.body);
    }
    let forged = f.submit("/tenants/demo/backups/new", &viewer, &[]).await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN, "{}", forged.body);
    assert!(file.exists());
    assert_eq!(restoring(&f), None, "nothing was restored");
    let listed = f.console.backups.as_ref().expect("backups").list("demo").await.expect("a list");
    assert_eq!(listed.len(), 1, "the viewer took none: {listed:?}");
    let taken = take(&f, &editor).await;
    assert_ne!(taken, id, "an editor takes one");
}

#[tokio::test]
async fn refusals_show_at_their_form() {
    let (f, dir) = with_backups(nodes(1)).await;
    let admin = f.sign_in(ADMIN).await;
    let id = take(&f, &admin).await;

    // A backup altered in its store is refused before any node hears of it.
    let file = dir.path().join("backups").join("demo").join(format!("{id}.etcd"));
    let mut bytes = std::fs::read(&file).expect("the file");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&file, &bytes).expect("written");
    let refused =
        f.submit(&format!("/tenants/demo/backups/{id}/restore"), &admin, &[("confirm", "demo")]).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.body);
    let error = format!("id=\"restore-{id}-confirm-error\">backup does not verify");
    assert!(refused.body.contains(&error), "{}", refused.body);
    assert_eq!(restoring(&f), None);

    // A tenant without a control plane has nothing to back up.
    f.tenant("empty", json!({}), "active").await;
    let refused = f.submit("/tenants/empty/backups/new", &admin, &[]).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.body);
    let error =
        "id=\"take-backup-error\" role=\"alert\"><p>tenant &quot;empty&quot; has no reachable control plane";
    assert!(refused.body.contains(error), "{}", refused.body);

    for path in ["/tenants/nobody/backups", "/tenants/demo/backups/20000101t000000000z-0000/download"] {
        let missing = f.get(path, Some(&admin)).await;
        assert_eq!(missing.status, StatusCode::NOT_FOUND, "{path}: {}", missing.body);
    }
    let wrong = f.get("/tenants/demo/backups/new", Some(&admin)).await;
    assert_eq!(wrong.status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn a_server_without_backups_says_so() {
    let f = Fixture::new().await;
    f.tenant("demo", json!({}), "active").await;
    let admin = f.sign_in(ADMIN).await;
    let page = f.get("/tenants/demo", Some(&admin)).await;
    assert!(page.body.contains("<p id=\"backups-unavailable\">"), "{}", page.body);
    assert!(!page.body.contains("backups-link"), "{}", page.body);
    let backups = f.get("/tenants/demo/backups", Some(&admin)).await;
    assert_eq!(backups.status, StatusCode::SERVICE_UNAVAILABLE, "{}", backups.body);
}

#[tokio::test]
async fn a_schedule_and_its_outcomes_are_shown() {
    let f = Fixture::new().await;
    let draft = Draft {
        spec: json!({"kubernetesVersion": "1.31.0", "backups": {"schedule": "0 3 * * *", "retain": 7}}),
        status: Some(json!({"phase": "active", "backups": {
            "nextRun": "2026-11-26T03:00:00Z",
            "lastFailure": {"time": "2026-11-24T03:00:02Z", "reason": "no control plane: <b>"}}})),
        ..Draft::default()
    };
    f.store.create(Key::tenant("scheduled"), draft).await.expect("created");
    let admin = f.sign_in(ADMIN).await;
    let page = f.get("/tenants/scheduled", Some(&admin)).await;
    for expected in [
        "<dd id=\"backup-schedule\"><code>0 3 * * *</code> (UTC), keeping the newest 7</dd>",
        "<dd id=\"backup-next-run\"><time datetime=\"2026-11-26T03:00:00+00:00\">2026-11-26 03:00:00 UTC</time></dd>",
        "no control plane: &lt;b&gt;</dd>",
        "<dd id=\"backup-last-success\">none recorded</dd>",
    ] {
        assert!(page.body.contains(expected), "{expected}: {}", page.body);
    }
}

//! Taking a backup over a real SQLite store, a directory store and a
//! mocked node whose snapshot is held on a gate: which control plane is
//! snapshotted (a follower before the leader), and one backup or restore
//! of a tenant at a time.

use std::collections::HashMap;
use std::sync::Arc;

use cms_backup::{BackupError, Backups, DirStore};
use cms_model::{BackupsStatus, Kind, Tenant};
use cms_store::{Draft, Key, SqlStore, Store, StoreOptions};
use cms_talos::{Sealer, SealingKey};
use cms_tenancy::{EtcdMemberStatus, MockNodeClient, NodeError, Secrets, SecretsOptions, SnapshotChunks};
use serde_json::json;
use tokio::sync::{mpsc, watch};

/// How a control plane's etcd member answers `EtcdStatus`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Member {
    Leader,
    Follower,
    /// Answers with an alarm.
    Alarmed,
    /// Does not answer.
    Unreachable,
}

/// A tenant `acme` with control planes named and answering as given, its
/// backups in a directory; each snapshot waits for [`World::open`].
pub(crate) struct World {
    pub(crate) store: Arc<SqlStore>,
    pub(crate) backups: Backups,
    /// The machine of each snapshot started, in order.
    pub(crate) started: mpsc::UnboundedReceiver<String>,
    gate: watch::Sender<bool>,
    _dir: tempfile::TempDir,
}

impl World {
    pub(crate) async fn new(members: &[(&str, Member)], backups: serde_json::Value) -> World {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("cms.db").display());
        let store = SqlStore::open(&StoreOptions::new(url)).await.unwrap();
        let spec = json!({
            "kubernetesVersion": "1.31.0",
            "nodeGroups": [{"name": "cp", "role": "controlplane", "count": members.len(),
                            "providerClass": "metal:m", "providerConfig": {"hosts": []}}],
            "backups": backups,
        });
        store.create(Key::tenant("acme"), Draft { spec, ..Draft::default() }).await.unwrap();
        for (index, (machine, _)) in members.iter().enumerate() {
            let spec = json!({"managementAddress": format!("10.0.0.{}", index + 1), "nodeGroup": "cp"});
            let key = Key::child(Kind::Machine, "acme", *machine);
            store.create(key, Draft { spec, ..Draft::default() }).await.unwrap();
        }
        let sealer = Sealer::new(SealingKey::generate("k1").unwrap());
        let secrets =
            Secrets::new(sealer, SecretsOptions { key_pool: 0, ..SecretsOptions::default() }).unwrap();
        let objects = Arc::new(DirStore::new(dir.path().join("backups")));
        let (gate, open) = watch::channel(false);
        let (started_tx, started) = mpsc::unbounded_channel();
        let members: HashMap<String, Member> =
            members.iter().map(|(machine, member)| (machine.to_string(), *member)).collect();
        let nodes = node(members, open, started_tx);
        let backups = Backups::new(store.clone(), Arc::new(nodes), secrets, objects);
        World { store, backups, started, gate, _dir: dir }
    }

    /// Lets every snapshot, held or to come, stream.
    pub(crate) fn open(&self) {
        self.gate.send_replace(true);
    }

    pub(crate) fn status(&self) -> BackupsStatus {
        let tenant: Tenant = self.store.get(&Key::tenant("acme")).unwrap().parse().unwrap();
        tenant.status.backups.unwrap_or_default()
    }
}

/// The snapshot every node streams, in two chunks.
fn snapshot() -> Vec<Vec<u8>> {
    vec![vec![1u8; 1000], vec![2u8; 24]]
}

/// A node client whose members answer as `members` says (member 1 leads);
/// each snapshot is announced on `started` and streams once `open` is true.
fn node(
    members: HashMap<String, Member>,
    open: watch::Receiver<bool>,
    started: mpsc::UnboundedSender<String>,
) -> MockNodeClient {
    let mut node = MockNodeClient::new();
    node.expect_etcd_status().returning(move |node| {
        let member = members[&node.machine];
        let member_id = match member {
            Member::Leader => 1,
            Member::Unreachable => return Err(NodeError::Unsupported("EtcdStatus")),
            _ => 2,
        };
        let errors = if matches!(member, Member::Alarmed) { vec!["NOSPACE".into()] } else { vec![] };
        Ok(EtcdMemberStatus {
            member_id,
            leader: 1,
            protocol_version: "3.5.0".into(),
            db_size: 0,
            raft_index: 1,
            raft_term: 1,
            errors,
            is_learner: false,
        })
    });
    node.expect_version().returning(|_| Ok("1.14.0".into()));
    node.expect_etcd_snapshot().returning(move |node| {
        let _ = started.send(node.machine.clone());
        let mut open = open.clone();
        let chunks: SnapshotChunks = Box::pin(async_stream::stream! {
            let _ = open.wait_for(|open| *open).await;
            for chunk in snapshot() {
                yield Ok::<_, NodeError>(chunk);
            }
        });
        Ok(chunks)
    });
    node
}

#[tokio::test]
async fn a_follower_is_snapshotted_rather_than_the_leader() {
    // By name, the leader is asked first and the alarmed member next.
    let members = [("cp-0", Member::Leader), ("cp-1", Member::Alarmed), ("cp-2", Member::Follower)];
    let mut world = World::new(&members, serde_json::Value::Null).await;
    world.open();
    let backup = world.backups.take("acme").await.unwrap();
    assert_eq!(backup.machine, "cp-2", "the healthy follower is snapshotted");
    assert_eq!(world.started.recv().await.as_deref(), Some("cp-2"));
    assert!(world.started.try_recv().is_err(), "one snapshot only");
}

#[tokio::test]
async fn the_leader_is_snapshotted_only_when_no_follower_answers() {
    let members = [("cp-0", Member::Alarmed), ("cp-1", Member::Leader), ("cp-2", Member::Unreachable)];
    let mut world = World::new(&members, serde_json::Value::Null).await;
    world.open();
    let backup = world.backups.take("acme").await.unwrap();
    assert_eq!(backup.machine, "cp-1");
    assert_eq!(world.started.recv().await.as_deref(), Some("cp-1"));
}

#[tokio::test]
async fn a_second_backup_or_a_restore_while_one_runs_is_refused_as_busy() {
    let mut world = World::new(&[("cp-0", Member::Follower)], serde_json::Value::Null).await;
    let backups = world.backups.clone();
    let first = tokio::spawn(async move { backups.take("acme").await });
    // The first backup is under way: its snapshot is held on the gate.
    assert_eq!(world.started.recv().await.as_deref(), Some("cp-0"));

    let backups = world.backups.clone();
    let mut second = tokio::spawn(async move { backups.take("acme").await });
    // A second that waited for the first, instead of being refused, would
    // wait for ever: the first is held until this one answered.
    let waited = tokio::time::sleep(std::time::Duration::from_secs(30));
    tokio::select! {
        () = waited => panic!("the second backup waited for the first instead of being refused"),
        result = &mut second => {
            let result = result.unwrap();
            assert!(matches!(&result, Err(BackupError::Busy(tenant)) if tenant == "acme"), "{result:?}");
        }
        machine = world.started.recv() => panic!("a second snapshot (of {machine:?}) started while one ran"),
    }
    let restore = world.backups.restore("acme", "20261125t074211123z-0000").await;
    assert!(matches!(&restore, Err(BackupError::Busy(tenant)) if tenant == "acme"), "{restore:?}");
    // A backup refused because another runs is not recorded as a failure.
    assert_eq!(world.status().last_failure, None);

    world.open();
    let taken = first.await.unwrap().unwrap();
    assert_eq!(world.status().last_success.map(|success| success.id), Some(taken.id.clone()));
    // Once it is done, the tenant is backed up again.
    let again = world.backups.take("acme").await.unwrap();
    assert_ne!(again.id, taken.id);
}

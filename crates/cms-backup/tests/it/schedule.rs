//! The scheduler over a real SQLite store, a directory store and a mocked
//! node: `nextRun` follows the schedule, each scheduled time is claimed
//! and taken once however many schedulers look, old backups are pruned,
//! and failures are recorded in the tenant's status.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use cms_backup::{Backups, DirStore, Scheduler, SchedulerOptions};
use cms_model::{BackupsStatus, Kind, Tenant};
use cms_store::{Draft, Key, SqlStore, Store, StoreOptions};
use cms_talos::{Sealer, SealingKey};
use cms_tenancy::{EtcdMemberStatus, MockNodeClient, NodeError, Secrets, SecretsOptions};
use serde_json::json;

/// The snapshot the mocked node streams, in three chunks.
fn snapshot() -> Vec<Vec<u8>> {
    vec![vec![1u8; 1000], vec![2u8; 1000], vec![3u8; 10]]
}

fn at(text: &str) -> DateTime<Utc> {
    text.parse().unwrap()
}

struct World {
    store: Arc<SqlStore>,
    backups: Backups,
    _dir: tempfile::TempDir,
}

impl World {
    /// A tenant `acme` with one control plane and `backups` as its schedule,
    /// whose node answers as `healthy` says.
    async fn new(backups: serde_json::Value, healthy: bool) -> World {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("cms.db").display());
        let store = SqlStore::open(&StoreOptions::new(url)).await.unwrap();
        let spec = json!({
            "kubernetesVersion": "1.31.0",
            "nodeGroups": [{"name": "cp", "role": "controlplane", "count": 1, "providerClass": "metal:m",
                            "providerConfig": {"hosts": [{"address": "10.0.0.1"}]}}],
            "backups": backups,
        });
        store.create(Key::tenant("acme"), Draft { spec, ..Draft::default() }).await.unwrap();
        let machine = json!({"managementAddress": "10.0.0.1", "nodeGroup": "cp"});
        store
            .create(Key::child(Kind::Machine, "acme", "cp-0"), Draft { spec: machine, ..Draft::default() })
            .await
            .unwrap();
        let sealer = Sealer::new(SealingKey::generate("k1").unwrap());
        let secrets =
            Secrets::new(sealer, SecretsOptions { key_pool: 0, ..SecretsOptions::default() }).unwrap();
        let objects = Arc::new(DirStore::new(dir.path().join("backups")));
        let backups = Backups::new(store.clone(), Arc::new(node(healthy)), secrets, objects);
        World { store, backups, _dir: dir }
    }

    fn scheduler(&self) -> Scheduler {
        let options = SchedulerOptions { tick: std::time::Duration::from_secs(1), lease: None, audit: None };
        Scheduler::new(self.backups.clone(), options)
    }

    fn status(&self) -> BackupsStatus {
        let tenant: Tenant = self.store.get(&Key::tenant("acme")).unwrap().parse().unwrap();
        tenant.status.backups.unwrap_or_default()
    }

    async fn set_schedule(&self, backups: serde_json::Value) {
        let object = self.store.get(&Key::tenant("acme")).unwrap();
        let mut spec = object.parse::<Tenant>().unwrap().spec;
        spec.node_groups = None;
        let mut spec = serde_json::to_value(spec).unwrap();
        spec["backups"] = backups;
        let draft = Draft { spec, ..Draft::default() };
        self.store.update(Key::tenant("acme"), draft, object.resource_version).await.unwrap();
    }
}

/// A node that follows a leader and streams [`snapshot`], or one whose
/// etcd reports an alarm.
fn node(healthy: bool) -> MockNodeClient {
    let mut node = MockNodeClient::new();
    node.expect_etcd_status().returning(move |_| {
        Ok(EtcdMemberStatus {
            member_id: 1,
            leader: 2,
            protocol_version: "3.5.0".into(),
            db_size: 0,
            raft_index: 1,
            raft_term: 1,
            errors: if healthy { vec![] } else { vec!["NOSPACE".into()] },
            is_learner: false,
        })
    });
    node.expect_version().returning(|_| Ok("1.14.0".into()));
    node.expect_etcd_snapshot().returning(|_| {
        let chunks = snapshot().into_iter().map(Ok::<_, NodeError>);
        Ok(Box::pin(futures_util::stream::iter(chunks)))
    });
    node
}

#[tokio::test]
async fn next_run_follows_the_schedule_and_goes_with_it() {
    let world = World::new(json!({"schedule": "0 * * * *", "retain": 3}), true).await;
    let scheduler = world.scheduler();
    let sweep = scheduler.sweep(world.store.as_ref(), at("2026-11-25T10:20:00Z")).await;
    assert!(sweep.taken.is_empty() && sweep.failed.is_empty());
    assert_eq!(world.status().next_run, Some(at("2026-11-25T11:00:00Z")));
    assert_eq!(world.status().last_scheduled, None);

    world.set_schedule(json!({"schedule": "30 * * * *", "retain": 3})).await;
    scheduler.sweep(world.store.as_ref(), at("2026-11-25T10:21:00Z")).await;
    assert_eq!(world.status().next_run, Some(at("2026-11-25T10:30:00Z")));

    world.set_schedule(serde_json::Value::Null).await;
    scheduler.sweep(world.store.as_ref(), at("2026-11-25T10:22:00Z")).await;
    let tenant: Tenant = world.store.get(&Key::tenant("acme")).unwrap().parse().unwrap();
    assert_eq!(tenant.status.backups, None);
    assert!(world.backups.list("acme").await.unwrap().is_empty());
}

#[tokio::test]
async fn a_scheduled_time_is_taken_once_however_many_schedulers_look() {
    let world = World::new(json!({"schedule": "0 * * * *", "retain": 3}), true).await;
    let (first, second) = (world.scheduler(), world.scheduler());
    first.sweep(world.store.as_ref(), at("2026-11-25T10:20:00Z")).await;

    let now = at("2026-11-25T11:00:05Z");
    let (a, b) =
        tokio::join!(first.sweep(world.store.as_ref(), now), second.sweep(world.store.as_ref(), now));
    let taken: Vec<_> = a.taken.iter().chain(&b.taken).collect();
    assert_eq!(taken, ["acme"], "{a:?} {b:?}");
    assert!(a.failed.is_empty() && b.failed.is_empty());

    let status = world.status();
    assert_eq!(status.last_scheduled, Some(at("2026-11-25T11:00:00Z")));
    assert_eq!(status.next_run, Some(at("2026-11-25T12:00:00Z")));
    let backups = world.backups.list("acme").await.unwrap();
    assert_eq!(backups.len(), 1);
    let success = status.last_success.expect("a success is recorded");
    assert_eq!((success.id.as_str(), success.size), (backups[0].id.as_str(), 2010));
    assert_eq!(backups[0].machine, "cp-0");

    // Looking again within the hour takes nothing more.
    let again = first.sweep(world.store.as_ref(), at("2026-11-25T11:30:00Z")).await;
    assert!(again.taken.is_empty());
    assert_eq!(world.backups.list("acme").await.unwrap().len(), 1);
}

#[tokio::test]
async fn retain_keeps_the_newest_backups() {
    let world = World::new(json!({"schedule": "0 * * * *", "retain": 2}), true).await;
    let scheduler = world.scheduler();
    scheduler.sweep(world.store.as_ref(), at("2026-11-25T10:20:00Z")).await;
    let mut ids = Vec::new();
    for hour in 11..=14 {
        let sweep = scheduler.sweep(world.store.as_ref(), at(&format!("2026-11-25T{hour}:00:01Z"))).await;
        assert_eq!(sweep.taken, ["acme"]);
        ids.push(world.status().last_success.unwrap().id);
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let kept: Vec<String> = world.backups.list("acme").await.unwrap().into_iter().map(|b| b.id).collect();
    assert_eq!(kept, ids[2..], "the two newest stay");
}

#[tokio::test]
async fn a_missed_time_gives_one_backup_then_the_schedule_resumes() {
    let world = World::new(json!({"schedule": "0 * * * *", "retain": 5}), true).await;
    let scheduler = world.scheduler();
    scheduler.sweep(world.store.as_ref(), at("2026-11-25T10:20:00Z")).await;
    // Down for three hours.
    let sweep = scheduler.sweep(world.store.as_ref(), at("2026-11-25T13:10:00Z")).await;
    assert_eq!(sweep.taken, ["acme"]);
    assert_eq!(world.status().next_run, Some(at("2026-11-25T14:00:00Z")));
    let sweep = scheduler.sweep(world.store.as_ref(), at("2026-11-25T13:11:00Z")).await;
    assert!(sweep.taken.is_empty());
    assert_eq!(world.backups.list("acme").await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_failed_backup_is_recorded_with_its_reason_and_the_schedule_goes_on() {
    let world = World::new(json!({"schedule": "0 * * * *", "retain": 2}), false).await;
    let scheduler = world.scheduler();
    scheduler.sweep(world.store.as_ref(), at("2026-11-25T10:20:00Z")).await;
    let sweep = scheduler.sweep(world.store.as_ref(), at("2026-11-25T11:00:01Z")).await;
    assert_eq!(sweep.failed, ["acme"]);
    let status = world.status();
    let failure = status.last_failure.expect("a failure is recorded");
    assert!(failure.reason.contains("NOSPACE"), "{}", failure.reason);
    assert_eq!(status.last_success, None);
    assert_eq!(status.next_run, Some(at("2026-11-25T12:00:00Z")));
    assert!(world.backups.list("acme").await.unwrap().is_empty());
}

//! The scheduler's lease on several replicas, through a mocked `Leases`:
//! it is renewed while a long scheduled backup runs, and released at
//! shutdown.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use cms_backup::{SCHEDULER_LEASE, Scheduler, SchedulerLease, SchedulerOptions};
use cms_store::{Lease, MockLeases, Store};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::take::{Member, World};

const TTL: Duration = Duration::from_secs(30);

/// Leases that always give `replica-a` the scheduler's lease; each renewal
/// is sent on `renewed` as (the lease handed in, the lease given back), and
/// released leases kept in `released`.
fn leases(
    store: Arc<dyn Store>,
    renewed: mpsc::UnboundedSender<(Lease, Lease)>,
    released: Arc<Mutex<Vec<Lease>>>,
) -> MockLeases {
    let mut leases = MockLeases::new();
    leases.expect_acquire_lease().returning(|name, holder, _| {
        assert_eq!(name, SCHEDULER_LEASE);
        Ok(Some(Lease { name, holder, epoch: 1, expires_at: Utc::now() }))
    });
    leases.expect_renew_lease().returning(move |lease, ttl| {
        let next = Lease {
            expires_at: lease.expires_at + chrono::Duration::from_std(ttl).unwrap(),
            ..lease.clone()
        };
        let _ = renewed.send((lease, next.clone()));
        Ok(next)
    });
    leases.expect_fenced().returning(move |_| store.clone());
    leases.expect_release_lease().returning(move |lease| {
        released.lock().unwrap().push(lease);
        Ok(())
    });
    leases
}

#[tokio::test]
async fn the_scheduler_renews_its_lease_while_a_long_backup_runs() {
    let mut world =
        World::new(&[("cp-0", Member::Follower)], json!({"schedule": "0 * * * *", "retain": 3})).await;
    // A scheduled time that has come: `nextRun` as a sweep two hours ago set it.
    let unleased = SchedulerOptions { tick: Duration::from_secs(1), lease: None, audit: None };
    Scheduler::new(world.backups.clone(), unleased)
        .sweep(world.store.as_ref(), Utc::now() - chrono::Duration::hours(2))
        .await;
    let slot = world.status().next_run.expect("a next run");
    assert!(slot <= Utc::now());

    let (renewed_tx, mut renewed) = mpsc::unbounded_channel();
    let released = Arc::new(Mutex::new(Vec::new()));
    let leases = leases(world.store.clone(), renewed_tx, released.clone());
    let lease = SchedulerLease { leases: Arc::new(leases), holder: "replica-a".into(), ttl: TTL };
    let options = SchedulerOptions { tick: Duration::from_millis(10), lease: Some(lease), audit: None };
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(Scheduler::new(world.backups.clone(), options).run(shutdown.clone()));

    // The scheduled backup is under way, its snapshot held on the gate.
    assert_eq!(world.started.recv().await.as_deref(), Some("cp-0"));
    assert_eq!(world.status().last_scheduled, Some(slot), "the time was claimed");
    // On the test clock, which moves only while every task waits: within
    // two times to live of the backup running, the lease is renewed three
    // times, each renewal carrying the lease the last one gave.
    tokio::time::pause();
    let deadline = tokio::time::sleep(TTL * 2);
    tokio::pin!(deadline);
    let mut chain: Vec<(Lease, Lease)> = Vec::new();
    while chain.len() < 3 {
        tokio::select! {
            renewal = renewed.recv() => chain.push(renewal.expect("the leases live")),
            () = &mut deadline => panic!("{} renewals of the lease in {:?} while a backup ran", chain.len(), TTL * 2),
        }
    }
    for pair in chain.windows(2) {
        assert_eq!(pair[1].0, pair[0].1, "each renewal hands in the lease the last one gave");
    }
    assert!(!run.is_finished());
    assert_eq!(world.status().last_success, None, "the backup is still held");
    tokio::time::resume();

    world.open();
    shutdown.cancel();
    run.await.unwrap();
    let success = world.status().last_success.expect("the scheduled backup finished");
    assert_eq!(world.backups.list("acme").await.unwrap()[0].id, success.id);
    // At shutdown the lease last renewed is given up.
    let last = last_given(&mut renewed).or(chain.last().map(|(_, given)| given.clone()));
    assert_eq!(released.lock().unwrap().as_slice(), [last.unwrap()]);
}

/// The lease the last renewal not yet received gave, if any.
fn last_given(renewed: &mut mpsc::UnboundedReceiver<(Lease, Lease)>) -> Option<Lease> {
    let mut last = None;
    while let Ok((_, given)) = renewed.try_recv() {
        last = Some(given);
    }
    last
}

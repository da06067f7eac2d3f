//! Conformance cases for writers of one tenant's status that own different
//! fields ([`crate::update_tenant_status`]).

use chrono::{DateTime, TimeDelta, Utc};
use cms_model::{BackupsStatus, Condition, TenantStatus};

use super::{open, tenant_draft};
use crate::api::{Key, Store};
use crate::error::StoreError;
use crate::update_tenant_status;

/// How many changes each writer makes.
const ROUNDS: u64 = 60;

fn at(round: u64) -> DateTime<Utc> {
    DateTime::<Utc>::UNIX_EPOCH + TimeDelta::seconds(round as i64)
}

/// The reconciler's share: `observedGeneration` counts its writes.
fn reconciler_change(status: &mut TenantStatus) {
    status.observed_generation += 1;
    status.message = Some(format!("reconciled {} times", status.observed_generation));
}

/// How many writes the backup scheduler's fields count.
fn backups_count(status: &TenantStatus) -> u64 {
    let seconds = status.backups.as_ref().and_then(|b| b.next_run).map(|t| t.timestamp());
    seconds.unwrap_or_default() as u64
}

/// The backup scheduler's share: `backups.nextRun` (seconds since the
/// epoch) counts its writes, and the `Restoring` condition says the same.
fn scheduler_change(status: &mut TenantStatus) {
    let count = backups_count(status) + 1;
    let backups = status.backups.get_or_insert_with(BackupsStatus::default);
    backups.next_run = Some(at(count));
    status.conditions.retain(|condition| condition.kind != "Restoring");
    status.conditions.push(Condition {
        kind: "Restoring".into(),
        status: "True".into(),
        reason: "Requested".into(),
        message: format!("restore {count}"),
        last_transition_time: at(count),
    });
}

/// Two writers of one tenant's status, each counting its own writes in its
/// own fields, race for many rounds: each counter ends at the number of
/// that writer's writes, so no write of one ever dropped the other's fields.
pub async fn concurrent_status_writers_keep_each_others_fields(url: &str) {
    let store = open(url).await;
    let key = Key::tenant("a");
    store.create(key.clone(), tenant_draft("1.31.0", None)).await.expect("create");
    let writer = |change: fn(&mut TenantStatus)| {
        let store = store.clone();
        tokio::spawn(async move {
            let mut written = 0;
            for _ in 0..ROUNDS {
                match update_tenant_status(store.as_ref(), "a", change).await {
                    Ok(true) => written += 1,
                    // Ten reads in a row each overtaken by the other writer.
                    Err(StoreError::Conflict { .. }) => {}
                    other => panic!("unexpected {other:?}"),
                }
            }
            written
        })
    };
    let (reconciler, scheduler) = (writer(reconciler_change), writer(scheduler_change));
    let (reconciled, scheduled) = (reconciler.await.expect("task"), scheduler.await.expect("task"));
    assert!(reconciled > 0 && scheduled > 0, "both wrote: {reconciled}, {scheduled}");

    let object = store.get(&key).expect("tenant");
    assert_eq!(object.resource_version, 1 + reconciled + scheduled, "one version per write");
    let status: TenantStatus = object.parse::<cms_model::Tenant>().expect("tenant").status;
    assert_eq!(status.observed_generation, reconciled, "the reconciler's fields: {status:?}");
    assert_eq!(status.message, Some(format!("reconciled {reconciled} times")));
    assert_eq!(backups_count(&status), scheduled, "the scheduler's fields: {status:?}");
    let restoring: Vec<_> = status.conditions.iter().filter(|c| c.kind == "Restoring").collect();
    assert_eq!(restoring.len(), 1, "{status:?}");
    assert_eq!(restoring[0].message, format!("restore {scheduled}"));
    let fresh = open(url).await;
    assert_eq!(fresh.get(&key), store.get(&key), "as cached and as stored");
}

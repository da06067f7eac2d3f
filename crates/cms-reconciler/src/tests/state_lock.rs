//! The tool's state lock: recorded while a run holds it, and a gone
//! holder's lock released past the bound or on request, with the database's
//! sessions and the audit log as mocks.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::Utc;
use cms_model::{AuditEntry, RELEASE_STATE_LOCK_ANNOTATION};
use cms_store::{Key, LockSession, MockAudit, MockStateLocks, Store};
use serde_json::json;

use super::{create, fixture, tenant, unreachable};
use crate::reconcile::LEAVE_POLL;
use crate::state_lock::{STATE_LOCK_ACTOR, StateLockOptions};
use crate::{Action, reconcile, rollout};

const ME: &str = "here/7/me";
const GONE: &str = "there/1/gone";

/// The database: a session of the gone holder holds the lock until ended.
fn sessions(held: Arc<AtomicBool>, ends: usize) -> MockStateLocks {
    let mut locks = MockStateLocks::new();
    let listed = held.clone();
    locks.expect_state_lock_sessions().returning(move |prefix| {
        let name = format!("{prefix}1/gone");
        Ok(match listed.load(Ordering::SeqCst) {
            true => vec![LockSession { pid: 42, application_name: name, since: None }],
            false => Vec::new(),
        })
    });
    locks.expect_end_state_lock_sessions().times(ends).returning(move |prefix, except| {
        assert_eq!(prefix, cms_tofu::application_prefix("acme"));
        assert_eq!(except, cms_tofu::application_name("acme", ME), "this replica's own sessions stay");
        held.store(false, Ordering::SeqCst);
        Ok(1)
    });
    locks
}

fn audit(records: usize) -> (MockAudit, Arc<std::sync::Mutex<Vec<AuditEntry>>>) {
    let kept = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut audit = MockAudit::new();
    let into = kept.clone();
    audit.expect_record().times(records).returning(move |entry| {
        into.lock().unwrap().push(entry);
        Ok(1)
    });
    (audit, kept)
}

fn options(locks: MockStateLocks, audit: MockAudit, stale_after: Duration) -> Option<StateLockOptions> {
    Some(StateLockOptions {
        locks: Arc::new(locks),
        audit: Some(Arc::new(audit)),
        holder: ME.into(),
        stale_after,
    })
}

async fn hold(store: &dyn Store, holder: &str, age: Duration) {
    let since = Utc::now() - chrono::Duration::from_std(age).unwrap();
    let status = json!({"stateLock": {"holder": holder, "operation": "apply", "since": since}});
    store.update_status(Key::tenant("acme"), status, None).await.unwrap();
}

fn applies(f: &super::Fixture) -> usize {
    f.engine.args.lock().unwrap().iter().filter(|args| args[0] == "apply").count()
}

#[tokio::test]
async fn a_run_is_recorded_as_it_starts_and_cleared_as_it_ends_failed_or_not() {
    let mut f = fixture(unreachable()).await;
    let (audit, _) = audit(0);
    f.ctx.state_lock = options(sessions(Arc::default(), 0), audit, Duration::from_secs(60));
    create(f.store.as_ref(), "acme", 1).await;
    f.engine.fail_apply.store(true, Ordering::SeqCst);
    assert!(reconcile("acme", &f.ctx).await.is_err());
    assert_eq!(applies(&f), 1);
    assert_eq!(tenant(f.store.as_ref(), "acme").status.state_lock, None, "cleared after a failed run");
    f.engine.fail_apply.store(false, Ordering::SeqCst);
    reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(applies(&f), 2);
    assert_eq!(tenant(f.store.as_ref(), "acme").status.state_lock, None, "cleared after a good run");
}

#[tokio::test]
async fn a_gone_holders_lock_is_shown_until_the_bound_then_released_with_an_audit_record() {
    let mut f = fixture(unreachable()).await;
    let held = Arc::new(AtomicBool::new(true));
    let (audit, records) = audit(1);
    f.ctx.state_lock = options(sessions(held.clone(), 1), audit, Duration::from_secs(3600));
    create(f.store.as_ref(), "acme", 1).await;
    hold(f.store.as_ref(), GONE, Duration::from_secs(60)).await;

    // Within the bound: no run, the lock and its holder shown.
    match reconcile("acme", &f.ctx).await.unwrap() {
        Action::Requeue(after) => assert!(after <= LEAVE_POLL, "{after:?}"),
        other => panic!("the tenant waits: {other:?}"),
    }
    assert_eq!(applies(&f), 0);
    let status = tenant(f.store.as_ref(), "acme").status;
    assert_eq!(status.state_lock.as_ref().unwrap().holder, GONE);
    let message = status.message.unwrap();
    assert!(
        message.starts_with(&format!("waiting for the tool's state lock, held by {GONE} (apply) since")),
        "{message}"
    );
    assert!(held.load(Ordering::SeqCst));

    // Past it: the session ended, the record cleared, the release audited,
    // and the pass applies.
    hold(f.store.as_ref(), GONE, Duration::from_secs(7200)).await;
    reconcile("acme", &f.ctx).await.unwrap();
    assert!(!held.load(Ordering::SeqCst), "the session was ended");
    assert_eq!(applies(&f), 1);
    assert_eq!(tenant(f.store.as_ref(), "acme").status.state_lock, None);
    let records = records.lock().unwrap();
    let record = &records[0];
    assert_eq!(record.actor, STATE_LOCK_ACTOR);
    assert_eq!(record.actor_subject.as_deref(), Some(ME));
    assert_eq!(record.path, "/api/v1/tenants/acme/state-lock");
    let target = record.target.as_ref().unwrap();
    assert_eq!((target.kind.as_str(), target.tenant.as_deref()), ("StateLock", Some("acme")));
    assert!(target.name.as_deref().unwrap().starts_with(&format!("{GONE} since ")), "{target:?}");
}

#[tokio::test]
async fn an_administrators_request_releases_at_once_and_goes() {
    let mut f = fixture(unreachable()).await;
    let (audit, _) = audit(1);
    f.ctx.state_lock = options(sessions(Arc::default(), 0), audit, Duration::from_secs(3600));
    create(f.store.as_ref(), "acme", 1).await;
    hold(f.store.as_ref(), GONE, Duration::ZERO).await;
    rollout::set_annotation(&f.ctx, "acme", RELEASE_STATE_LOCK_ANNOTATION, Some("force".into()))
        .await
        .unwrap();
    reconcile("acme", &f.ctx).await.unwrap();
    let after = tenant(f.store.as_ref(), "acme");
    assert_eq!(after.status.state_lock, None);
    assert!(!after.metadata.annotations.contains_key(RELEASE_STATE_LOCK_ANNOTATION));
    assert_eq!(applies(&f), 1);
}

#[tokio::test]
async fn this_replicas_own_leftover_record_is_cleared_without_an_audit_record() {
    let mut f = fixture(unreachable()).await;
    let (audit, _) = audit(0);
    f.ctx.state_lock = options(sessions(Arc::default(), 0), audit, Duration::from_secs(3600));
    create(f.store.as_ref(), "acme", 1).await;
    hold(f.store.as_ref(), ME, Duration::ZERO).await;
    reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(tenant(f.store.as_ref(), "acme").status.state_lock, None);
    assert_eq!(applies(&f), 1);
}

#[tokio::test]
async fn a_gone_holders_record_that_nothing_holds_goes_at_once() {
    let mut f = fixture(unreachable()).await;
    let (audit, records) = audit(1);
    f.ctx.state_lock = options(sessions(Arc::default(), 0), audit, Duration::from_secs(3600));
    create(f.store.as_ref(), "acme", 1).await;
    hold(f.store.as_ref(), GONE, Duration::ZERO).await;
    reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(tenant(f.store.as_ref(), "acme").status.state_lock, None);
    assert_eq!(applies(&f), 1);
    assert_eq!(records.lock().unwrap()[0].actor, STATE_LOCK_ACTOR);
}

#[tokio::test]
async fn a_dead_runs_local_lock_file_is_removed_and_the_apply_goes_on() {
    let mut f = fixture(unreachable()).await;
    let (audit, records) = audit(1);
    f.ctx.state_lock = options(sessions(Arc::default(), 0), audit, Duration::from_secs(3600));
    create(f.store.as_ref(), "acme", 1).await;
    let dir = f.ctx.tofu.workspace_dir("acme");
    std::fs::create_dir_all(&dir).unwrap();
    let info =
        r#"{"ID":"8f0e","Operation":"OperationTypeApply","Who":"cms@gone","Created":"2026-01-01T00:00:00Z"}"#;
    std::fs::write(dir.join(cms_tofu::LOCK_INFO_FILE), info).unwrap();
    reconcile("acme", &f.ctx).await.unwrap();
    assert!(!dir.join(cms_tofu::LOCK_INFO_FILE).exists());
    assert!(f.engine.args.lock().unwrap().iter().all(|args| args[0] != "force-unlock"), "no process held it");
    assert_eq!(applies(&f), 1);
    let target = records.lock().unwrap()[0].target.clone().unwrap();
    assert!(target.name.unwrap().starts_with("cms@gone since 2026-01-01T00:00:00Z"));
}

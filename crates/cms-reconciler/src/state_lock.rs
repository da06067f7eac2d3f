//! The tool's state lock, seen and released (`docs/provisioning.md`, State
//! locks).
//!
//! Each run of the tool is recorded in the tenant's `status.stateLock`
//! (holder, operation, since) as it starts and cleared as it ends, so that
//! the lock of a replica that died with it stays visible. As a replica
//! takes up a tenant ([`take_up`], before anything else), it looks for a
//! lock held by another: that record, a database session of the tenant's
//! `pg` backend named after another replica, or the engine's local lock
//! file. Holding the tenant now, this replica knows that holder is gone:
//! its lease lapsed, or (one server on SQLite) its process ended. While the
//! engine still holds the lock (a session, a live process with the local
//! state locked: a run that outlived its replica, a connection the database
//! has not yet seen die), the tenant waits, its message naming the holder,
//! until the lock is held past [`StateLockOptions::stale_after`] or an
//! administrator asks ([`RELEASE_ANNOTATION`]); a lock only the record (or a
//! dead run's lock file) still shows goes at once. The release: the
//! sessions ended, or `force-unlock`; the record cleared; an audit record.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use cms_model::{AuditEntry, AuditOutcome, AuditTarget, StateLock, Tenant};
use cms_store::{Audit, StateLocks};

use crate::reconcile::{Context, LEAVE_POLL};
use crate::status;
use crate::{Action, ReconcileError, blocker, rollout};

/// The tenant annotation by which an administrator asks for its state lock
/// to be released: `stale` (its holder is gone) or `force`.
pub const RELEASE_ANNOTATION: &str = cms_model::RELEASE_STATE_LOCK_ANNOTATION;

/// How long a release waits for the sessions it ended to go, in polls.
const SESSION_END_POLLS: u32 = 25;
const SESSION_END_POLL: Duration = Duration::from_millis(200);

/// The actor of the audit records of releases.
pub const STATE_LOCK_ACTOR: &str = "system:state-lock";

/// Seeing and releasing state locks.
#[derive(Clone)]
pub struct StateLockOptions {
    /// The database sessions holding locks, and lease holders.
    pub locks: Arc<dyn StateLocks>,
    /// Where releases are recorded.
    pub audit: Option<Arc<dyn Audit>>,
    /// This replica, as lease holders are named.
    pub holder: String,
    /// How long a lock of a holder that is gone is left alone.
    pub stale_after: Duration,
}

impl std::fmt::Debug for StateLockOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateLockOptions")
            .field("holder", &self.holder)
            .field("stale_after", &self.stale_after)
            .finish()
    }
}

/// The record of a run of `operation` by this replica, starting now.
pub(crate) fn record(ctx: &Context, operation: &str) -> Option<StateLock> {
    let options = ctx.state_lock.as_ref()?;
    Some(StateLock { holder: options.holder.clone(), operation: operation.to_string(), since: Utc::now() })
}

/// Clears this replica's record once its run ended.
pub(crate) async fn clear(ctx: &Context, tenant: &str) -> Result<(), ReconcileError> {
    let Some(options) = &ctx.state_lock else { return Ok(()) };
    status::update(ctx.store.as_ref(), tenant, |status| {
        if status.state_lock.as_ref().is_some_and(|lock| lock.holder == options.holder) {
            status.state_lock = None;
        }
    })
    .await
}

/// A lock held by another holder, as found.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Held {
    pub(crate) lock: StateLock,
    /// What holds it in the engine: sessions to end, a lock file to remove.
    sessions: bool,
    engine: Option<cms_tofu::EngineLock>,
}

impl Held {
    /// Whether the engine still holds it: a database session, or a live
    /// process with the local state locked. Else only a record (or a lock
    /// file) of a run that ended is left.
    fn in_engine(&self) -> bool {
        self.sessions || self.engine.as_ref().is_some_and(|engine| engine.pid.is_some())
    }
}

/// Looks for a state lock of another holder as this replica takes up a
/// tenant: `Some(action)` while the tenant waits for it, `None` when
/// there is none (any more) and the pass goes on.
pub(crate) async fn take_up(tenant: &Tenant, ctx: &Context) -> Result<Option<Action>, ReconcileError> {
    let Some(options) = &ctx.state_lock else { return Ok(None) };
    let name = tenant.metadata.name.as_str();
    let request = tenant.metadata.annotations.get(RELEASE_ANNOTATION).cloned();
    let Some(held) = find(tenant, ctx, options).await? else {
        if let Some(own) = tenant.status.state_lock.as_ref().filter(|lock| lock.holder == options.holder) {
            // A run of this replica that ended without clearing it.
            tracing::debug!(tenant = name, since = %own.since, "clearing this replica's own state lock record");
            clear(ctx, name).await?;
        }
        if request.is_some() {
            rollout::set_annotation(ctx, name, RELEASE_ANNOTATION, None).await?;
        }
        return Ok(None);
    };
    let age = (Utc::now() - held.lock.since).to_std().unwrap_or_default();
    if request.is_none() && held.in_engine() && age < options.stale_after {
        let message = blocker::one_line(
            &format!(
                "waiting for the tool's state lock, held by {} ({}) since {}; released {}s after that if its \
                 holder is gone",
                held.lock.holder,
                held.lock.operation,
                held.lock.since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                options.stale_after.as_secs()
            ),
            blocker::MESSAGE_LIMIT,
        );
        let lock = held.lock.clone();
        status::update(ctx.store.as_ref(), name, |status| {
            status.state_lock = Some(lock.clone());
            status.message = Some(message.clone());
        })
        .await?;
        return Ok(Some(Action::Requeue((options.stale_after - age).min(LEAVE_POLL))));
    }
    release(name, &held, request.as_deref(), ctx, options).await?;
    Ok(None)
}

/// The lock of another holder: the tenant's record, a session of its
/// `pg` backend named after another replica, or the engine's lock file.
pub(crate) async fn find(
    tenant: &Tenant,
    ctx: &Context,
    options: &StateLockOptions,
) -> Result<Option<Held>, ReconcileError> {
    let name = tenant.metadata.name.as_str();
    let own = cms_tofu::application_name(name, &options.holder);
    let sessions: Vec<_> = options
        .locks
        .state_lock_sessions(cms_tofu::application_prefix(name))
        .await?
        .into_iter()
        .filter(|session| session.application_name != own)
        .collect();
    let engine = ctx.tofu.engine_lock(name).await;
    let recorded = tenant.status.state_lock.clone().filter(|lock| lock.holder != options.holder);
    let lock = match (recorded, sessions.first(), &engine) {
        (Some(lock), _, _) => lock,
        (None, Some(session), _) => StateLock {
            holder: session.application_name.clone(),
            operation: "unknown".to_string(),
            since: session.since.unwrap_or_else(Utc::now),
        },
        (None, None, Some(engine)) => StateLock {
            holder: engine.who.clone(),
            operation: engine.operation.clone(),
            since: engine.created.unwrap_or_else(Utc::now),
        },
        (None, None, None) => return Ok(None),
    };
    Ok(Some(Held { lock, sessions: !sessions.is_empty(), engine }))
}

/// Releases `held`: ends the sessions holding it, or unlocks the engine's
/// local lock; clears the record and the request; records it on the audit
/// log.
async fn release(
    tenant: &str,
    held: &Held,
    request: Option<&str>,
    ctx: &Context,
    options: &StateLockOptions,
) -> Result<(), ReconcileError> {
    let why = match request {
        Some("force") => "forced by an administrator",
        Some(_) => "asked by an administrator",
        None if held.in_engine() => "held past the bound by a holder that is gone",
        None => "its holder is gone, and nothing holds it any more",
    };
    tracing::warn!(
        tenant,
        holder = %held.lock.holder,
        since = %held.lock.since,
        "releasing the tool's state lock: {why}"
    );
    if held.sessions {
        let prefix = cms_tofu::application_prefix(tenant);
        // Never this replica's own runs' sessions.
        let own = cms_tofu::application_name(tenant, &options.holder);
        options.locks.end_state_lock_sessions(prefix.clone(), own.clone()).await?;
        // The sessions' server processes take a moment to go, their locks with them.
        for _ in 0..SESSION_END_POLLS {
            let left = options.locks.state_lock_sessions(prefix.clone()).await?;
            if left.iter().all(|session| session.application_name == own) {
                break;
            }
            tokio::time::sleep(SESSION_END_POLL).await;
        }
    }
    if let Some(engine) = &held.engine {
        ctx.tofu.force_unlock(tenant, engine).await?;
    }
    status::update(ctx.store.as_ref(), tenant, |status| status.state_lock = None).await?;
    if request.is_some() {
        rollout::set_annotation(ctx, tenant, RELEASE_ANNOTATION, None).await?;
    }
    if let Some(audit) = &options.audit
        && let Err(err) = audit.record(entry(tenant, &held.lock, &options.holder, Utc::now())).await
    {
        tracing::warn!(tenant, "could not record the release of a state lock on the audit log: {err}");
    }
    Ok(())
}

/// The audit record of a release by `replica`: as the API's release
/// would be, its target naming the holder and since when.
pub(crate) fn entry(tenant: &str, lock: &StateLock, replica: &str, time: DateTime<Utc>) -> AuditEntry {
    let since = lock.since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let held: String = format!("{} since {since}", lock.holder).chars().take(240).collect();
    AuditEntry {
        time,
        actor: STATE_LOCK_ACTOR.to_string(),
        actor_role: None,
        actor_token: None,
        actor_source: None,
        actor_issuer: None,
        actor_subject: Some(replica.to_string()),
        method: "DELETE".to_string(),
        route: Some("/api/v1/tenants/{name}/state-lock".to_string()),
        path: format!("/api/v1/tenants/{tenant}/state-lock"),
        target: Some(AuditTarget {
            kind: "StateLock".to_string(),
            tenant: Some(tenant.to_string()),
            name: Some(held),
        }),
        status: 200,
        outcome: AuditOutcome::of_status(200),
        request_id: format!("state-lock-{}", time.format("%Y%m%dt%H%M%S%.3fz")),
    }
}

//! The controller loop: store watch events and a periodic resync trigger
//! reconciles; at most `concurrency` run at once, and each tenant is handled
//! by one task at a time (a trigger during a run queues one more run).
//! Failures requeue with the error policy's backoff.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use cms_model::Kind;
use cms_store::{EventType, Lease, StoreError, WatchItem, WatchStream};
use futures_util::StreamExt;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use crate::{Action, Backoff, Context, DriftOptions, LeaseOptions, reconcile};

/// How the controller runs.
#[derive(Debug, Clone, Copy)]
pub struct ControllerOptions {
    pub concurrency: usize,
    pub backoff: Backoff,
    /// The drift scheduler (`drift.rs`), which wakes a tenant to correct it;
    /// off by default here (the server turns it on).
    pub drift: DriftOptions,
}

impl Default for ControllerOptions {
    fn default() -> ControllerOptions {
        let drift = DriftOptions { interval: Duration::ZERO, ..DriftOptions::default() };
        ControllerOptions { concurrency: 4, backoff: Backoff::default(), drift }
    }
}

/// What wakes the loop.
enum Wake {
    /// A change, or a retry that is due: runs at once.
    Trigger(String),
    /// The periodic resync: waits out a failing tenant's backoff.
    Resync(String),
    Done {
        tenant: String,
        result: Result<Action, String>,
    },
}

#[derive(Default)]
struct TenantState {
    running: bool,
    again: bool,
    failures: u32,
    /// While a failed tenant backs off, resyncs leave it alone.
    backoff_until: Option<tokio::time::Instant>,
}

/// Runs the controller until `shutdown`; runs in flight finish first.
pub async fn run(ctx: Arc<Context>, options: ControllerOptions, shutdown: CancellationToken) {
    let (wake, mut woken) = mpsc::unbounded_channel::<Wake>();
    let watcher = tokio::spawn(watch(ctx.clone(), wake.clone(), shutdown.clone()));
    let waker = wake.clone();
    let trigger: crate::drift::Trigger = Arc::new(move |tenant| {
        let _ = waker.send(Wake::Trigger(tenant));
    });
    let drift = tokio::spawn(crate::drift::run(ctx.clone(), options.drift, trigger, shutdown.clone()));
    let permits = Arc::new(Semaphore::new(options.concurrency.max(1)));
    let mut tenants: HashMap<String, TenantState> = HashMap::new();
    let mut resync = tokio::time::interval(ctx.resync);
    resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    resync.tick().await;
    loop {
        let event = tokio::select! {
            () = shutdown.cancelled() => break,
            _ = resync.tick() => {
                for name in tenant_names(&ctx) {
                    let _ = wake.send(Wake::Resync(name));
                }
                continue;
            }
            event = woken.recv() => match event { Some(event) => event, None => break },
        };
        match event {
            Wake::Resync(name)
                if tenants
                    .get(&name)
                    .and_then(|state| state.backoff_until)
                    .is_some_and(|until| tokio::time::Instant::now() < until) => {}
            Wake::Trigger(name) | Wake::Resync(name) => {
                let state = tenants.entry(name.clone()).or_default();
                if state.running {
                    state.again = true;
                    continue;
                }
                state.running = true;
                spawn_run(ctx.clone(), permits.clone(), wake.clone(), name);
            }
            Wake::Done { tenant, result } => {
                let state = tenants.entry(tenant.clone()).or_default();
                state.running = false;
                let retry = match result {
                    // Sooner than the periodic resync: a tenant whose nodes
                    // are not ready yet, or one another replica holds.
                    Ok(Action::Requeue(delay)) if delay < ctx.resync => {
                        state.failures = 0;
                        state.backoff_until = None;
                        Some(delay)
                    }
                    Ok(_) => {
                        state.failures = 0;
                        state.backoff_until = None;
                        None
                    }
                    Err(message) => {
                        state.failures += 1;
                        let delay = options.backoff.delay(state.failures);
                        state.backoff_until = Some(tokio::time::Instant::now() + delay);
                        tracing::warn!(%tenant, failures = state.failures, ?delay, "reconcile failed: {message}");
                        Some(delay)
                    }
                };
                if std::mem::take(&mut state.again) && retry.is_none() {
                    state.running = true;
                    spawn_run(ctx.clone(), permits.clone(), wake.clone(), tenant);
                } else if let Some(delay) = retry {
                    let wake = wake.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(delay).await;
                        let _ = wake.send(Wake::Trigger(tenant));
                    });
                }
            }
        }
    }
    watcher.abort();
    drift.abort();
    // Let runs in flight finish (each holds a permit) before returning.
    let _ = permits.acquire_many(options.concurrency.max(1) as u32).await;
}

fn spawn_run(ctx: Arc<Context>, permits: Arc<Semaphore>, wake: mpsc::UnboundedSender<Wake>, tenant: String) {
    tokio::spawn(async move {
        let Ok(_permit) = permits.acquire_owned().await else { return };
        let started = std::time::Instant::now();
        let result = match &ctx.leases {
            None => reconcile(&tenant, &ctx).await.map_err(|err| err.to_string()),
            Some(leases) => leased(&tenant, &ctx, leases).await,
        };
        let outcome = if result.is_ok() { "ok" } else { "error" };
        metrics::counter!("cms_reconciles_total", "outcome" => outcome).increment(1);
        metrics::histogram!("cms_reconcile_duration_seconds", "outcome" => outcome)
            .record(started.elapsed().as_secs_f64());
        let _ = wake.send(Wake::Done { tenant, result });
    });
}

/// One reconcile under the tenant's lease: skipped while another replica
/// holds it (looked at again once it may have expired), with every write
/// fenced by it, renewed while it runs, and cancelled, tool run included,
/// when it is lost.
async fn leased(tenant: &str, ctx: &Context, options: &LeaseOptions) -> Result<Action, String> {
    let name = format!("tenant/{tenant}");
    let lease = match options.leases.acquire_lease(name, options.holder.clone(), options.ttl).await {
        Ok(Some(lease)) => lease,
        Ok(None) => return Ok(Action::Requeue(options.ttl)),
        Err(err) => return Err(format!("could not take the tenant's lease: {err}")),
    };
    let work =
        |fenced: Context| async move { reconcile(tenant, &fenced).await.map_err(|err| err.to_string()) };
    while_held(tenant, lease, ctx, options, work)
        .await
        .unwrap_or_else(|lost| Err(format!("stopped: the tenant's lease could not be renewed: {lost}")))
}

/// Runs `work` on a context whose every write is fenced by the tenant's
/// `lease`, renewing the lease while it runs, then releases the lease. A
/// failed renewal cancels `work` and is returned.
pub(crate) async fn while_held<T, F>(
    tenant: &str,
    lease: Lease,
    ctx: &Context,
    options: &LeaseOptions,
    work: impl FnOnce(Context) -> F,
) -> Result<T, StoreError>
where
    F: Future<Output = T>,
{
    let fenced = Context { store: options.leases.fenced(lease.clone()), ..ctx.clone() };
    let held = std::sync::Mutex::new(lease);
    let renew = async {
        loop {
            tokio::time::sleep(options.ttl / 3).await;
            let current = held.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
            match options.leases.renew_lease(current, options.ttl).await {
                Ok(renewed) => *held.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = renewed,
                Err(err) => return err,
            }
        }
    };
    let result = tokio::select! {
        result = work(fenced) => Ok(result),
        lost = renew => Err(lost),
    };
    let last = held.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Err(err) = options.leases.release_lease(last).await {
        tracing::warn!(tenant, "could not release the tenant's lease: {err}");
    }
    result
}

fn tenant_names(ctx: &Context) -> Vec<String> {
    ctx.store.all(Kind::Tenant, None).iter().map(|object| object.key.name.clone()).collect()
}

/// Turns store events into triggers: a tenant whose generation or deletion
/// changed, whose rollout pause went or whose CA rotation was asked (its
/// own status writes do not count), a machine whose deletion
/// began (a replacement), and any config patch write. A broken watch is opened again.
async fn watch(ctx: Arc<Context>, wake: mpsc::UnboundedSender<Wake>, shutdown: CancellationToken) {
    let mut seen: HashMap<String, (u64, bool, bool, Option<String>)> = HashMap::new();
    while !shutdown.is_cancelled() {
        let (Ok(tenants), Ok(machines), Ok(patches)) = (
            ctx.store.watch(Kind::Tenant, None).await,
            ctx.store.watch(Kind::Machine, None).await,
            ctx.store.watch(Kind::ConfigPatch, None).await,
        ) else {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        let mut events: WatchStream =
            Box::pin(futures_util::stream::select_all([tenants, machines, patches]));
        while let Some(item) = events.next().await {
            let Ok(WatchItem::Event(event)) = item else {
                if item.is_err() {
                    break;
                }
                continue;
            };
            let object = &event.object;
            let name = match object.key.kind {
                Kind::Tenant if event.event_type == EventType::Deleted => {
                    seen.remove(&object.key.name);
                    continue;
                }
                Kind::Tenant => {
                    // A paused rollout resumes when its annotation goes; a
                    // rotation of the CAs begins when its annotation comes.
                    let tenant = object.parse::<cms_model::Tenant>().ok();
                    let annotation = |name: &str| {
                        tenant.as_ref().and_then(|tenant| tenant.metadata.annotations.get(name).cloned())
                    };
                    let paused = annotation(crate::PAUSED_ANNOTATION).is_some();
                    let rotation = annotation(cms_model::CA_ROTATION_ANNOTATION);
                    let now = (object.generation, object.deleting, paused, rotation);
                    if seen.insert(object.key.name.clone(), now.clone()) == Some(now) {
                        continue;
                    }
                    object.key.name.clone()
                }
                Kind::Machine if object.deleting && event.event_type != EventType::Deleted => {
                    object.key.tenant.clone()
                }
                // A patch changes the configs that metal hosts take.
                Kind::ConfigPatch => object.key.tenant.clone(),
                _ => continue,
            };
            if wake.send(Wake::Trigger(name)).is_err() {
                return;
            }
        }
    }
}

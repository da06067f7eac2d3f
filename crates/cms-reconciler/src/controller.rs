//! The controller loop: store watch events and a periodic resync trigger
//! reconciles; at most `concurrency` run at once, and each tenant is handled
//! by one task at a time (a trigger during a run queues one more run).
//! Failures requeue with the error policy's backoff.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use cms_model::{Kind, Page};
use cms_store::{EventType, WatchItem, WatchStream};
use futures_util::StreamExt;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use crate::{Action, Backoff, Context, reconcile};

/// How the controller runs.
#[derive(Debug, Clone, Copy)]
pub struct ControllerOptions {
    pub concurrency: usize,
    pub backoff: Backoff,
}

impl Default for ControllerOptions {
    fn default() -> ControllerOptions {
        ControllerOptions { concurrency: 4, backoff: Backoff::default() }
    }
}

/// What wakes the loop.
enum Wake {
    Trigger(String),
    Done { tenant: String, result: Result<Action, String> },
}

#[derive(Default)]
struct TenantState {
    running: bool,
    again: bool,
    failures: u32,
}

/// Runs the controller until `shutdown`; runs in flight finish first.
pub async fn run(ctx: Arc<Context>, options: ControllerOptions, shutdown: CancellationToken) {
    let (wake, mut woken) = mpsc::unbounded_channel::<Wake>();
    let watcher = tokio::spawn(watch(ctx.clone(), wake.clone(), shutdown.clone()));
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
                    let _ = wake.send(Wake::Trigger(name));
                }
                continue;
            }
            event = woken.recv() => match event { Some(event) => event, None => break },
        };
        match event {
            Wake::Trigger(name) => {
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
                    Ok(_) => {
                        state.failures = 0;
                        None
                    }
                    Err(message) => {
                        state.failures += 1;
                        let delay = options.backoff.delay(state.failures);
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
    // Let runs in flight finish (each holds a permit) before returning.
    let _ = permits.acquire_many(options.concurrency.max(1) as u32).await;
}

fn spawn_run(ctx: Arc<Context>, permits: Arc<Semaphore>, wake: mpsc::UnboundedSender<Wake>, tenant: String) {
    tokio::spawn(async move {
        let Ok(_permit) = permits.acquire_owned().await else { return };
        let started = std::time::Instant::now();
        let result = reconcile(&tenant, &ctx).await.map_err(|err| err.to_string());
        let outcome = if result.is_ok() { "ok" } else { "error" };
        metrics::counter!("cms_reconciles_total", "outcome" => outcome).increment(1);
        metrics::histogram!("cms_reconcile_duration_seconds", "outcome" => outcome)
            .record(started.elapsed().as_secs_f64());
        let _ = wake.send(Wake::Done { tenant, result });
    });
}

fn tenant_names(ctx: &Context) -> Vec<String> {
    let mut names = Vec::new();
    let mut offset = 0;
    loop {
        let page = ctx.store.list(Kind::Tenant, None, Page { limit: 1000, offset });
        names.extend(page.items.iter().map(|object| object.key.name.clone()));
        offset += page.items.len();
        if page.items.is_empty() || offset as u64 >= page.total {
            return names;
        }
    }
}

/// Turns store events into triggers: a tenant whose generation or deletion
/// changed (its own status writes do not count), a machine whose deletion
/// began (a replacement), and any config patch write. A broken watch is opened again.
async fn watch(ctx: Arc<Context>, wake: mpsc::UnboundedSender<Wake>, shutdown: CancellationToken) {
    let mut seen: HashMap<String, (u64, bool)> = HashMap::new();
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
                    let now = (object.generation, object.deleting);
                    if seen.insert(object.key.name.clone(), now) == Some(now) {
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

//! Following other replicas' writes on PostgreSQL.
//!
//! Every write transaction ends with `pg_notify('cms_events', revision)`.
//! One task per replica listens on that channel over a connection of its
//! own and wakes a second task, which reads the event log past the cache's
//! revision and applies it in order ([`SqlStore::catch_up`]). Notifications
//! only wake; the log is the truth, so a lost notification costs at most one
//! poll interval: the second task also reads the log on a timer, and after
//! every (re)connection, once `LISTEN` is in place.

use std::sync::{Arc, Weak};
use std::time::Duration;

use sea_orm::sqlx::PgPool;
use sea_orm::sqlx::postgres::{PgListener, PgPoolOptions};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::dialect::EVENTS_CHANNEL;
use crate::sql::SqlStore;

/// How long the listener waits before connecting again.
const RECONNECT_DELAY: Duration = Duration::from_millis(500);

/// The two tasks; dropping this stops them.
pub(crate) struct Listener {
    tasks: [JoinHandle<()>; 2],
}

impl Listener {
    /// Starts following the database of `pool` for the store `store`.
    pub(crate) fn start(pool: PgPool, store: Weak<SqlStore>, poll_interval: Duration) -> Listener {
        let wake = Arc::new(Notify::new());
        // A connection of its own, outside the store's pool, with the same
        // options and a bounded wait.
        let own = PgPoolOptions::new()
            .max_connections(1)
            .min_connections(0)
            .acquire_timeout(Duration::from_secs(5))
            .connect_lazy_with(pool.connect_options().as_ref().clone());
        let listen = tokio::spawn(listen(own, wake.clone()));
        let apply = tokio::spawn(apply(store, wake, poll_interval));
        Listener { tasks: [listen, apply] }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Listens for notifications and turns each into a wake-up; after every
/// (re)connection, wakes once too, for what was written meanwhile.
async fn listen(pool: PgPool, wake: Arc<Notify>) {
    let mut connected_before = false;
    loop {
        let mut listener = match subscribe(&pool).await {
            Ok(listener) => listener,
            Err(err) => {
                tracing::debug!(error = %err, "cannot listen for other replicas' writes yet");
                tokio::time::sleep(RECONNECT_DELAY).await;
                continue;
            }
        };
        if connected_before {
            tracing::info!("listening for other replicas' writes again");
        }
        connected_before = true;
        wake.notify_one();
        loop {
            match listener.try_recv().await {
                Ok(Some(_)) => wake.notify_one(),
                Ok(None) => break,
                Err(err) => {
                    tracing::warn!(error = %err, "lost the connection that listens for other replicas' writes");
                    break;
                }
            }
        }
        drop(listener);
        tokio::time::sleep(RECONNECT_DELAY).await;
    }
}

async fn subscribe(pool: &PgPool) -> Result<PgListener, sea_orm::sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    // Reconnection is ours to do, so that it is followed by a catch-up.
    listener.eager_reconnect(false);
    listener.ignore_pool_close_event(true);
    listener.listen(EVENTS_CHANNEL).await?;
    Ok(listener)
}

/// Catches the cache up with the log on every wake-up and every poll
/// interval, until the store is dropped.
async fn apply(store: Weak<SqlStore>, wake: Arc<Notify>, poll_interval: Duration) {
    loop {
        tokio::select! {
            () = wake.notified() => {}
            () = tokio::time::sleep(poll_interval) => {}
        }
        let Some(store) = store.upgrade() else { return };
        if let Err(err) = store.catch_up().await {
            tracing::debug!(error = %err, "cannot read the event log yet");
        }
    }
}

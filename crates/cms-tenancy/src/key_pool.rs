//! A small pool of pre-generated service-account keys.
//!
//! An RSA-4096 key takes from a tenth of a second to over a second to
//! generate, which would be most of a tenant create. One background thread
//! keeps up to `capacity` keys ready; a create takes one and wakes the thread
//! to make another. When the pool is empty (a burst of creates, or a
//! capacity of 0) the create generates its key itself, off the async workers
//! and at most one per core at a time, so a burst cannot starve the server.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use cms_talos::ServiceAccountKey;
use tokio::sync::Semaphore;

use crate::error::TenancyError;

/// How long the filler waits after a failed generation before it tries again.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(1);

/// Pre-generated keys, refilled in the background.
pub(crate) struct KeyPool {
    shared: Arc<Shared>,
    capacity: usize,
    /// Bounds the keys generated on the request path at once.
    inline: Semaphore,
}

struct Shared {
    keys: Mutex<Vec<ServiceAccountKey>>,
    /// Signalled when a key is taken and when the pool stops.
    wake: Condvar,
    stopped: AtomicBool,
}

impl Shared {
    fn keys(&self) -> MutexGuard<'_, Vec<ServiceAccountKey>> {
        // A panic while holding the lock leaves a valid vector behind.
        self.keys.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl std::fmt::Debug for KeyPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyPool").field("capacity", &self.capacity).field("ready", &self.ready()).finish()
    }
}

impl KeyPool {
    /// A pool of up to `capacity` keys, filled by a thread of its own; with a
    /// capacity of 0 there is no thread and every key is generated on demand.
    pub(crate) fn start(capacity: usize) -> KeyPool {
        let shared = Arc::new(Shared {
            keys: Mutex::new(Vec::with_capacity(capacity)),
            wake: Condvar::new(),
            stopped: AtomicBool::new(false),
        });
        if capacity > 0 {
            let filler = shared.clone();
            let spawned = std::thread::Builder::new()
                .name("cms-key-pool".into())
                .spawn(move || fill(&filler, capacity));
            if let Err(err) = spawned {
                tracing::warn!(error = %err, "could not start the key pool; keys are generated on demand");
            }
        }
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        KeyPool { shared, capacity, inline: Semaphore::new(cores) }
    }

    /// How many keys are ready.
    pub(crate) fn ready(&self) -> usize {
        self.shared.keys().len()
    }

    /// A key from the pool, or a fresh one when the pool is empty.
    pub(crate) async fn key(&self) -> Result<ServiceAccountKey, TenancyError> {
        if let Some(key) = self.take() {
            return Ok(key);
        }
        let _permit = self.inline.acquire().await.map_err(|err| TenancyError::Task(err.to_string()))?;
        // Another create may have returned meanwhile and the filler caught up.
        if let Some(key) = self.take() {
            return Ok(key);
        }
        let generated = tokio::task::spawn_blocking(ServiceAccountKey::generate)
            .await
            .map_err(|err| TenancyError::Task(err.to_string()))?;
        Ok(generated?)
    }

    fn take(&self) -> Option<ServiceAccountKey> {
        let key = self.shared.keys().pop();
        if key.is_some() {
            self.shared.wake.notify_one();
        }
        key
    }

    /// Stops the filler thread; keys already made stay available.
    pub(crate) fn stop(&self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        self.shared.wake.notify_all();
    }
}

impl Drop for KeyPool {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The filler: generates keys while the pool is below capacity, sleeps
/// while it is full, and ends when the pool stops.
fn fill(shared: &Shared, capacity: usize) {
    loop {
        {
            let mut keys = shared.keys();
            while keys.len() >= capacity && !shared.stopped.load(Ordering::SeqCst) {
                keys = shared.wake.wait(keys).unwrap_or_else(|poisoned| poisoned.into_inner());
            }
        }
        if shared.stopped.load(Ordering::SeqCst) {
            return;
        }
        match ServiceAccountKey::generate() {
            Ok(key) => shared.keys().push(key),
            Err(err) => {
                tracing::warn!(error = %err, "could not pre-generate a service-account key");
                std::thread::sleep(RETRY_AFTER_FAILURE);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_pool_fills_in_the_background_and_refills_after_a_take() {
        let pool = KeyPool::start(2);
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        while pool.ready() < 2 {
            assert!(std::time::Instant::now() < deadline, "the pool fills");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        pool.key().await.expect("a pooled key");
        while pool.ready() < 2 {
            assert!(std::time::Instant::now() < deadline, "the pool refills");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        pool.stop();
    }

    #[tokio::test]
    async fn an_empty_pool_generates_on_demand() {
        let pool = KeyPool::start(0);
        assert_eq!(pool.ready(), 0);
        pool.key().await.expect("a fresh key");
        assert_eq!(pool.ready(), 0, "no thread fills a pool of capacity 0");
    }
}

//! The prober: a per-tenant cache of results, single flight for concurrent
//! requests, and the all-tenants sweep.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use cms_model::Kind;
use cms_nodeapi::NodeApi;
use cms_store::{Key, Store};
use cms_tenancy::{TenancyError, TenantCredentials};
use futures_util::StreamExt;
use tokio::sync::OnceCell;

use crate::clock::Clock;
use crate::error::ProberError;
use crate::health::{Health, NO_CREDENTIALS, NO_REACHABLE_MACHINES};
use crate::probe;

/// How probes are bounded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProberOptions {
    /// How long one probe of a tenant may take: its machines are asked at
    /// once (up to 16 at a time) and, at this deadline, the best answer so
    /// far is the result. It also bounds each node API call.
    pub deadline: Duration,
    /// How long a tenant's result is served from the cache.
    pub cache_ttl: Duration,
    /// How many tenants `GET /health` probes at once.
    pub parallelism: usize,
}

impl Default for ProberOptions {
    fn default() -> ProberOptions {
        ProberOptions {
            deadline: Duration::from_secs(2),
            cache_ttl: Duration::from_secs(15),
            parallelism: 16,
        }
    }
}

/// A finished probe and when it finished.
#[derive(Debug)]
struct Finished {
    health: Health,
    at: DateTime<Utc>,
}

/// One tenant's slot: empty while its probe runs, which every concurrent
/// request then awaits, and set once it finished.
type Slot = Arc<OnceCell<Finished>>;

/// Probes tenants on request and caches the results.
pub struct Prober {
    store: Arc<dyn Store>,
    credentials: Arc<dyn TenantCredentials>,
    client: Arc<dyn NodeApi>,
    clock: Arc<dyn Clock>,
    options: ProberOptions,
    slots: Mutex<HashMap<String, Slot>>,
}

impl fmt::Debug for Prober {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Prober").field("options", &self.options).finish_non_exhaustive()
    }
}

impl Prober {
    pub fn new(
        store: Arc<dyn Store>,
        credentials: Arc<dyn TenantCredentials>,
        client: Arc<dyn NodeApi>,
        clock: Arc<dyn Clock>,
        options: ProberOptions,
    ) -> Prober {
        Prober { store, credentials, client, clock, options, slots: Mutex::new(HashMap::new()) }
    }

    /// The options in force.
    pub fn options(&self) -> &ProberOptions {
        &self.options
    }

    /// The health of `tenant`: cached if younger than the cache lifetime,
    /// else from the probe under way, else from a new probe.
    pub async fn tenant(&self, tenant: &str) -> Result<Health, ProberError> {
        if self.store.get(&Key::tenant(tenant)).is_none() {
            self.lock().remove(tenant);
            return Err(ProberError::TenantNotFound(tenant.to_string()));
        }
        let slot = self.slot(tenant);
        let finished = slot.get_or_init(|| self.probe(tenant)).await;
        Ok(finished.health.clone())
    }

    /// The health of `tenant` from a probe that starts now, unless one is
    /// already under way, whose answer it then shares. A cached result is
    /// dropped first: this is the operator's "probe now".
    pub async fn probe_now(&self, tenant: &str) -> Result<Health, ProberError> {
        {
            let mut slots = self.lock();
            if slots.get(tenant).is_some_and(|slot| slot.initialized()) {
                slots.remove(tenant);
            }
        }
        self.tenant(tenant).await
    }

    /// The last finished result for `tenant`, however old, without probing.
    pub fn last(&self, tenant: &str) -> Option<Health> {
        self.lock().get(tenant).and_then(|slot| slot.get()).map(|finished| finished.health.clone())
    }

    /// The health of every tenant, by name, probing up to
    /// [`ProberOptions::parallelism`] at once.
    pub async fn all(&self) -> Vec<Health> {
        let names: Vec<String> =
            self.store.all(Kind::Tenant, None).iter().map(|object| object.key.name.clone()).collect();
        futures_util::stream::iter(names)
            .map(|name| async move { self.tenant(&name).await })
            .buffered(self.options.parallelism.max(1))
            .filter_map(|result| async move { result.ok() })
            .collect()
            .await
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The slot to await: the running probe, a fresh result, or a new slot.
    fn slot(&self, tenant: &str) -> Slot {
        let now = self.clock.now();
        let ttl = chrono::Duration::from_std(self.options.cache_ttl).unwrap_or(chrono::Duration::MAX);
        let mut slots = self.lock();
        if let Some(slot) = slots.get(tenant) {
            let usable = match slot.get() {
                None => true,
                Some(finished) => now >= finished.at && now - finished.at < ttl,
            };
            if usable {
                return slot.clone();
            }
        }
        let slot = Slot::default();
        slots.insert(tenant.to_string(), slot.clone());
        slot
    }

    async fn probe(&self, tenant: &str) -> Finished {
        let machines = probe::machines(self.store.as_ref(), tenant);
        let count = machines.len() as u64;
        let credentials = match self.credentials.credentials(tenant).await {
            Ok(credentials) => credentials,
            Err(err) => return self.without_credentials(tenant, count, &err),
        };
        let answer =
            probe::first_answer(self.client.as_ref(), &credentials, tenant, &machines, self.options.deadline)
                .await;
        let at = self.clock.now();
        let (health, result) = match answer {
            Some(version) => (Health::reachable(tenant, count, &version, at), "reachable"),
            None => (Health::unreachable(tenant, count, NO_REACHABLE_MACHINES), "unreachable"),
        };
        metrics::counter!("cms_probes_total", "result" => result).increment(1);
        Finished { health, at }
    }

    /// The result for a tenant whose credentials cannot be made: it has no
    /// secrets (being deleted), or they cannot be opened now, which is logged.
    fn without_credentials(&self, tenant: &str, count: u64, err: &TenancyError) -> Finished {
        if !matches!(err, TenancyError::NoSecrets(_)) {
            tracing::warn!(tenant, "cannot make the tenant's node API credentials for a probe: {err}");
        }
        metrics::counter!("cms_probes_total", "result" => "no_credentials").increment(1);
        Finished { health: Health::unreachable(tenant, count, NO_CREDENTIALS), at: self.clock.now() }
    }
}

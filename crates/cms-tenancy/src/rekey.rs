//! Online rotation of the sealing key: every replica follows the active key
//! recorded in the store, and one replica at a time (under a lease, when
//! there are several) re-seals what other keys sealed, a bounded batch at a
//! time, while the service serves.
//!
//! The active key is the setting [`ACTIVE_KEY_SETTING`], written by
//! `cms-server keys rotate`; without it, the first configured key is
//! active. The stored blobs are the tenants' bundles and two settings: the
//! canary, the login signing key (`login_key.rs`) and the autoscaler CA
//! (`autoscaler_ca.rs`). Each re-seal is a
//! compare-and-swap on the bytes read
//! ([`Sealed::replace_secrets`]), so a blob that changed meanwhile is left
//! to the next pass and nothing is re-sealed twice. The passes go on until
//! one finds nothing to do, well after the last change of key, so that a
//! blob sealed by a replica that had not yet followed the change is caught
//! too. A `kill -9` loses nothing: the active key is in the store and the
//! next start begins with a pass.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cms_store::{Lease, Leases, Sealed};
use cms_talos::{BUNDLE_PURPOSE, Sealer, TalosError};

use crate::autoscaler_ca::{self, AUTOSCALER_CA_SETTING};
use crate::error::TenancyError;
use crate::login_key::{self, LOGIN_KEY_SETTING};
use crate::secrets::Secrets;

/// The setting that names the active sealing key.
pub const ACTIVE_KEY_SETTING: &str = "secrets_active_key";
/// The setting that holds the sealed canary, as base64.
pub const CANARY_SETTING: &str = "secrets_canary";
/// The gauge of stored blobs per key id (`key_id` label), as of the last
/// pass of this replica.
pub const SEALED_BLOBS_GAUGE: &str = "cms_sealed_blobs";
/// The counter of blobs this replica re-sealed with the active key.
pub const RESEALED_COUNTER: &str = "cms_sealed_blobs_resealed_total";
/// The lease of the replica that re-seals.
pub const REKEY_LEASE: &str = "sealing-keys";

/// How re-sealing runs.
#[derive(Debug, Clone)]
pub struct RekeyOptions {
    /// How often the active key is read from the store.
    pub poll: Duration,
    /// Blobs read and re-sealed per batch.
    pub batch: u64,
    /// The wait between two batches, which bounds the load a pass adds.
    pub pause: Duration,
}

impl Default for RekeyOptions {
    fn default() -> RekeyOptions {
        RekeyOptions { poll: Duration::from_secs(5), batch: 100, pause: Duration::from_millis(10) }
    }
}

/// The lease that keeps re-sealing to one replica.
#[derive(Clone)]
pub struct RekeyLease {
    pub leases: Arc<dyn Leases>,
    pub holder: String,
    pub ttl: Duration,
}

impl std::fmt::Debug for RekeyLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RekeyLease").field("holder", &self.holder).field("ttl", &self.ttl).finish()
    }
}

/// Stored blobs per key id: the tenants' bundles, the canary, the login
/// signing key and the autoscaler CA.
pub type Census = BTreeMap<String, u64>;

/// What one pass found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pass {
    /// Blobs per key id after the pass.
    pub by_key: Census,
    /// Blobs this pass re-sealed.
    pub resealed: u64,
    /// Blobs left as they were: changed meanwhile, or not opening.
    pub skipped: u64,
}

/// Follows the active key and re-seals stored blobs with it.
pub struct Rekeyer {
    store: Arc<dyn Sealed>,
    secrets: Arc<Secrets>,
    options: RekeyOptions,
    lease: Option<RekeyLease>,
}

impl std::fmt::Debug for Rekeyer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rekeyer").field("options", &self.options).field("lease", &self.lease).finish()
    }
}

impl Rekeyer {
    /// A rekeyer over `store`; with `lease`, only its holder re-seals.
    pub fn new(
        store: Arc<dyn Sealed>,
        secrets: Arc<Secrets>,
        options: RekeyOptions,
        lease: Option<RekeyLease>,
    ) -> Rekeyer {
        Rekeyer { store, secrets, options, lease }
    }

    fn sealer(&self) -> &Sealer {
        self.secrets.sealer()
    }

    /// Activates the key the store names, if it names one. `true` when the
    /// active key changed. Fails when the keyring does not hold that key.
    pub async fn follow_active_key(&self) -> Result<bool, TenancyError> {
        follow_active_key(self.store.as_ref(), self.sealer()).await
    }

    /// One pass: counts the blobs per key, then re-seals those of other keys
    /// than the active one, a batch at a time.
    pub async fn pass(&self, lease: Option<&Lease>) -> Result<Pass, TenancyError> {
        let mut pass = Pass { by_key: census(self.store.as_ref()).await?, ..Pass::default() };
        publish(self.sealer(), &pass.by_key);
        // Everything under the active key already (every start, once a
        // rotation is over): the census was the only read needed.
        let active = self.sealer().current_key_id();
        if pass.by_key.iter().all(|(key_id, count)| key_id == active || *count == 0) {
            return Ok(pass);
        }
        let mut lease = lease.cloned();
        self.reseal_setting(CANARY_SETTING, Sealer::reseal_canary, &mut pass).await?;
        self.reseal_setting(LOGIN_KEY_SETTING, login_key::reseal, &mut pass).await?;
        self.reseal_setting(AUTOSCALER_CA_SETTING, autoscaler_ca::reseal, &mut pass).await?;
        let mut after = None;
        loop {
            let page = self.store.sealed_secrets(after.clone(), self.options.batch).await?;
            let Some((last, _)) = page.last() else { break };
            after = Some(last.clone());
            let full = page.len() as u64 == self.options.batch;
            for (tenant, sealed) in page {
                self.reseal_bundle(&tenant, sealed, &mut pass).await?;
            }
            publish(self.sealer(), &pass.by_key);
            if let (Some(held), Some(options)) = (lease.take(), &self.lease) {
                lease = Some(options.leases.renew_lease(held, options.ttl).await?);
            }
            if !full {
                break;
            }
            tokio::time::sleep(self.options.pause).await;
        }
        Ok(pass)
    }

    async fn reseal_bundle(
        &self,
        tenant: &str,
        sealed: Vec<u8>,
        pass: &mut Pass,
    ) -> Result<(), TenancyError> {
        let Some(from) = self.due(&sealed) else { return Ok(()) };
        let resealed = match self.sealer().reseal(tenant, BUNDLE_PURPOSE, &sealed) {
            Ok(Some(resealed)) => resealed,
            Ok(None) => return Ok(()),
            Err(err) => {
                tracing::error!(tenant, key_id = from, error = %err, "a tenant's sealed secrets do not open");
                pass.skipped += 1;
                return Ok(());
            }
        };
        let replaced = self.store.replace_secrets(tenant.to_string(), sealed, resealed).await?;
        self.count(pass, &from, replaced);
        Ok(())
    }

    /// Re-seals the setting `name`, which holds a sealed blob as base64,
    /// with `reseal`. A login key still in the clear is left to the next
    /// start, which replaces it.
    async fn reseal_setting(&self, name: &str, reseal: Reseal, pass: &mut Pass) -> Result<(), TenancyError> {
        let Some(stored) = self.store.setting(name.to_string()).await? else { return Ok(()) };
        if login_key::is_clear_login_key(&stored) {
            return Ok(());
        }
        let Ok(sealed) = STANDARD.decode(stored.trim()) else {
            pass.skipped += 1;
            return Ok(());
        };
        let Some(from) = self.due(&sealed) else { return Ok(()) };
        let Some(resealed) = reseal(self.sealer(), &sealed)? else { return Ok(()) };
        let replaced =
            self.store.replace_setting(name.to_string(), stored, STANDARD.encode(resealed)).await?;
        self.count(pass, &from, replaced);
        Ok(())
    }

    /// The key id of `sealed` when it is not the active one.
    fn due(&self, sealed: &[u8]) -> Option<String> {
        let key_id = Sealer::sealed_key_id(sealed).ok()?;
        (key_id != self.sealer().current_key_id()).then(|| key_id.to_string())
    }

    fn count(&self, pass: &mut Pass, from: &str, replaced: bool) {
        if !replaced {
            pass.skipped += 1;
            return;
        }
        pass.resealed += 1;
        metrics::counter!(RESEALED_COUNTER).increment(1);
        if let Some(left) = pass.by_key.get_mut(from) {
            *left = left.saturating_sub(1);
        }
        *pass.by_key.entry(self.sealer().current_key_id().to_string()).or_default() += 1;
    }

    /// Follows the active key and re-seals until `stop` completes: a pass at
    /// the start and after every change of key, repeated until one finds
    /// nothing to do at least two polls after the change.
    pub async fn run(self, stop: impl Future<Output = ()>) {
        let mut stop = std::pin::pin!(stop);
        let mut changed_at = Instant::now();
        let mut dirty = true;
        let mut first = true;
        loop {
            let wait = if first { Duration::ZERO } else { self.options.poll };
            first = false;
            tokio::select! {
                () = &mut stop => return,
                () = tokio::time::sleep(wait) => {}
            }
            match self.follow_active_key().await {
                Ok(true) => {
                    tracing::info!(key_id = self.sealer().current_key_id(), "now sealing with another key");
                    changed_at = Instant::now();
                    dirty = true;
                }
                Ok(false) => {}
                Err(err) => tracing::error!(error = %err, "could not follow the active sealing key"),
            }
            if dirty {
                let settled = changed_at.elapsed() >= self.options.poll * 2;
                match self.leased_pass().await {
                    Ok(Some(pass)) if pass.resealed == 0 && pass.skipped == 0 && settled => {
                        dirty = false;
                        self.report_removable(&pass.by_key);
                    }
                    Ok(Some(pass)) if pass.resealed > 0 => {
                        tracing::info!(resealed = pass.resealed, left = ?pass.by_key, "re-sealed with the active key");
                    }
                    Ok(_) => {}
                    Err(err) => tracing::warn!(error = %err, "re-sealing failed; trying again"),
                }
            }
        }
    }

    /// A pass under the lease; `None` when another replica holds it.
    async fn leased_pass(&self) -> Result<Option<Pass>, TenancyError> {
        let Some(options) = &self.lease else { return self.pass(None).await.map(Some) };
        let acquired =
            options.leases.acquire_lease(REKEY_LEASE.into(), options.holder.clone(), options.ttl).await?;
        let Some(lease) = acquired else { return Ok(None) };
        let pass = self.pass(Some(&lease)).await;
        if let Err(err) = options.leases.release_lease(lease).await {
            tracing::warn!(error = %err, "could not release the re-sealing lease");
        }
        pass.map(Some)
    }

    fn report_removable(&self, by_key: &Census) {
        let active = self.sealer().current_key_id();
        for key_id in self.sealer().key_ids().filter(|id| *id != active) {
            if by_key.get(key_id).copied().unwrap_or(0) == 0 {
                tracing::info!(
                    key_id,
                    "no stored blob is sealed with this key any more: it can be removed from the configuration \
                     once no backup taken under it is needed"
                );
            }
        }
    }
}

/// Activates the key the store names in `sealer`, if it names one. `true`
/// when the active key changed.
pub async fn follow_active_key(store: &dyn Sealed, sealer: &Sealer) -> Result<bool, TenancyError> {
    let Some(key_id) = store.setting(ACTIVE_KEY_SETTING.to_string()).await? else { return Ok(false) };
    if key_id == sealer.current_key_id() {
        return Ok(false);
    }
    sealer.activate(&key_id)?;
    Ok(true)
}

/// How a setting's sealed blob is sealed again with the active key: `None`
/// when the active key sealed it already.
type Reseal = fn(&Sealer, &[u8]) -> Result<Option<Vec<u8>>, TalosError>;

/// Stored blobs per key id, read a page at a time. A login key still in the
/// clear is no sealed blob, and is not counted.
pub async fn census(store: &dyn Sealed) -> Result<Census, TenancyError> {
    let mut by_key = Census::new();
    let mut count = |sealed: &[u8]| {
        let key_id = Sealer::sealed_key_id(sealed).map_or("(unreadable)", |id| id);
        *by_key.entry(key_id.to_string()).or_default() += 1;
    };
    for name in [CANARY_SETTING, LOGIN_KEY_SETTING, AUTOSCALER_CA_SETTING] {
        match store.setting(name.to_string()).await? {
            Some(stored) if !login_key::is_clear_login_key(&stored) => {
                count(&STANDARD.decode(stored.trim()).unwrap_or_default());
            }
            _ => {}
        }
    }
    let mut after = None;
    loop {
        let page = store.sealed_secrets(after.clone(), CENSUS_PAGE).await?;
        let Some((last, _)) = page.last() else { break };
        after = Some(last.clone());
        page.iter().for_each(|(_, sealed)| count(sealed));
        if (page.len() as u64) < CENSUS_PAGE {
            break;
        }
    }
    Ok(by_key)
}

/// Blobs per page of a census.
const CENSUS_PAGE: u64 = 500;

/// Sets the gauge of every configured key and every key found.
fn publish(sealer: &Sealer, by_key: &Census) {
    let key_ids: std::collections::BTreeSet<&str> =
        sealer.key_ids().chain(by_key.keys().map(String::as_str)).collect();
    for key_id in key_ids {
        let count = by_key.get(key_id).copied().unwrap_or(0);
        metrics::gauge!(SEALED_BLOBS_GAUGE, "key_id" => key_id.to_string()).set(count as f64);
    }
}

#[cfg(test)]
mod tests;

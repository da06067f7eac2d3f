//! `cms-server keys status` and `cms-server keys rotate --to ID`: the
//! sealing keys of a store, from the same settings as `serve`.
//!
//! `rotate` records the new active key in the store. Every running replica
//! reads it within `CMS_REKEY_POLL` and seals with it from then on, and
//! one of them re-seals the stored blobs in the background (`status`
//! follows the progress). The key must be configured on every replica
//! first, as another key (`CMS_SECRETS_OTHER_KEYS` or a line of the key
//! file), so that all of them open blobs under either key throughout.

use std::io::Write as _;

use anyhow::{Context, bail};
use cms_store::{Sealed, SqlStore, StoreOptions};
use cms_talos::Sealer;
use cms_tenancy::{ACTIVE_KEY_SETTING, Census, census};

use crate::sealing;
use crate::settings::Settings;

/// Writes a line of the report to standard output.
macro_rules! say {
    ($out:expr, $($arg:tt)*) => {
        writeln!($out, $($arg)*).context("could not write to standard output")?
    };
}

/// Prints the active key, the configured keys and the blobs per key.
pub(crate) async fn status(settings: &Settings) -> anyhow::Result<()> {
    let (store, sealer) = open(settings).await?;
    let by_key = census(store.as_ref()).await.context("could not count the sealed blobs")?;
    report(&sealer, &by_key)
}

/// Makes `key_id` the active key of the store.
pub(crate) async fn rotate(settings: &Settings, key_id: &str) -> anyhow::Result<()> {
    let (store, sealer) = open(settings).await?;
    if !sealer.key_ids().any(|id| id == key_id) {
        let configured = sealer.key_ids().collect::<Vec<_>>().join(", ");
        bail!(
            "key {key_id:?} is not configured (the keys are {configured}): add it on every replica first, \
             with CMS_SECRETS_OTHER_KEYS or a line of the key file, and restart them"
        );
    }
    let before = sealer.current_key_id().to_string();
    store
        .put_setting(ACTIVE_KEY_SETTING.to_string(), key_id.to_string())
        .await
        .context("could not record the active key")?;
    sealer.activate(key_id)?;
    let mut out = std::io::stdout().lock();
    if before == key_id {
        say!(out, "key {key_id} was active already");
    } else {
        say!(out, "key {key_id} is now active (it was {before})");
    }
    say!(
        out,
        "running servers seal with it within {}, and re-seal the blobs of other keys in the background",
        humantime::format_duration(settings.rekey_poll)
    );
    drop(out);
    let by_key = census(store.as_ref()).await.context("could not count the sealed blobs")?;
    report(&sealer, &by_key)
}

/// The store and the keyring, following the store's active key; the
/// canary must open.
async fn open(settings: &Settings) -> anyhow::Result<(std::sync::Arc<SqlStore>, Sealer)> {
    let store = SqlStore::open(&StoreOptions::new(settings.database_url()))
        .await
        .context("could not open the store")?;
    let sealer = sealing::sealer(settings, store.as_ref()).await?;
    Ok((store, sealer))
}

fn report(sealer: &Sealer, by_key: &Census) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    let active = sealer.current_key_id();
    say!(out, "active key: {active}");
    say!(out, "configured keys: {}", sealer.key_ids().collect::<Vec<_>>().join(", "));
    say!(out, "sealed blobs per key:");
    let mut ids: Vec<&str> = sealer.key_ids().collect();
    ids.extend(by_key.keys().map(String::as_str).filter(|id| !sealer.key_ids().any(|known| known == *id)));
    for id in &ids {
        say!(out, "  {id}: {}", by_key.get(*id).copied().unwrap_or(0));
    }
    let left: u64 = by_key.iter().filter(|(id, _)| *id != active).map(|(_, count)| count).sum();
    say!(out, "blobs left to re-seal: {left}");
    for id in ids.iter().filter(|id| **id != active) {
        match by_key.get(*id).copied().unwrap_or(0) {
            0 => say!(
                out,
                "key {id} seals no blob: it can be removed from the configuration \
                 (keep a copy while a backup taken under it may be restored)"
            ),
            count => say!(out, "key {id} still seals {count} blobs: keep it configured"),
        }
    }
    Ok(())
}

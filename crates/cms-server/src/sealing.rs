//! The keys that seal tenant secrets at rest, and the startup check that
//! they open the stored data.
//!
//! The keyring is `CMS_SECRETS_KEY` (with `CMS_SECRETS_KEY_ID`), else the
//! key file `<data_dir>/secrets.key` (created with mode 0600 on first
//! start), followed by `CMS_SECRETS_OTHER_KEYS`. The active key is the one
//! the store names (`cms-server keys rotate` writes it), else the first.
//! A sealed canary is stored once in the store's settings; at every start
//! one of the keys must open it, so a wrong key stops the server with a
//! clear error instead of failing at the first download.
//!
//! The login signing key, unless `CMS_LOGIN_SIGNING_KEY` sets it, is kept
//! in the store sealed with the same keyring (`cms_tenancy::login_signing_key`).

use anyhow::{Context, bail};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cms_store::{Accounts, Sealed};
use cms_talos::{Sealer, SealingKey};
use cms_tenancy::{ACTIVE_KEY_SETTING, CANARY_SETTING};
use secrecy::{ExposeSecret, SecretSlice, SecretString};

use crate::settings::Settings;

/// The keys of `CMS_SECRETS_OTHER_KEYS`: `<id>=<base64>` separated by
/// commas or white space.
pub(crate) fn other_keys(settings: &Settings) -> anyhow::Result<Vec<SealingKey>> {
    let Some(text) = &settings.secrets_other_keys else { return Ok(Vec::new()) };
    let entries = text.expose_secret().split(|c: char| c == ',' || c.is_whitespace());
    entries
        .filter(|entry| !entry.is_empty())
        .enumerate()
        .map(|(index, entry)| {
            // An id never holds `=`; a malformed entry is never echoed, as
            // it may hold key material.
            let split = entry.split_once('=').filter(|(id, _)| SealingKey::is_valid_id(id));
            let Some((id, key)) = split else {
                bail!("CMS_SECRETS_OTHER_KEYS: entry {} is not `<id>=<base64>`", index + 1);
            };
            SealingKey::from_base64(id, &SecretString::from(key.to_string()))
                .with_context(|| format!("CMS_SECRETS_OTHER_KEYS: entry {}", index + 1))
        })
        .collect()
}

/// The configured keyring, the first key active, and where it came from.
/// Creates the key file when no key is configured and it does not exist.
pub(crate) fn keyring(settings: &Settings) -> anyhow::Result<(Sealer, String)> {
    let (first, source) = match &settings.secrets_key {
        Some(key) => {
            let sealer = Sealer::from_config(&settings.secrets_key_id, key).context("CMS_SECRETS_KEY")?;
            (sealer, "CMS_SECRETS_KEY".to_string())
        }
        None => {
            let path = settings.secrets_key_file();
            let sealer =
                Sealer::from_key_file(&path).context("could not read or create the secrets key file")?;
            (sealer, format!("the key file {}", path.display()))
        }
    };
    let others = other_keys(settings)?;
    if others.is_empty() {
        return Ok((first, source));
    }
    let keys = first.into_keys().into_iter().chain(others).collect();
    Ok((Sealer::from_keys(keys).context("the sealing keys")?, format!("{source} and CMS_SECRETS_OTHER_KEYS")))
}

/// The keyring, following the active key the store names, checked against
/// the stored canary (sealed and stored first on a new store).
pub(crate) async fn sealer(settings: &Settings, store: &(impl Accounts + Sealed)) -> anyhow::Result<Sealer> {
    let (sealer, source) = keyring(settings)?;
    activate(store, &sealer, &source).await?;
    let fresh = STANDARD.encode(sealer.seal_canary().context("could not seal the canary")?);
    let stored = store
        .setting_or_insert(CANARY_SETTING.to_string(), fresh)
        .await
        .context("could not read the secrets canary")?;
    let canary = STANDARD.decode(stored.trim()).context("the stored secrets canary is not base64")?;
    sealer.check_canary(&canary).with_context(|| {
        format!(
            "none of the secrets keys from {source} opens this data: configure the keys it was sealed with \
             (CMS_SECRETS_KEY and CMS_SECRETS_KEY_ID, the key file, or CMS_SECRETS_OTHER_KEYS)"
        )
    })?;
    let keys = sealer.key_ids().collect::<Vec<_>>().join(", ");
    tracing::info!(
        key_id = sealer.current_key_id(),
        keys,
        "tenant secrets are sealed with the key from {source}"
    );
    Ok(sealer)
}

/// Makes the key the store names active, refusing to start without it.
pub(crate) async fn activate(store: &dyn Sealed, sealer: &Sealer, source: &str) -> anyhow::Result<()> {
    let Some(key_id) =
        store.setting(ACTIVE_KEY_SETTING.to_string()).await.context("reading the active key")?
    else {
        return Ok(());
    };
    sealer.activate(&key_id).map_err(|_| {
        anyhow::anyhow!(
            "the store's active secrets key is {key_id:?}, which {source} does not hold: configure it \
             (CMS_SECRETS_OTHER_KEYS, or a line of the key file)"
        )
    })
}

/// The login signing key: `CMS_LOGIN_SIGNING_KEY`, else the key kept sealed
/// in the store (generated on the first start). A key that an older version
/// stored in the clear is replaced by a new one, sealed, either way.
pub(crate) async fn login_signing_key(
    settings: &Settings,
    store: &(impl Accounts + Sealed),
    sealer: &Sealer,
) -> anyhow::Result<SecretSlice<u8>> {
    let context = "could not read the login signing key from the store";
    match &settings.login_signing_key {
        Some(key) => {
            cms_tenancy::replace_clear_login_key(store, sealer).await.context(context)?;
            Ok(SecretSlice::from(key.expose_secret().as_bytes().to_vec()))
        }
        None => cms_tenancy::login_signing_key(store, sealer).await.context(context),
    }
}

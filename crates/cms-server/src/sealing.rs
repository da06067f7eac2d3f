//! The key that seals tenant secrets at rest, and the startup check that it
//! is the key the stored data was sealed with.
//!
//! The key comes from `CMS_SECRETS_KEY` (with `CMS_SECRETS_KEY_ID`), else
//! from the key file `<data_dir>/secrets.key`, created with mode 0600 on
//! first start. A sealed canary is stored once in the store's settings; at
//! every start the key must open it, so a wrong key stops the server with a
//! clear error instead of failing at the first download.

use anyhow::Context;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cms_store::Accounts;
use cms_talos::Sealer;

use crate::settings::Settings;

/// The setting that holds the sealed canary, as base64.
pub(crate) const CANARY_SETTING: &str = "secrets_canary";

/// The sealer of the configured key, checked against the stored canary.
pub(crate) async fn sealer(settings: &Settings, accounts: &dyn Accounts) -> anyhow::Result<Sealer> {
    let (sealer, source) = match &settings.secrets_key {
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
    let fresh = STANDARD.encode(sealer.seal_canary().context("could not seal the canary")?);
    let stored = accounts
        .setting_or_insert(CANARY_SETTING.to_string(), fresh)
        .await
        .context("could not read the secrets canary")?;
    let canary = STANDARD.decode(stored.trim()).context("the stored secrets canary is not base64")?;
    sealer.check_canary(&canary).with_context(|| {
        format!(
            "the secrets key from {source} is not the key this data was sealed with: \
             configure the original key (CMS_SECRETS_KEY and CMS_SECRETS_KEY_ID, or the key file)"
        )
    })?;
    tracing::info!(key_id = sealer.current_key_id(), "tenant secrets are sealed with the key from {source}");
    Ok(sealer)
}

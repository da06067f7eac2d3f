//! The login signing key, kept in the store's settings sealed like every
//! other secret: the setting [`LOGIN_KEY_SETTING`] holds, as base64, a blob
//! sealed for no tenant and the purpose [`LOGIN_KEY_PURPOSE`]. The
//! [`Rekeyer`](crate::Rekeyer) re-seals it with the canary when the sealing
//! key rotates, and [`census`](crate::census) counts it.
//!
//! [`login_signing_key`] generates the key on the first start and opens it
//! on every start after. Versions before this one kept the key in the
//! clear, as hex: the first start that finds such a key seals it in place
//! (a compare-and-swap, so replicas starting together seal it once), and
//! login tokens issued before the upgrade still verify.
//! [`seal_clear_login_key`] does only that, for a server whose key is
//! configured instead.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cms_store::{Accounts, Sealed};
use cms_talos::{Sealer, TalosError};
use secrecy::{ExposeSecret, SecretSlice};

use crate::error::TenancyError;

/// The setting that holds the login signing key, sealed, as base64.
pub const LOGIN_KEY_SETTING: &str = "login-signing-key";
/// The purpose the login signing key is sealed for.
pub const LOGIN_KEY_PURPOSE: &str = "cms:login-signing-key";
/// The length of a generated key, in bytes.
const KEY_BYTES: usize = 32;
/// How many times a start reads the setting again after another replica
/// changed it under it.
const ATTEMPTS: usize = 3;

/// The login signing key kept in `store`: generated and stored sealed on
/// the first start, opened on the next ones. A key stored in the clear by
/// an older version is sealed in place first.
pub async fn login_signing_key(
    store: &(impl Accounts + Sealed),
    sealer: &Sealer,
) -> Result<SecretSlice<u8>, TenancyError> {
    for _ in 0..ATTEMPTS {
        let fresh = random_key()?;
        let sealed = seal(sealer, &fresh)?;
        let stored =
            Accounts::setting_or_insert(store, LOGIN_KEY_SETTING.to_string(), sealed.clone()).await?;
        if stored == sealed {
            tracing::info!("generated the login signing key; the store keeps it sealed");
            return Ok(fresh);
        }
        let Some(clear) = clear_key(&stored) else { return open(sealer, &stored) };
        if seal_in_place(store, sealer, stored, &clear).await? {
            return Ok(clear);
        }
    }
    Err(TenancyError::Conflict(
        "the stored login signing key kept changing while it was read: start again".into(),
    ))
}

/// Seals the login signing key in place when an older version left it in
/// the clear; nothing else. `true` when this call sealed it.
pub async fn seal_clear_login_key(store: &dyn Sealed, sealer: &Sealer) -> Result<bool, TenancyError> {
    let Some(stored) = store.setting(LOGIN_KEY_SETTING.to_string()).await? else { return Ok(false) };
    let Some(clear) = clear_key(&stored) else { return Ok(false) };
    seal_in_place(store, sealer, stored, &clear).await
}

/// `sealed` (a login key blob) sealed again with the active key, or `None`
/// when the active key sealed it already.
pub(crate) fn reseal(sealer: &Sealer, sealed: &[u8]) -> Result<Option<Vec<u8>>, TalosError> {
    sealer.reseal("", LOGIN_KEY_PURPOSE, sealed)
}

/// Whether a stored setting is a key in the clear, as versions before the
/// sealed key wrote it: hex, where a sealed value (base64 of a blob that
/// starts with `cms`) never is.
pub(crate) fn is_clear(stored: &str) -> bool {
    !stored.is_empty()
        && stored.len().is_multiple_of(2)
        && stored.bytes().all(|byte| byte.is_ascii_hexdigit())
}

fn clear_key(stored: &str) -> Option<SecretSlice<u8>> {
    is_clear(stored).then(|| hex::decode(stored).ok()).flatten().map(SecretSlice::from)
}

/// Replaces the clear `stored` with `key` sealed. `false` when the setting
/// changed meanwhile (another replica sealed it).
async fn seal_in_place(
    store: &(impl Sealed + ?Sized),
    sealer: &Sealer,
    stored: String,
    key: &SecretSlice<u8>,
) -> Result<bool, TenancyError> {
    let sealed = seal(sealer, key)?;
    let replaced = store.replace_setting(LOGIN_KEY_SETTING.to_string(), stored, sealed).await?;
    if replaced {
        tracing::info!("sealed the login signing key, which an older version stored in the clear");
    }
    Ok(replaced)
}

fn seal(sealer: &Sealer, key: &SecretSlice<u8>) -> Result<String, TenancyError> {
    Ok(STANDARD.encode(sealer.seal("", LOGIN_KEY_PURPOSE, key.expose_secret())?))
}

fn open(sealer: &Sealer, stored: &str) -> Result<SecretSlice<u8>, TenancyError> {
    let sealed = STANDARD
        .decode(stored.trim())
        .map_err(|_| TalosError::Corrupt("the stored login signing key is neither sealed nor hex"))?;
    Ok(SecretSlice::from(sealer.open("", LOGIN_KEY_PURPOSE, &sealed)?))
}

fn random_key() -> Result<SecretSlice<u8>, TenancyError> {
    let mut key = vec![0u8; KEY_BYTES];
    getrandom::fill(&mut key).map_err(|err| TalosError::Crypto(format!("random source: {err}")))?;
    Ok(SecretSlice::from(key))
}

#[cfg(test)]
mod tests;

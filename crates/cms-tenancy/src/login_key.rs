//! The login signing key, kept in the store's settings sealed like every
//! other secret: the setting [`LOGIN_KEY_SETTING`] holds, as base64, a blob
//! sealed for no tenant and the purpose [`LOGIN_KEY_PURPOSE`]. The
//! [`Rekeyer`](crate::Rekeyer) re-seals it with the canary when the sealing
//! key rotates, and [`census`](crate::census) counts it.
//!
//! [`login_signing_key`] generates the key on the first start and opens it
//! on every start after. Versions before this one kept the key in the
//! clear, as hex, and that hex outlives any update of the setting in
//! SQLite's free pages and WAL frames, PostgreSQL's dead rows and every
//! backup taken before: the first start that finds such a key replaces it
//! with a new random key, sealed (a compare-and-swap, so replicas starting
//! together agree on one). Login tokens signed with the old key stop
//! verifying; users log in again. [`replace_clear_login_key`] does only
//! that, for a server whose key is configured instead.
//! [`is_clear_login_key`] tells such a clear key from a sealed one.

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
/// an older version is replaced by a new one, sealed: its tokens stop
/// verifying.
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
        if !is_clear_login_key(&stored) {
            return open(sealer, &stored);
        }
        if replace_clear(store, sealed, stored).await? {
            return Ok(fresh);
        }
    }
    Err(TenancyError::Conflict(
        "the stored login signing key kept changing while it was read: start again".into(),
    ))
}

/// Replaces a login signing key that an older version left in the clear
/// with a new random one, sealed; nothing else. `true` when this call
/// replaced it.
pub async fn replace_clear_login_key(store: &dyn Sealed, sealer: &Sealer) -> Result<bool, TenancyError> {
    let Some(stored) = store.setting(LOGIN_KEY_SETTING.to_string()).await? else { return Ok(false) };
    if !is_clear_login_key(&stored) {
        return Ok(false);
    }
    replace_clear(store, seal(sealer, &random_key()?)?, stored).await
}

/// `sealed` (a login key blob) sealed again with the active key, or `None`
/// when the active key sealed it already.
pub(crate) fn reseal(sealer: &Sealer, sealed: &[u8]) -> Result<Option<Vec<u8>>, TalosError> {
    sealer.reseal("", LOGIN_KEY_PURPOSE, sealed)
}

/// Whether the stored login key setting is a key in the clear, as versions
/// before the sealed key wrote it: hex, where a sealed value (base64 of a
/// blob that starts with `cms`) never is.
pub fn is_clear_login_key(stored: &str) -> bool {
    !stored.is_empty()
        && stored.len().is_multiple_of(2)
        && stored.bytes().all(|byte| byte.is_ascii_hexdigit())
}

/// Replaces the clear `stored` with `sealed`, a new key. `false` when the
/// setting changed meanwhile (another replica replaced it).
async fn replace_clear(
    store: &(impl Sealed + ?Sized),
    sealed: String,
    stored: String,
) -> Result<bool, TenancyError> {
    let replaced = store.replace_setting(LOGIN_KEY_SETTING.to_string(), stored, sealed).await?;
    if replaced {
        tracing::warn!(
            "replaced the login signing key, which an older version stored in the clear, with a new \
             sealed one: login tokens signed before the upgrade no longer verify"
        );
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

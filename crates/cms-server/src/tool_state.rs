//! The provisioning tool's states, checked before the controller starts.
//!
//! The key that OpenTofu's state passphrases derive from ([`StateKey`]):
//! `CMS_TOFU_STATE_KEY`, else `CMS_SECRETS_KEY`, else the key file's text
//! through its first key, so that a key line added for a rotation leaves
//! it alone. The store keeps the key's fingerprint (a keyed hash) from the
//! first start on, and a server whose key differs refuses to start: every
//! state would be unreadable.
//!
//! On PostgreSQL, each tenant's state schema is moved once from the name it
//! had before (`cms_tofu::legacy_state_schema`, which long tenant names
//! could share) to `cms_tofu::state_schema`.

use std::collections::BTreeMap;

use anyhow::{Context, bail};
use cms_store::{Accounts, SchemaRename, Sealed, SqlStore};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use crate::settings::Settings;

/// The store's setting that holds the state key's fingerprint and source.
pub(crate) const STATE_KEY_SETTING: &str = "tofu_state_key";

/// The secret that OpenTofu state encryption derives from, and where it
/// came from. Its `Debug` shows the source only.
pub(crate) struct StateKey {
    pub(crate) secret: SecretString,
    source: String,
    /// Whether it comes from a key file that holds more than its first key:
    /// servers before this one derived the key from the whole file.
    beyond_first_key: bool,
}

impl std::fmt::Debug for StateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateKey").field("source", &self.source).finish_non_exhaustive()
    }
}

impl StateKey {
    /// `CMS_TOFU_STATE_KEY` (trimmed), else `CMS_SECRETS_KEY`, else the key
    /// file's text through its first key line; none without a readable key
    /// file.
    pub(crate) fn read(settings: &Settings) -> Option<StateKey> {
        if let Some(key) = &settings.tofu_state_key {
            let secret = SecretString::from(key.expose_secret().trim());
            return Some(StateKey { secret, source: "CMS_TOFU_STATE_KEY".into(), beyond_first_key: false });
        }
        if let Some(key) = &settings.secrets_key {
            let source = "CMS_SECRETS_KEY".to_string();
            return Some(StateKey { secret: key.clone(), source, beyond_first_key: false });
        }
        let path = settings.secrets_key_file();
        let text = SecretString::from(std::fs::read_to_string(&path).ok()?);
        let (secret, beyond_first_key) = through_first_key(text.expose_secret());
        let source = format!("the key file {} (its text through the first key)", path.display());
        Some(StateKey { secret, source, beyond_first_key })
    }
}

/// The text of a key file through its first key line, trimmed, and whether
/// anything but white space follows that line. For a file of one key (with
/// or without comments before it) this is the whole text trimmed, which is
/// what the state key was before a key line could change it.
fn through_first_key(text: &str) -> (SecretString, bool) {
    let mut end = text.len();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        offset += line.len();
        let line = line.trim();
        if !line.is_empty() && !line.starts_with('#') {
            end = offset;
            break;
        }
    }
    (SecretString::from(text[..end].trim()), !text[end..].trim().is_empty())
}

/// What the store keeps of the state key.
#[derive(Serialize, Deserialize)]
struct Recorded {
    fingerprint: String,
    source: String,
}

/// Refuses a state key other than the one recorded in the store, and
/// records it on first start. A key file that holds more than its first key
/// on first start is refused too: older servers derived the key from the
/// whole file, so the states may be under either.
pub(crate) async fn check_state_key(key: &StateKey, store: &(impl Accounts + Sealed)) -> anyhow::Result<()> {
    let fingerprint = cms_tofu::state_key_fingerprint(&key.secret);
    let stored = store
        .setting(STATE_KEY_SETTING.into())
        .await
        .context("could not read the state key's fingerprint")?;
    let stored = match stored {
        Some(stored) => stored,
        None => {
            if key.beyond_first_key {
                bail!(
                    "CMS_TOFU_STATE_KEY is unset and {} holds more than one key: servers before this version \
                     derived the OpenTofu state key from the key file's whole text, this one from its text \
                     through the first key. Set CMS_TOFU_STATE_KEY to the text the states were encrypted with \
                     (the whole key file as it was when they were written: see docs/operations.md, \
                     \"Secrets key rotation\")",
                    key.source
                );
            }
            let fresh = serde_json::to_string(&Recorded {
                fingerprint: fingerprint.clone(),
                source: key.source.clone(),
            })?;
            store
                .setting_or_insert(STATE_KEY_SETTING.into(), fresh)
                .await
                .context("could not record the state key's fingerprint")?
        }
    };
    let recorded: Recorded =
        serde_json::from_str(&stored).context("the store's fingerprint of the state key is not readable")?;
    if recorded.fingerprint == fingerprint {
        tracing::info!(source = %key.source, "the OpenTofu state key is the one the states were encrypted with");
        return Ok(());
    }
    let change = match recorded.source == key.source {
        true => format!("it comes from {} still, and that changed", key.source),
        false => format!("it came from {} and now comes from {}", recorded.source, key.source),
    };
    bail!(
        "the OpenTofu state key changed ({change}): the tool's states were encrypted with the old one, and none \
         would open. Set CMS_TOFU_STATE_KEY to the key they were encrypted with (docs/operations.md, \"Secrets \
         key rotation\"), or re-create the states under the new key and delete the store's setting \
         {STATE_KEY_SETTING:?}"
    )
}

/// Moves each tenant's state schema from its old name to its new one when
/// only the old one exists, and logs each move; returns the moves. An old
/// name that several tenants share (names alike in their first 54
/// characters) is left alone with a warning: it holds whichever tenant's
/// state was written last.
pub(crate) async fn move_state_schemas(store: &SqlStore) -> anyhow::Result<Vec<(String, String)>> {
    let mut by_old_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for tenant in store.tenant_names() {
        by_old_name.entry(cms_tofu::legacy_state_schema(&tenant)).or_default().push(tenant);
    }
    let mut moved = Vec::new();
    for (old, tenants) in by_old_name {
        let [tenant] = tenants.as_slice() else {
            tracing::warn!(schema = %old, ?tenants, "tenants share an old state schema; it is left where it is");
            continue;
        };
        let new = cms_tofu::state_schema(tenant);
        let renamed = store
            .rename_schema(&old, &new)
            .await
            .with_context(|| format!("could not move the state of tenant {tenant} to schema {new}"))?;
        match renamed {
            SchemaRename::Renamed => {
                tracing::info!(tenant = %tenant, from = %old, to = %new, "moved the tool's state to its new schema");
                moved.push((old, new));
            }
            SchemaRename::TargetExists => tracing::warn!(
                tenant = %tenant,
                old = %old,
                new = %new,
                "both the old and the new state schema exist; the new one is used and the old one left alone"
            ),
            SchemaRename::NoSuchSchema => {}
        }
    }
    Ok(moved)
}

/// Before the controller starts: the state key, checked against the store,
/// and on PostgreSQL the state schemas moved to their names.
pub(crate) async fn prepare(settings: &Settings, store: &SqlStore) -> anyhow::Result<Option<SecretString>> {
    let key = StateKey::read(settings);
    if let Some(key) = &key {
        check_state_key(key, store).await?;
    }
    if settings.is_postgres() {
        move_state_schemas(store).await?;
    }
    Ok(key.map(|key| key.secret))
}

#[cfg(test)]
mod tests;

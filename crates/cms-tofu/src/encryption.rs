//! OpenTofu's state encryption. Cloud user data carries the machine config,
//! CA keys included, so the state holds secrets. With OpenTofu, the state
//! and plans are encrypted with a passphrase derived from the service's key
//! and the tenant's name, handed over in `TF_ENCRYPTION` so that no file
//! holds it. Engines without encryption (Terraform) keep the workspace
//! readable by the service only (mode 0700). A changed key makes every
//! state unreadable, so the server keeps the key's [`fingerprint`] and
//! refuses to start with another.

use hmac::{Hmac, Mac};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The engine behind the configured binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    OpenTofu,
    Terraform,
}

impl Engine {
    /// The engine that printed `version` output.
    pub fn detect(version_output: &str) -> Engine {
        if version_output.trim_start().starts_with("OpenTofu") { Engine::OpenTofu } else { Engine::Terraform }
    }
}

/// The passphrase of one tenant's state.
pub fn passphrase(key: &SecretString, tenant: &str) -> SecretString {
    let mut hasher = Sha256::new();
    hasher.update(b"cms-tofu state encryption v1\0");
    hasher.update(key.expose_secret().as_bytes());
    hasher.update(b"\0");
    hasher.update(tenant.as_bytes());
    SecretString::from(hex::encode(hasher.finalize()))
}

/// A fingerprint of the key passphrases derive from: HMAC-SHA256 keyed by
/// the key over a fixed label, in hex. Equal keys have equal fingerprints;
/// it tells nothing else about the key.
pub fn fingerprint(key: &SecretString) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key.expose_secret().as_bytes())
        .expect("HMAC takes a key of any length");
    mac.update(b"cms-tofu state key fingerprint v1");
    hex::encode(mac.finalize().into_bytes())
}

/// The `encryption` block, as JSON, for `TF_ENCRYPTION`.
pub fn block(passphrase: &SecretString) -> Value {
    json!({
        "key_provider": { "pbkdf2": { "cms": { "passphrase": passphrase.expose_secret() } } },
        "method": { "aes_gcm": { "cms": { "keys": "${key_provider.pbkdf2.cms}" } } },
        "state": { "method": "${method.aes_gcm.cms}", "enforced": true },
        "plan": { "method": "${method.aes_gcm.cms}", "enforced": true },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_detection() {
        assert_eq!(Engine::detect("OpenTofu v1.8.3\non linux_amd64"), Engine::OpenTofu);
        assert_eq!(Engine::detect("Terraform v1.15.5\non linux_amd64"), Engine::Terraform);
    }

    #[test]
    fn passphrase_is_per_tenant() {
        let key = SecretString::from("k".repeat(32));
        assert_ne!(passphrase(&key, "a").expose_secret(), passphrase(&key, "b").expose_secret());
    }

    #[test]
    fn the_fingerprint_follows_the_key_and_holds_none_of_it() {
        let key = SecretString::from("k".repeat(32));
        let same = SecretString::from("k".repeat(32));
        let other = SecretString::from("j".repeat(32));
        assert_eq!(fingerprint(&key), fingerprint(&same));
        assert_ne!(fingerprint(&key), fingerprint(&other));
        assert_eq!(fingerprint(&key).len(), 64);
        assert!(!fingerprint(&key).contains("kkkk"));
    }

    #[test]
    fn encryption_block_snapshot() {
        let block = block(&SecretString::from("<passphrase>".to_string()));
        insta::assert_snapshot!(serde_json::to_string_pretty(&block).unwrap());
    }
}

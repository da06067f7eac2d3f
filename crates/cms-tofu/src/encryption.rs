//! OpenTofu's state encryption. Cloud user data carries the machine config,
//! CA keys included, so the state holds secrets. With OpenTofu, the state
//! and plans are encrypted with a passphrase derived from the service's key
//! and the tenant's name, handed over in `TF_ENCRYPTION` so that no file
//! holds it. Engines without encryption (Terraform) keep the workspace
//! readable by the service only (mode 0700).

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
    fn encryption_block_snapshot() {
        let block = block(&SecretString::from("<passphrase>".to_string()));
        insta::assert_snapshot!(serde_json::to_string_pretty(&block).unwrap());
    }
}

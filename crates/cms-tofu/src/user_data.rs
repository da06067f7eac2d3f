//! Cloud user data: the machine configs that `oci` and `openstack` instances
//! boot with. They hold the tenant's CA keys, so no file the driver writes
//! holds them. The configuration refers to one sensitive variable,
//! [`VARIABLE`], a `map(string)` from machine id to the base64 of that
//! machine's config; its value reaches the tool only in the environment of
//! `apply`, as `TF_VAR_machine_user_data`, the way the OCI credentials do.
//!
//! The values are base64 because a `TF_VAR_*` value of a map is parsed as an
//! expression: base64 text needs no escaping, where a config (or a config
//! patch) holding `${` would otherwise be read as a template.
//!
//! The variable defaults to `{}`, so that runs that create nothing (`destroy`,
//! `show`) need no value; every instance refers to its entry through `try`,
//! and a precondition fails the plan of any instance whose entry is missing,
//! so that an apply without the values stops before it changes anything
//! instead of replacing instances with empty user data.

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::credentials::REDACTED;
use crate::{TofuError, WorkspacePlan};

/// The variable that carries every machine's user data.
pub const VARIABLE: &str = "machine_user_data";

/// The declaration of [`VARIABLE`].
pub(crate) fn declaration() -> Value {
    json!({ "type": "map(string)", "sensitive": true, "nullable": false, "default": {} })
}

/// The base64 user data of machine `id`, as an expression; null when the
/// variable has no entry for it, which only a run that creates nothing
/// evaluates: [`precondition`] stops any other.
pub(crate) fn reference(id: &str) -> String {
    format!("${{try(var.{VARIABLE}[\"{id}\"], null)}}")
}

/// The user data of machine `id` as text, decoded from [`reference`].
pub(crate) fn decoded_reference(id: &str) -> String {
    format!("${{try(base64decode(var.{VARIABLE}[\"{id}\"]), null)}}")
}

/// The `lifecycle` block of machine `id`'s instance: its plan fails unless
/// the variable holds its user data.
pub(crate) fn precondition(id: &str) -> Value {
    json!({
        "precondition": [{
            "condition": format!("${{contains(keys(var.{VARIABLE}), \"{id}\")}}"),
            "error_message": format!("the user data of machine {id} was not passed in TF_VAR_{VARIABLE}"),
        }]
    })
}

/// The user data of a plan's cloud machines, base64 by machine id. Its
/// `Debug` shows the machine ids only.
#[derive(Clone, Default)]
pub(crate) struct UserData {
    configs: BTreeMap<String, SecretString>,
}

impl fmt::Debug for UserData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.configs.keys()).finish()
    }
}

impl UserData {
    /// The user data of `plan`'s `oci` and `openstack` machines; each must
    /// have a machine config. `metal` machines have none: their configs go
    /// over the node API.
    pub(crate) fn of(plan: &WorkspacePlan) -> Result<UserData, TofuError> {
        let mut configs = BTreeMap::new();
        for machine in plan.machines.iter().filter(|machine| machine.provider != cms_model::Provider::Metal) {
            let config = machine.user_data.as_deref().ok_or_else(|| {
                TofuError::Invalid(format!("machine {} has no machine config to boot with", machine.id))
            })?;
            configs.insert(machine.id.clone(), SecretString::from(STANDARD.encode(config)));
        }
        Ok(UserData { configs })
    }

    /// `TF_VAR_machine_user_data` and its value, the JSON object of every
    /// machine's base64 user data; none when no machine has user data.
    pub(crate) fn env(&self) -> Option<(String, String)> {
        if self.configs.is_empty() {
            return None;
        }
        let map: serde_json::Map<String, Value> = self
            .configs
            .iter()
            .map(|(id, config)| (id.clone(), Value::String(config.expose_secret().to_string())))
            .collect();
        Some((format!("TF_VAR_{VARIABLE}"), Value::Object(map).to_string()))
    }

    /// A digest that changes when any machine's user data changes, and
    /// tells nothing about it; empty when there is no user data.
    pub(crate) fn digest(&self) -> String {
        if self.configs.is_empty() {
            return String::new();
        }
        let mut hasher = Sha256::new();
        hasher.update(b"cms-tofu user data v1\0");
        for (id, config) in &self.configs {
            hasher.update(id.as_bytes());
            hasher.update(b"=");
            hasher.update(config.expose_secret().as_bytes());
            hasher.update(b"\0");
        }
        hex::encode(hasher.finalize())
    }

    /// `text` with the user data replaced by [`REDACTED`]: the variable's
    /// whole value, and each config as base64, as text, as a JSON string and
    /// line by line; then every PEM block and its base64 ([`scrub_keys`]).
    pub(crate) fn redact(&self, text: &str) -> String {
        let mut text = text.to_string();
        if let Some((_, value)) = self.env() {
            text = text.replace(&value, REDACTED);
        }
        for encoded in self.configs.values() {
            let encoded = encoded.expose_secret();
            text = text.replace(encoded, REDACTED);
            let Ok(decoded) = STANDARD.decode(encoded) else { continue };
            let decoded = String::from_utf8_lossy(&decoded);
            if decoded.trim().len() < 8 {
                continue;
            }
            let quoted = Value::String(decoded.to_string()).to_string();
            text = text.replace(&quoted[1..quoted.len() - 1], REDACTED);
            text = text.replace(decoded.as_ref(), REDACTED);
            for line in decoded.lines().map(str::trim).filter(|line| line.len() >= 16) {
                text = text.replace(line, REDACTED);
            }
        }
        scrub_keys(&text)
    }
}

/// The base64 text of `-----BEGIN` at each of the three alignments: what
/// stays the same whatever bytes come before and after it.
pub const PEM_BASE64_MARKERS: [&str; 3] = ["LS0tLS1CRUdJ", "LS0tQkVHSU", "LS0tLUJFR0lO"];

/// `text` with every PEM block and every base64 run that holds one replaced
/// by [`REDACTED`], whoever printed it.
pub(crate) fn scrub_keys(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("-----BEGIN") {
        out.push_str(&rest[..start]);
        out.push_str(REDACTED);
        let block = &rest[start..];
        rest = match block.find("-----END") {
            Some(end) => {
                let after = &block[end + "-----END".len()..];
                match after.find("-----") {
                    Some(close) => &after[close + "-----".len()..],
                    None => "",
                }
            }
            None => "",
        };
    }
    out.push_str(rest);
    let is_base64 = |c: char| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=');
    let mut scrubbed = String::with_capacity(out.len());
    let mut run = String::new();
    for c in out.chars().chain(std::iter::once(' ')) {
        if is_base64(c) {
            run.push(c);
            continue;
        }
        if PEM_BASE64_MARKERS.iter().any(|marker| run.contains(marker)) {
            scrubbed.push_str(REDACTED);
        } else {
            scrubbed.push_str(&run);
        }
        run.clear();
        scrubbed.push(c);
    }
    scrubbed.pop();
    scrubbed
}

#[cfg(test)]
mod tests {
    use cms_model::{Provider, Role};

    use super::*;
    use crate::MachinePlan;

    const CONFIG: &str = "machine:\n  ca:\n    crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t\n    key: c2VjcmV0LWtleS1tYXRlcmlhbC0wMTIzNDU2Nzg5\n";

    fn plan(provider: Provider, user_data: Option<&str>) -> WorkspacePlan {
        WorkspacePlan {
            tenant: "acme".into(),
            machines: vec![MachinePlan {
                id: "cp-0".into(),
                group: "cp".into(),
                index: 0,
                role: Role::ControlPlane,
                provider,
                shape: "s".into(),
                provider_config: Default::default(),
                host: None,
                user_data: user_data.map(str::to_string),
            }],
        }
    }

    #[test]
    fn the_environment_carries_base64_by_machine_and_debug_names_machines_only() {
        let user_data = UserData::of(&plan(Provider::OpenStack, Some(CONFIG))).unwrap();
        let (name, value) = user_data.env().unwrap();
        assert_eq!(name, "TF_VAR_machine_user_data");
        let map: serde_json::Map<String, Value> = serde_json::from_str(&value).unwrap();
        assert_eq!(STANDARD.decode(map["cp-0"].as_str().unwrap()).unwrap(), CONFIG.as_bytes());
        assert_eq!(format!("{user_data:?}"), r#"["cp-0"]"#);
        assert_eq!(user_data.digest().len(), 64);
    }

    #[test]
    fn metal_has_none_and_a_cloud_machine_without_a_config_is_refused() {
        let metal = UserData::of(&plan(Provider::Metal, None)).unwrap();
        assert!(metal.env().is_none());
        assert_eq!(metal.digest(), "");
        assert!(matches!(UserData::of(&plan(Provider::Oci, None)), Err(TofuError::Invalid(_))));
    }

    #[test]
    fn redaction_covers_every_form() {
        let user_data = UserData::of(&plan(Provider::Oci, Some(CONFIG))).unwrap();
        let encoded = STANDARD.encode(CONFIG);
        let quoted = Value::String(CONFIG.into()).to_string();
        let text =
            format!("a {encoded} b {CONFIG} c {quoted} d key: c2VjcmV0LWtleS1tYXRlcmlhbC0wMTIzNDU2Nzg5 e");
        let out = user_data.redact(&text);
        for leaked in ["LS0t", "c2VjcmV0LWtleS", &encoded[..20]] {
            assert!(!out.contains(leaked), "{leaked} in {out}");
        }
        assert!(out.starts_with("a <redacted> b"), "{out}");
    }

    #[test]
    fn pem_blocks_and_their_base64_are_scrubbed_at_every_alignment() {
        let pem = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----";
        assert_eq!(scrub_keys(&format!("x {pem} y")), "x <redacted> y");
        assert_eq!(scrub_keys("cut -----BEGIN RSA"), "cut <redacted>");
        for prefix in ["", "a", "ab"] {
            let encoded = STANDARD.encode(format!("{prefix}{pem}"));
            let out = scrub_keys(&format!("value \"{encoded}\" end"));
            assert_eq!(out, "value \"<redacted>\" end");
        }
        assert_eq!(scrub_keys("nothing here: LS0tLS0= plain"), "nothing here: LS0tLS0= plain");
    }
}

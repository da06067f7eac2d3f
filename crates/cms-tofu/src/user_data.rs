//! Cloud user data: the machine configs that `oci` and `openstack` instances
//! boot with. They hold the tenant's CA keys, so no file the driver writes
//! holds them. Every machine of a node group boots the same config, so the
//! configuration declares one sensitive `string` variable per node group,
//! [`variable`] (`machine_user_data_<group>`), holding the base64 of the
//! group's config; its value reaches the tool only in the environment of
//! `apply`, as `TF_VAR_machine_user_data_<group>`, the way the OCI
//! credentials do.
//!
//! One environment string holds one config: Linux refuses to start a
//! process with a string over 128 KiB ([`MAX_ENV_STRING`], `MAX_ARG_STRLEN`),
//! and one string of every machine's config exceeded it from a few dozen
//! machines on. A group whose config cannot fit is refused with an error
//! that says so, before anything runs.
//!
//! The values are base64 as OCI takes them, and as they were when one map
//! carried them, so that existing instances see no change.
//!
//! The variables default to null, so that runs that create nothing
//! (`destroy`, `show`) need no value; every instance reads its group's
//! variable, null when unset, and a precondition fails the plan of any instance
//! whose variable is unset, so that an apply without the values stops
//! before it changes anything instead of replacing instances with empty
//! user data.

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::credentials::REDACTED;
use crate::{MachinePlan, TofuError, WorkspacePlan};

/// The prefix of the variables that carry the user data, one per node
/// group: `machine_user_data_<group>`.
pub const VARIABLE_PREFIX: &str = "machine_user_data_";

/// The longest string of a process's environment, `NAME=value` with its
/// terminating NUL: Linux's `MAX_ARG_STRLEN`, 32 pages of 4 KiB.
pub const MAX_ENV_STRING: usize = 128 * 1024;

/// The variable of node group `group`'s user data. Group names are DNS
/// labels, which are identifiers once prefixed.
pub(crate) fn variable(group: &str) -> String {
    format!("{VARIABLE_PREFIX}{group}")
}

/// The declaration of a [`variable`]: sensitive, null unless set.
pub(crate) fn declaration() -> Value {
    json!({ "type": "string", "sensitive": true, "nullable": true, "default": null })
}

/// The base64 user data of `machine`, as an expression: its group's
/// variable, null when unset, which only a run that creates nothing
/// evaluates: [`precondition`] stops any other.
pub(crate) fn reference(machine: &MachinePlan) -> String {
    format!("${{var.{}}}", variable(&machine.group))
}

/// The user data of `machine` as text, decoded from [`reference`].
pub(crate) fn decoded_reference(machine: &MachinePlan) -> String {
    format!("${{try(base64decode(var.{}), null)}}", variable(&machine.group))
}

/// The `lifecycle` block of `machine`'s instance: its plan fails unless its
/// group's variable holds the user data.
pub(crate) fn precondition(machine: &MachinePlan) -> Value {
    let variable = variable(&machine.group);
    json!({
        "precondition": [{
            "condition": format!("${{var.{variable} != null}}"),
            "error_message": format!("the user data of machine {} was not passed in TF_VAR_{variable}", machine.id),
        }]
    })
}

/// The user data of a plan's cloud machines: the base64 config of each node
/// group. Its `Debug` shows the group names only.
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
    /// have a machine config, the same as the other machines of its group,
    /// small enough for one environment string. `metal` machines have none:
    /// their configs go over the node API.
    pub(crate) fn of(plan: &WorkspacePlan) -> Result<UserData, TofuError> {
        let mut configs: BTreeMap<String, SecretString> = BTreeMap::new();
        if plan.network.instances_held {
            // No instance is made, and none is kept: nothing boots.
            return Ok(UserData { configs });
        }
        for machine in plan.machines.iter().filter(|machine| machine.provider != cms_model::Provider::Metal) {
            let config = machine.user_data.as_deref().ok_or_else(|| {
                TofuError::Invalid(format!("machine {} has no machine config to boot with", machine.id))
            })?;
            let encoded = STANDARD.encode(config);
            if let Some(known) = configs.get(&machine.group) {
                if known.expose_secret() != encoded {
                    return Err(TofuError::Invalid(format!(
                        "the machines of node group {} have different machine configs; they must share one",
                        machine.group
                    )));
                }
                continue;
            }
            // `TF_VAR_<variable>=<value>` and its NUL.
            let size = "TF_VAR_".len() + variable(&machine.group).len() + 1 + encoded.len() + 1;
            if size > MAX_ENV_STRING {
                return Err(TofuError::Invalid(format!(
                    "the machine config of node group {} is {} bytes, {size} as the tool's variable: \
                     more than the {MAX_ENV_STRING} bytes one environment variable can hold",
                    machine.group,
                    config.len()
                )));
            }
            configs.insert(machine.group.clone(), SecretString::from(encoded));
        }
        Ok(UserData { configs })
    }

    /// `TF_VAR_machine_user_data_<group>` and its value, the base64 of the
    /// group's config, for each node group with user data.
    pub(crate) fn env(&self) -> Vec<(String, String)> {
        self.configs
            .iter()
            .map(|(group, config)| {
                (format!("TF_VAR_{}", variable(group)), config.expose_secret().to_string())
            })
            .collect()
    }

    /// A digest that changes when any group's user data changes, and tells
    /// nothing about it; empty when there is no user data.
    pub(crate) fn digest(&self) -> String {
        if self.configs.is_empty() {
            return String::new();
        }
        let mut hasher = Sha256::new();
        hasher.update(b"cms-tofu user data v2\0");
        for (group, config) in &self.configs {
            hasher.update(group.as_bytes());
            hasher.update(b"=");
            hasher.update(config.expose_secret().as_bytes());
            hasher.update(b"\0");
        }
        hex::encode(hasher.finalize())
    }

    /// `text` with the user data replaced by [`REDACTED`]: each config as
    /// base64, as text, as a JSON string and line by line; then every PEM
    /// block and its base64 ([`scrub_keys`]).
    pub(crate) fn redact(&self, text: &str) -> String {
        let mut text = text.to_string();
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

    const CONFIG: &str = "machine:\n  ca:\n    crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t\n    key: c2VjcmV0LWtleS1tYXRlcmlhbC0wMTIzNDU2Nzg5\n";

    fn machine(group: &str, index: u32, provider: Provider, user_data: Option<&str>) -> MachinePlan {
        MachinePlan {
            id: format!("{group}-{index}"),
            group: group.into(),
            index,
            role: if group == "cp" { Role::ControlPlane } else { Role::Worker },
            provider,
            shape: "s".into(),
            provider_config: Default::default(),
            host: None,
            user_data: user_data.map(str::to_string),
        }
    }

    fn plan(provider: Provider, user_data: Option<&str>) -> WorkspacePlan {
        WorkspacePlan {
            tenant: "acme".into(),
            machines: vec![machine("cp", 0, provider, user_data)],
            ..Default::default()
        }
    }

    /// A config of about `size` bytes shaped like a Talos one: lines of
    /// base64 key material that differ by group.
    pub(crate) fn large_config(group: &str, size: usize) -> String {
        let mut config = format!("version: v1alpha1\n# {group}\nmachine:\n  ca:\n");
        let mut line = 0u64;
        while config.len() < size {
            let digest = Sha256::digest(format!("{group}/{line}").as_bytes());
            config.push_str(&format!("    key: {}\n", STANDARD.encode(digest)));
            line += 1;
        }
        config
    }

    #[test]
    fn the_environment_carries_one_base64_config_per_group_and_debug_names_groups_only() {
        let user_data = UserData::of(&plan(Provider::OpenStack, Some(CONFIG))).unwrap();
        let env = user_data.env();
        assert_eq!(env.len(), 1);
        let (name, value) = &env[0];
        assert_eq!(name, "TF_VAR_machine_user_data_cp");
        assert_eq!(STANDARD.decode(value).unwrap(), CONFIG.as_bytes());
        assert_eq!(format!("{user_data:?}"), r#"["cp"]"#);
        assert_eq!(user_data.digest().len(), 64);
    }

    #[test]
    fn no_environment_string_of_a_43_machine_tenant_exceeds_the_limit() {
        let control_plane = large_config("cp", 48 * 1024);
        let workers = large_config("workers", 48 * 1024);
        let mut machines: Vec<MachinePlan> =
            (0..3).map(|index| machine("cp", index, Provider::Oci, Some(&control_plane))).collect();
        machines.extend((0..40).map(|index| machine("workers", index, Provider::Oci, Some(&workers))));
        let plan = WorkspacePlan { tenant: "acme".into(), machines, ..Default::default() };
        let env = UserData::of(&plan).unwrap().env();
        let names: Vec<&str> = env.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["TF_VAR_machine_user_data_cp", "TF_VAR_machine_user_data_workers"]);
        for (name, value) in &env {
            let size = name.len() + 1 + value.len() + 1;
            assert!(size <= MAX_ENV_STRING, "{name} is {size} bytes");
            assert!(size > 64 * 1024, "{name} holds one whole config: {size} bytes");
        }
    }

    #[test]
    fn a_group_with_two_configs_or_a_config_too_large_is_refused() {
        let mut two = plan(Provider::Oci, Some(CONFIG));
        two.machines.push(machine("cp", 1, Provider::Oci, Some("machine: {}\n")));
        let Err(TofuError::Invalid(message)) = UserData::of(&two) else { panic!("two configs in one group") };
        assert!(message.contains("node group cp have different machine configs"), "{message}");
        let large = large_config("cp", 100 * 1024);
        let Err(TofuError::Invalid(message)) = UserData::of(&plan(Provider::Oci, Some(&large))) else {
            panic!("a config too large for the environment")
        };
        assert!(message.contains("node group cp") && message.contains("131072 bytes"), "{message}");
        assert!(!message.contains("key:"), "{message}");
        let fits = large_config("cp", 90 * 1024);
        assert!(UserData::of(&plan(Provider::Oci, Some(&fits))).is_ok());
    }

    #[test]
    fn metal_has_none_and_a_cloud_machine_without_a_config_is_refused() {
        let metal = UserData::of(&plan(Provider::Metal, None)).unwrap();
        assert!(metal.env().is_empty());
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

//! Cloud credentials: taken only from the service's environment (`OCI_CLI_*`,
//! `OS_*`), handed to the tool's environment, fingerprinted for the
//! no-change check, and redacted from anything the tool prints.

use std::fmt;

use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};

use crate::providers::oci::CREDENTIAL_VARIABLES;

/// The prefixes of the environment variables that are credentials.
pub const CREDENTIAL_PREFIXES: [&str; 2] = ["OCI_CLI_", "OS_"];

/// What replaces a credential in tool output.
pub const REDACTED: &str = "<redacted>";

/// The credentials the tool runs with. Its `Debug` shows names only.
#[derive(Clone, Default)]
pub struct Credentials {
    vars: Vec<(String, SecretString)>,
    /// The connection string of the `pg` state backend (`PG_CONN_STR`):
    /// handed over and redacted like a credential, but not fingerprinted,
    /// since where the state lives is no input of the infrastructure.
    state_connection: Option<SecretString>,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.vars.iter().map(|(name, _)| name)).finish()
    }
}

impl Credentials {
    /// The credentials among `vars`, such as `std::env::vars()`.
    pub fn from_vars(vars: impl IntoIterator<Item = (String, String)>) -> Credentials {
        let mut vars: Vec<(String, SecretString)> = vars
            .into_iter()
            .filter(|(name, _)| CREDENTIAL_PREFIXES.iter().any(|prefix| name.starts_with(prefix)))
            .map(|(name, value)| (name, SecretString::from(value)))
            .collect();
        vars.sort_by(|a, b| a.0.cmp(&b.0));
        Credentials { vars, state_connection: None }
    }

    /// These credentials, with the state kept by the `pg` backend at
    /// `connection` (a `postgres://` URL).
    pub fn with_state_connection(mut self, connection: SecretString) -> Credentials {
        self.state_connection = Some(connection);
        self
    }

    /// The credentials of the service's environment.
    pub fn from_env() -> Credentials {
        Credentials::from_vars(std::env::vars())
    }

    /// The variables to set in the tool's environment: the credentials
    /// themselves, and the `TF_VAR_*` that feed the OCI provider's variables.
    pub(crate) fn child_env(&self) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> =
            self.vars.iter().map(|(name, value)| (name.clone(), value.expose_secret().to_string())).collect();
        for (variable, source) in CREDENTIAL_VARIABLES {
            if let Some((_, value)) = self.vars.iter().find(|(name, _)| name == source) {
                env.push((format!("TF_VAR_{variable}"), value.expose_secret().to_string()));
            }
        }
        if let Some(connection) = &self.state_connection {
            env.push(("PG_CONN_STR".into(), connection.expose_secret().to_string()));
        }
        env
    }

    /// A fingerprint that changes when any credential changes, and tells
    /// nothing about them.
    pub fn fingerprint(&self) -> String {
        let mut hasher = Sha256::new();
        hasher.update(b"cms-tofu credentials v1\0");
        for (name, value) in &self.vars {
            hasher.update(name.as_bytes());
            hasher.update(b"=");
            hasher.update(value.expose_secret().as_bytes());
            hasher.update(b"\0");
        }
        hex::encode(hasher.finalize())
    }

    /// `text` with every credential value replaced by [`REDACTED`].
    pub fn redact(&self, text: &str) -> String {
        let mut text = text.to_string();
        let connection = self.state_connection.iter().flat_map(|url| {
            let url = url.expose_secret();
            [Some(url), url_password(url)].into_iter().flatten()
        });
        let values = self.vars.iter().map(|(_, value)| value.expose_secret()).chain(connection);
        for value in values {
            if value.len() >= 4 {
                text = text.replace(value, REDACTED);
                // A multi-line key can appear line by line.
                for line in value.lines().map(str::trim).filter(|line| line.len() >= 8) {
                    text = text.replace(line, REDACTED);
                }
            }
        }
        text
    }
}

/// The password of a `scheme://user:password@host/...` URL.
fn url_password(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    let (userinfo, _) = rest.rsplit_once('@')?;
    let (_, password) = userinfo.split_once(':')?;
    (!password.is_empty()).then_some(password)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Credentials {
        Credentials::from_vars([
            (
                "OCI_CLI_KEY_CONTENT".to_string(),
                "-----BEGIN KEY-----\nc2VjcmV0c2VjcmV0\n-----END KEY-----".into(),
            ),
            ("OS_PASSWORD".to_string(), "hunter2hunter2".into()),
            ("PATH".to_string(), "/usr/bin".into()),
        ])
    }

    #[test]
    fn only_credential_prefixes_are_taken() {
        assert_eq!(format!("{:?}", sample()), r#"["OCI_CLI_KEY_CONTENT", "OS_PASSWORD"]"#);
    }

    #[test]
    fn the_state_connection_is_handed_over_and_redacted_but_not_fingerprinted() {
        let url = "postgres://cms:s3cretpass@db:5432/cms";
        let with = sample().with_state_connection(SecretString::from(url));
        assert!(with.child_env().contains(&("PG_CONN_STR".to_string(), url.to_string())));
        assert_eq!(with.fingerprint(), sample().fingerprint());
        let out = with.redact(&format!("dial {url} failed; password s3cretpass rejected"));
        assert!(!out.contains("s3cretpass"), "{out}");
        assert!(!format!("{with:?}").contains("s3cretpass"));
    }

    #[test]
    fn redaction_removes_values_and_key_lines() {
        let out = sample().redact("error: auth hunter2hunter2 failed near c2VjcmV0c2VjcmV0");
        assert!(!out.contains("hunter2"), "{out}");
        assert!(!out.contains("c2VjcmV0c2VjcmV0"), "{out}");
    }

    #[test]
    fn fingerprint_follows_values() {
        let other = Credentials::from_vars([("OS_PASSWORD".to_string(), "other".to_string())]);
        assert_ne!(sample().fingerprint(), other.fingerprint());
        assert_eq!(sample().fingerprint(), sample().fingerprint());
        assert!(!sample().fingerprint().contains("hunter2"));
    }

    #[test]
    fn oci_credentials_feed_the_provider_variables() {
        let env = sample().child_env();
        assert!(env.iter().any(|(name, _)| name == "TF_VAR_oci_private_key"));
    }
}

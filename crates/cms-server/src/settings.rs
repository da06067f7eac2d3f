//! The server's configuration, typed and layered: built-in defaults, then an
//! optional TOML file (`--config FILE`), then `CMS_*` environment variables.
//!
//! Keys are the variable names without the prefix, in lower case:
//! `CMS_DATA_DIR` and `data_dir = "..."` set the same value. Unknown `CMS_*`
//! variables are ignored, since later features read their own; unknown keys
//! in the file are refused, so a typo there is not silently dropped.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use config::{Config, Environment, File, FileFormat};
use secrecy::{ExposeSecret, SecretString};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};

/// Every key the file may hold.
/// The embedded SQLite database, inside the data directory.
pub(crate) const DATABASE_FILE: &str = "cms.db";

const KEYS: &[&str] = &[
    "listen",
    "data_dir",
    "database_url",
    "body_limit",
    "watch_heartbeat",
    "send_timeout",
    "event_retention",
    "watch_buffer",
    "audit_retention",
    "log",
    "log_format",
    "otlp_endpoint",
    "bootstrap_admin_password",
    "login_token_ttl",
    "login_signing_key",
    "insecure_disable_auth",
    "secure_cookies",
    "secrets_key",
    "secrets_key_id",
    "secrets_other_keys",
    "rekey_poll",
    "rekey_batch",
    "rekey_pause",
    "key_pool",
    "default_talos_version",
    "client_cert_ttl",
    "client_cert_max_ttl",
    "provisioning",
    "tofu_binary",
    "tofu_timeout",
    "tofu_plugin_dir",
    "tofu_cli_config",
    "tofu_state_key",
    "resync_interval",
    "reconcile_concurrency",
    "lease_ttl",
    "backup_url",
    "backup_schedule_tick",
    "public_url",
    "password_login",
    "sso_issuer",
    "sso_client_id",
    "sso_client_secret",
    "sso_scopes",
    "sso_username_claim",
    "sso_groups_claim",
    "sso_group_roles",
    "sso_default_role",
    "workload_issuers",
    "watches_per_identity",
    "request_rate_per_identity",
    "request_burst_per_identity",
];

/// The whole configuration of the server.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The address to listen on; port 0 picks a free port.
    pub(crate) listen: String,
    /// Where the embedded database and other local state live.
    pub(crate) data_dir: PathBuf,
    /// The database; `sqlite://<data_dir>/cms.db?mode=rwc` when unset.
    /// A secret: a PostgreSQL URL may carry a password.
    pub(crate) database_url: Option<SecretString>,
    /// The largest request body, in bytes.
    pub(crate) body_limit: usize,
    /// How often watch streams send a heartbeat, such as `15s`.
    #[serde(deserialize_with = "duration")]
    pub(crate) watch_heartbeat: Duration,
    /// How long sent data may stay unread by a client before its connection
    /// is closed, such as `60s`.
    #[serde(deserialize_with = "duration")]
    pub(crate) send_timeout: Duration,
    /// How many events the log keeps for watchers that resume.
    pub(crate) event_retention: u64,
    /// How many events a watcher may fall behind before it is disconnected.
    pub(crate) watch_buffer: usize,
    /// How many audit records are kept; the oldest go as new ones come.
    pub(crate) audit_retention: u64,
    /// The log filter, in `RUST_LOG` syntax; `RUST_LOG`, then `info`, when unset.
    pub(crate) log: Option<String>,
    /// `text` lines, or `json` objects with the current span's fields.
    pub(crate) log_format: crate::logging::LogFormat,
    /// Where traces go over OTLP/gRPC, such as `http://collector:4317`;
    /// no traces are exported when unset.
    pub(crate) otlp_endpoint: Option<String>,
    /// The first admin's password, used only when the store has no users.
    pub(crate) bootstrap_admin_password: Option<SecretString>,
    /// How long login tokens live, such as `1h`.
    #[serde(deserialize_with = "duration")]
    pub(crate) login_token_ttl: Duration,
    /// The key that signs login tokens, at least 32 bytes; generated once
    /// and kept in the store when unset.
    pub(crate) login_signing_key: Option<SecretString>,
    /// Serves every request without authentication, as admin. For
    /// benchmarks only, and refused unless listening on loopback.
    pub(crate) insecure_disable_auth: bool,
    /// Marks the console's session cookie `Secure`: set it when clients
    /// reach the server over TLS (a proxy in front terminating it).
    pub(crate) secure_cookies: bool,
    /// The key that seals tenant secrets at rest: standard base64 of 32
    /// bytes. When unset, the key file `<data_dir>/secrets.key` is used, and
    /// created with mode 0600 on first start.
    pub(crate) secrets_key: Option<SecretString>,
    /// The id of `secrets_key`, stored with every sealed blob.
    pub(crate) secrets_key_id: String,
    /// More sealing keys, `<id>=<base64>` separated by commas or white
    /// space, after `secrets_key` or the key file's: they open what they
    /// sealed, and `cms-server keys rotate` can make one the active key.
    pub(crate) secrets_other_keys: Option<SecretString>,
    /// How often each replica reads which key is active.
    #[serde(deserialize_with = "duration")]
    pub(crate) rekey_poll: Duration,
    /// How many blobs a re-sealing batch reads and writes.
    pub(crate) rekey_batch: u64,
    /// The wait between two re-sealing batches.
    #[serde(deserialize_with = "duration")]
    pub(crate) rekey_pause: Duration,
    /// How many service-account keys are generated ahead of tenant creates.
    pub(crate) key_pool: usize,
    /// The Talos version of a tenant that names none.
    pub(crate) default_talos_version: String,
    /// The lifetime of kubeconfig and talosconfig certificates, such as `24h`.
    #[serde(deserialize_with = "duration")]
    pub(crate) client_cert_ttl: Duration,
    /// The longest lifetime a download may ask for with `?ttl=`.
    #[serde(deserialize_with = "duration")]
    pub(crate) client_cert_max_ttl: Duration,
    /// Whether this server runs the reconcile controller; `false` serves the
    /// API only.
    pub(crate) provisioning: bool,
    /// The provisioning tool: OpenTofu, or any compatible CLI (Terraform 1.x).
    pub(crate) tofu_binary: PathBuf,
    /// The longest one run of the tool may take before its process group is
    /// stopped.
    #[serde(deserialize_with = "duration")]
    pub(crate) tofu_timeout: Duration,
    /// `init -plugin-dir` of the tool, for offline provider mirrors.
    pub(crate) tofu_plugin_dir: Option<PathBuf>,
    /// The tool's CLI configuration file (`TF_CLI_CONFIG_FILE`).
    pub(crate) tofu_cli_config: Option<PathBuf>,
    /// The secret OpenTofu state passphrases derive from; the secrets key's
    /// text when unset. Pinned before the sealing key rotates.
    pub(crate) tofu_state_key: Option<SecretString>,
    /// How often every tenant is reconciled even without a change.
    #[serde(deserialize_with = "duration")]
    pub(crate) resync_interval: Duration,
    /// How many tenants are reconciled at once.
    pub(crate) reconcile_concurrency: usize,
    /// On PostgreSQL: how long a replica's lease on a tenant lasts unless
    /// renewed, and so how soon another replica takes over from a dead one.
    #[serde(deserialize_with = "duration")]
    pub(crate) lease_ttl: Duration,
    /// Where tenants' etcd backups are kept: an S3-compatible bucket
    /// `s3://bucket/prefix`, configured by the `AWS_*` variables; the
    /// directory `<data_dir>/backups` when unset.
    pub(crate) backup_url: Option<String>,
    /// How often tenants' backup schedules are looked at: a scheduled
    /// backup starts up to this long after its time.
    #[serde(deserialize_with = "duration")]
    pub(crate) backup_schedule_tick: Duration,
    /// The URL clients reach the server at, such as `https://cms.example.com`;
    /// the console's sign-in returns to `<public_url>/sso/callback`. When
    /// unset, the request's `Host` is used.
    pub(crate) public_url: Option<String>,
    /// Whether local users may log in with a password.
    pub(crate) password_login: bool,
    /// The OpenID Connect provider's issuer URL; single sign-on is off when unset.
    pub(crate) sso_issuer: Option<String>,
    pub(crate) sso_client_id: Option<String>,
    pub(crate) sso_client_secret: Option<SecretString>,
    /// Scopes asked for besides `openid`, separated by spaces or commas.
    pub(crate) sso_scopes: String,
    /// The ID token claim that names the user.
    pub(crate) sso_username_claim: String,
    /// The ID token claim that lists the user's groups.
    pub(crate) sso_groups_claim: String,
    /// `group=role` pairs separated by commas.
    pub(crate) sso_group_roles: String,
    /// The role of a signed-in user whom no group grants one: a role, or `none`.
    pub(crate) sso_default_role: String,
    /// Trusted workload issuers.
    #[serde(deserialize_with = "crate::identity::workload_issuers")]
    pub(crate) workload_issuers: Vec<crate::identity::WorkloadIssuer>,
    /// How many watch streams (the API's and the console's) one identity
    /// may hold open.
    pub(crate) watches_per_identity: usize,
    /// Requests per second one identity may make to the API; 0 for no limit.
    pub(crate) request_rate_per_identity: u32,
    /// How many requests one identity may make at once above that rate.
    pub(crate) request_burst_per_identity: u32,
}

impl Default for Settings {
    fn default() -> Settings {
        let store = cms_store::StoreOptions::new(String::new());
        let service = cms_service::ServiceOptions::default();
        let secrets = cms_tenancy::SecretsOptions::default();
        let rekey = cms_tenancy::RekeyOptions::default();
        let limits = cms_auth::LimitOptions::default();
        Settings {
            listen: "0.0.0.0:8080".to_string(),
            data_dir: PathBuf::from("./data"),
            database_url: None,
            body_limit: service.body_limit,
            watch_heartbeat: service.watch_heartbeat,
            send_timeout: service.send_timeout,
            event_retention: store.event_retention,
            watch_buffer: store.watch_buffer,
            audit_retention: store.audit_retention,
            log: None,
            log_format: crate::logging::LogFormat::Text,
            otlp_endpoint: None,
            bootstrap_admin_password: None,
            login_token_ttl: Duration::from_secs(3600),
            login_signing_key: None,
            insecure_disable_auth: false,
            secure_cookies: false,
            secrets_key: None,
            secrets_key_id: "k1".to_string(),
            secrets_other_keys: None,
            rekey_poll: rekey.poll,
            rekey_batch: rekey.batch,
            rekey_pause: rekey.pause,
            key_pool: secrets.key_pool,
            default_talos_version: secrets.default_talos_version,
            client_cert_ttl: secrets.client_cert_ttl,
            client_cert_max_ttl: secrets.client_cert_max_ttl,
            provisioning: true,
            tofu_binary: PathBuf::from("tofu"),
            tofu_timeout: Duration::from_secs(30 * 60),
            tofu_plugin_dir: None,
            tofu_cli_config: None,
            tofu_state_key: None,
            resync_interval: Duration::from_secs(5 * 60),
            reconcile_concurrency: 4,
            lease_ttl: Duration::from_secs(30),
            backup_url: None,
            backup_schedule_tick: Duration::from_secs(10),
            public_url: None,
            password_login: true,
            sso_issuer: None,
            sso_client_id: None,
            sso_client_secret: None,
            sso_scopes: "email profile".to_string(),
            sso_username_claim: "email".to_string(),
            sso_groups_claim: "groups".to_string(),
            sso_group_roles: String::new(),
            sso_default_role: "none".to_string(),
            workload_issuers: Vec::new(),
            watches_per_identity: limits.watches_per_identity,
            request_rate_per_identity: limits.requests_per_second,
            request_burst_per_identity: limits.request_burst,
        }
    }
}

impl Settings {
    /// Reads the layers: defaults, the file when given, then `env` (the
    /// process environment, passed in so that tests need not touch it).
    pub(crate) fn load(file: Option<&Path>, env: HashMap<String, String>) -> anyhow::Result<Settings> {
        let mut builder = Config::builder();
        if let Some(path) = file {
            let source = File::from(path).format(FileFormat::Toml).required(true);
            check_keys(path, &Config::builder().add_source(source.clone()).build()?)?;
            builder = builder.add_source(source);
        }
        let env = env.into_iter().filter(|(name, _)| name.starts_with("CMS_")).collect();
        builder = builder.add_source(Environment::with_prefix("CMS").source(Some(env)));
        let settings: Settings =
            builder.build().and_then(Config::try_deserialize).context("invalid configuration")?;
        settings.check()?;
        Ok(settings)
    }

    /// How tenant secrets are made and documents issued.
    pub(crate) fn secrets_options(&self) -> cms_tenancy::SecretsOptions {
        cms_tenancy::SecretsOptions {
            default_talos_version: self.default_talos_version.clone(),
            client_cert_ttl: self.client_cert_ttl,
            client_cert_max_ttl: self.client_cert_max_ttl,
            key_pool: self.key_pool,
        }
    }

    /// How stored blobs are re-sealed after the active key changes.
    pub(crate) fn rekey_options(&self) -> cms_tenancy::RekeyOptions {
        cms_tenancy::RekeyOptions { poll: self.rekey_poll, batch: self.rekey_batch, pause: self.rekey_pause }
    }

    /// The sealing key file, used when no key is configured.
    pub(crate) fn secrets_key_file(&self) -> PathBuf {
        self.data_dir.join("secrets.key")
    }

    /// The URL of the store: `CMS_DATABASE_URL`, or SQLite's
    /// [`DATABASE_FILE`] in the data directory.
    pub(crate) fn database_url(&self) -> String {
        match &self.database_url {
            Some(url) => url.expose_secret().to_string(),
            None => format!("sqlite://{}/{DATABASE_FILE}?mode=rwc", self.data_dir.display()),
        }
    }

    /// Whether the store is PostgreSQL: multi-replica mode.
    pub(crate) fn is_postgres(&self) -> bool {
        let url = self.database_url();
        url.starts_with("postgres://") || url.starts_with("postgresql://")
    }

    fn check(&self) -> anyhow::Result<()> {
        let url = self.database_url();
        if !url.starts_with("sqlite:") && !self.is_postgres() {
            bail!(
                "CMS_DATABASE_URL must be a sqlite:// or postgres:// URL, got one starting with {:?}",
                scheme(&url)
            );
        }
        if let Some(url) = &self.backup_url
            && !url.starts_with("s3://")
        {
            bail!("CMS_BACKUP_URL must be an s3:// URL, got one starting with {:?}", scheme(url));
        }
        if self.backup_schedule_tick < Duration::from_millis(100) {
            anyhow::bail!("CMS_BACKUP_SCHEDULE_TICK must be at least 100ms");
        }
        if self.lease_ttl < Duration::from_secs(1) {
            bail!("CMS_LEASE_TTL must be at least 1s");
        }
        if self.watches_per_identity == 0 {
            bail!(
                "CMS_WATCHES_PER_IDENTITY must be at least 1: the number of watch streams one user or token may hold open"
            );
        }
        if self.request_rate_per_identity > 0 && self.request_burst_per_identity == 0 {
            bail!(
                "CMS_REQUEST_BURST_PER_IDENTITY must be at least 1 while CMS_REQUEST_RATE_PER_IDENTITY is set \
                 (0 turns the rate off)"
            );
        }
        if self.body_limit == 0 {
            bail!("CMS_BODY_LIMIT must be at least 1 byte");
        }
        if self.watch_heartbeat.is_zero() {
            bail!("CMS_WATCH_HEARTBEAT must be longer than zero");
        }
        if self.send_timeout < Duration::from_millis(1)
            || self.send_timeout > Duration::from_secs(u32::MAX as u64 / 1000)
        {
            bail!("CMS_SEND_TIMEOUT must be between 1ms and 49 days");
        }
        if self.watch_buffer == 0 {
            bail!("CMS_WATCH_BUFFER must be at least 1");
        }
        if self.audit_retention == 0 {
            bail!("CMS_AUDIT_RETENTION must be at least 1");
        }
        if self.login_token_ttl.is_zero() {
            bail!("CMS_LOGIN_TOKEN_TTL must be longer than zero");
        }
        if let Some(key) = &self.login_signing_key
            && key.expose_secret().len() < cms_auth::LoginTokens::MIN_KEY_BYTES
        {
            bail!("CMS_LOGIN_SIGNING_KEY must be at least {} bytes", cms_auth::LoginTokens::MIN_KEY_BYTES);
        }
        if self.client_cert_ttl.is_zero() || self.client_cert_ttl > self.client_cert_max_ttl {
            bail!("CMS_CLIENT_CERT_TTL must be longer than zero and at most CMS_CLIENT_CERT_MAX_TTL");
        }
        if let Err(err) = cms_talos::TalosVersion::supported(&self.default_talos_version) {
            bail!("CMS_DEFAULT_TALOS_VERSION: {err}");
        }
        if self.tofu_timeout.is_zero() || self.resync_interval.is_zero() {
            bail!("CMS_TOFU_TIMEOUT and CMS_RESYNC_INTERVAL must be longer than zero");
        }
        if self.rekey_poll.is_zero() || self.rekey_batch == 0 {
            bail!("CMS_REKEY_POLL must be longer than zero and CMS_REKEY_BATCH at least 1");
        }
        crate::sealing::other_keys(self)?;
        if self.reconcile_concurrency == 0 {
            bail!("CMS_RECONCILE_CONCURRENCY must be at least 1");
        }
        if let Some(url) = &self.public_url
            && !(url.starts_with("https://") || url.starts_with("http://"))
        {
            bail!("CMS_PUBLIC_URL must be an http:// or https:// URL, got {url:?}");
        }
        crate::identity::options(self)?;
        if self.insecure_disable_auth && !self.listens_on_loopback() {
            bail!("CMS_INSECURE_DISABLE_AUTH is allowed only when CMS_LISTEN is a loopback address");
        }
        Ok(())
    }

    fn listens_on_loopback(&self) -> bool {
        match self.listen.parse::<std::net::SocketAddr>() {
            Ok(addr) => addr.ip().is_loopback(),
            Err(_) => self.listen.starts_with("localhost:"),
        }
    }
}

/// The part of a URL before `://`, which holds no credentials.
fn scheme(url: &str) -> &str {
    url.split_once("://").map_or("", |(scheme, _)| scheme)
}

fn check_keys(path: &Path, file: &Config) -> anyhow::Result<()> {
    let table: HashMap<String, config::Value> =
        file.clone().try_deserialize().with_context(|| format!("could not read {}", path.display()))?;
    let mut unknown: Vec<&str> = table.keys().map(String::as_str).filter(|key| !KEYS.contains(key)).collect();
    unknown.sort_unstable();
    if !unknown.is_empty() {
        bail!(
            "unknown keys in {}: {}; known keys are {}",
            path.display(),
            unknown.join(", "),
            KEYS.join(", ")
        );
    }
    Ok(())
}

/// Reads a duration such as `15s` or `1m 30s`.
fn duration<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(deserializer)?;
    humantime::parse_duration(&text)
        .map_err(|err| D::Error::custom(format!("{text:?} is not a duration such as 15s: {err}")))
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(name, value)| (name.to_string(), value.to_string())).collect()
    }

    #[test]
    fn defaults() {
        let settings = Settings::load(None, env(&[("HOME", "/root")])).unwrap();
        assert!(settings.bootstrap_admin_password.is_none() && !settings.insecure_disable_auth);
        assert_eq!(settings.login_token_ttl, Duration::from_secs(3600));
        assert_eq!(settings.listen, "0.0.0.0:8080");
        assert_eq!(settings.database_url(), "sqlite://./data/cms.db?mode=rwc");
        assert_eq!(settings.watch_heartbeat, Duration::from_secs(15));
        assert_eq!(settings.send_timeout, Duration::from_secs(60));
        assert_eq!(settings.body_limit, 1024 * 1024);
        assert!(settings.secrets_key.is_none());
        assert_eq!(settings.secrets_key_file(), PathBuf::from("./data/secrets.key"));
        assert_eq!((settings.secrets_key_id.as_str(), settings.key_pool), ("k1", 8));
        assert_eq!(settings.client_cert_ttl, Duration::from_secs(24 * 3600));
        assert_eq!(settings.client_cert_max_ttl, Duration::from_secs(24 * 3600));
        assert_eq!(settings.default_talos_version, "1.14.0");
    }

    #[test]
    fn secrets_settings() {
        let settings = Settings::load(
            None,
            env(&[
                ("CMS_SECRETS_KEY", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="),
                ("CMS_SECRETS_KEY_ID", "prod-2"),
                ("CMS_KEY_POOL", "0"),
                ("CMS_CLIENT_CERT_MAX_TTL", "168h"),
                ("CMS_DEFAULT_TALOS_VERSION", "1.9.6"),
            ]),
        )
        .unwrap();
        assert_eq!(settings.secrets_key_id, "prod-2");
        assert_eq!(settings.key_pool, 0);
        assert_eq!(settings.secrets_options().client_cert_max_ttl, Duration::from_secs(168 * 3600));
        assert!(!format!("{settings:?}").contains("AAAAAAAA"), "the key never prints");
        let message = |pairs: &[(&str, &str)]| format!("{:#}", Settings::load(None, env(pairs)).unwrap_err());
        assert!(message(&[("CMS_CLIENT_CERT_TTL", "48h")]).contains("CMS_CLIENT_CERT_MAX_TTL"));
        assert!(message(&[("CMS_DEFAULT_TALOS_VERSION", "1.7.0")]).contains("1.8 to 1.14"));
    }

    #[test]
    fn other_keys_rekeying_and_the_state_key() {
        let k2 = "AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=";
        let k3 = "AwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwM=";
        let settings = Settings::load(
            None,
            env(&[
                ("CMS_SECRETS_KEY", "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="),
                ("CMS_SECRETS_OTHER_KEYS", &format!("k2={k2}, k3={k3}")),
                ("CMS_REKEY_POLL", "1s"),
                ("CMS_REKEY_BATCH", "7"),
                ("CMS_TOFU_STATE_KEY", "pinned"),
            ]),
        )
        .unwrap();
        let (sealer, source) = crate::sealing::keyring(&settings).unwrap();
        assert_eq!(sealer.key_ids().collect::<Vec<_>>(), ["k1", "k2", "k3"]);
        assert_eq!(sealer.current_key_id(), "k1", "the first key is active until a rotation");
        assert!(source.contains("CMS_SECRETS_OTHER_KEYS"), "{source}");
        assert_eq!(
            (settings.rekey_options().poll, settings.rekey_options().batch),
            (Duration::from_secs(1), 7)
        );
        let state_key = crate::provisioning::state_key(&settings).unwrap();
        assert_eq!(state_key.expose_secret(), "pinned");
        assert!(!format!("{settings:?}").contains(k2), "other keys never print");
        let message = |pairs: &[(&str, &str)]| format!("{:#}", Settings::load(None, env(pairs)).unwrap_err());
        let broken = message(&[("CMS_SECRETS_OTHER_KEYS", &format!("k2:{k2}"))]);
        assert!(broken.contains("entry 1 is not `<id>=<base64>`") && !broken.contains(k2), "{broken}");
        assert!(message(&[("CMS_SECRETS_OTHER_KEYS", "k2=c2hvcnQ=")]).contains("32"));
        assert!(message(&[("CMS_REKEY_BATCH", "0")]).contains("CMS_REKEY_BATCH"));
        let twice = Settings::load(
            None,
            env(&[
                ("CMS_SECRETS_KEY", k2),
                ("CMS_SECRETS_KEY_ID", "k2"),
                ("CMS_SECRETS_OTHER_KEYS", &format!("k2={k3}")),
            ]),
        )
        .unwrap();
        let err = crate::sealing::keyring(&twice).expect_err("an id twice is refused");
        assert!(format!("{err:#}").contains("configured twice"), "{err:#}");
    }

    #[test]
    fn environment_overrides_the_file() {
        let mut file = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
        writeln!(file, "listen = \"127.0.0.1:9000\"\ndata_dir = \"/srv/cms\"\nbody_limit = 2048").unwrap();
        let settings = Settings::load(
            Some(file.path()),
            env(&[
                ("CMS_LISTEN", "127.0.0.1:0"),
                ("CMS_WATCH_HEARTBEAT", "2s"),
                ("CMS_SEND_TIMEOUT", "5s"),
                ("CMS_EVENT_RETENTION", "50"),
                ("CMS_AUDIT_RETENTION", "5000"),
                ("CMS_TOFU_BINARY", "/usr/bin/tofu"),
                ("CMS_BOOTSTRAP_ADMIN_PASSWORD", "12345"),
            ]),
        )
        .unwrap();
        assert_eq!(settings.listen, "127.0.0.1:0");
        assert_eq!(settings.data_dir, PathBuf::from("/srv/cms"));
        assert_eq!(settings.database_url(), "sqlite:///srv/cms/cms.db?mode=rwc");
        assert_eq!(settings.body_limit, 2048);
        assert_eq!(settings.watch_heartbeat, Duration::from_secs(2));
        assert_eq!(settings.send_timeout, Duration::from_secs(5));
        assert_eq!(settings.event_retention, 50);
        assert_eq!(settings.audit_retention, 5000);
    }

    #[test]
    fn refusals() {
        let message = |pairs: &[(&str, &str)]| format!("{:#}", Settings::load(None, env(pairs)).unwrap_err());
        let mysql = message(&[("CMS_DATABASE_URL", "mysql://u:secret@db/cms")]);
        assert!(mysql.contains("must be a sqlite:// or postgres:// URL"), "{mysql}");
        assert!(!mysql.contains("secret"), "{mysql}");
        let backups = message(&[("CMS_BACKUP_URL", "gs://u:secret@bucket/cms")]);
        assert!(
            backups.contains("CMS_BACKUP_URL must be an s3:// URL") && !backups.contains("secret"),
            "{backups}"
        );
        let s3 = Settings::load(None, env(&[("CMS_BACKUP_URL", "s3://backups/cms")])).unwrap();
        assert_eq!(s3.backup_url.as_deref(), Some("s3://backups/cms"));
        let postgres = env(&[("CMS_DATABASE_URL", "postgres://u:pw-7f3a9@db/cms")]);
        let settings = Settings::load(None, postgres).unwrap();
        assert!(settings.is_postgres());
        assert!(!format!("{settings:?}").contains("pw-7f3a9"), "the database password never prints");
        assert!(message(&[("CMS_WATCH_HEARTBEAT", "15")]).contains("not a duration"));
        assert!(message(&[("CMS_SEND_TIMEOUT", "0s")]).contains("CMS_SEND_TIMEOUT"));
        assert!(message(&[("CMS_WATCH_HEARTBEAT", "0s")]).contains("longer than zero"));
        assert!(message(&[("CMS_BODY_LIMIT", "lots")]).contains("invalid configuration"));
        assert!(
            message(&[("CMS_WATCHES_PER_IDENTITY", "0")])
                .contains("CMS_WATCHES_PER_IDENTITY must be at least 1")
        );
        assert!(message(&[("CMS_WATCHES_PER_IDENTITY", "-1")]).contains("invalid configuration"));
        let burst = message(&[("CMS_REQUEST_BURST_PER_IDENTITY", "0")]);
        assert!(burst.contains("CMS_REQUEST_BURST_PER_IDENTITY must be at least 1"), "{burst}");
        let off = env(&[("CMS_REQUEST_RATE_PER_IDENTITY", "0"), ("CMS_REQUEST_BURST_PER_IDENTITY", "0")]);
        assert_eq!(Settings::load(None, off).expect("no rate").request_rate_per_identity, 0);
        assert!(message(&[("CMS_LOGIN_SIGNING_KEY", "short")]).contains("at least 32 bytes"));
        let open = message(&[("CMS_INSECURE_DISABLE_AUTH", "true"), ("CMS_LISTEN", "0.0.0.0:8080")]);
        assert!(open.contains("loopback"), "{open}");
        let local = [("CMS_INSECURE_DISABLE_AUTH", "true"), ("CMS_LISTEN", "127.0.0.1:0")];
        assert!(Settings::load(None, env(&local)).unwrap().insecure_disable_auth);

        let mut file = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
        writeln!(file, "listn = \"127.0.0.1:9000\"").unwrap();
        let typo = format!("{:#}", Settings::load(Some(file.path()), HashMap::new()).unwrap_err());
        assert!(typo.contains("unknown keys") && typo.contains("listn"), "{typo}");
    }
}

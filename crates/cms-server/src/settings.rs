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

mod check;

const KEYS: &[&str] = &[
    "listen",
    "data_dir",
    "database_url",
    "body_limit",
    "watch_heartbeat",
    "watch_bookmark_interval",
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
    "metrics_tenant_labels",
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
    "cloud_public_addresses",
    "cloud_admin_cidrs",
    "openstack_floating_ip_pool",
    "resync_interval",
    "reconcile_concurrency",
    "drift_interval",
    "drift_concurrency",
    "drift_plans_per_interval",
    "lease_ttl",
    "state_lock_stale_after",
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
    "login_concurrency",
    "tokens_per_user",
    "max_group_count",
    "max_machines_per_tenant",
    "autoscaler_listen",
    "autoscaler_address",
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
    /// How often a watch that asked for bookmarks gets one at least, such
    /// as `60s`.
    #[serde(deserialize_with = "duration")]
    pub(crate) watch_bookmark_interval: Duration,
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
    /// Serves the `/metrics` series labelled with tenant names to anonymous
    /// callers too; else only callers with a valid bearer token see them.
    pub(crate) metrics_tenant_labels: bool,
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
    /// OCI: whether cloud instances and the load balancer of a made
    /// endpoint get public addresses, which the service then uses; else the
    /// service must reach the tenants' private subnets.
    pub(crate) cloud_public_addresses: bool,
    /// Where the service and the tenants' users reach the node API and the
    /// Kubernetes API from: CIDRs separated by commas or white space, which
    /// the tenants' security groups admit on 50000 and 6443; `0.0.0.0/0`
    /// when empty.
    pub(crate) cloud_admin_cidrs: String,
    /// OpenStack: the external network the floating IP of a made endpoint
    /// comes from; none keeps the load balancer's private address.
    pub(crate) openstack_floating_ip_pool: Option<String>,
    /// How often every tenant is reconciled even without a change.
    #[serde(deserialize_with = "duration")]
    pub(crate) resync_interval: Duration,
    /// How many tenants are reconciled at once.
    pub(crate) reconcile_concurrency: usize,
    /// How often each tenant's infrastructure is planned for drift (with
    /// a tenth of it as jitter); zero turns drift detection off.
    #[serde(deserialize_with = "duration")]
    pub(crate) drift_interval: Duration,
    /// Drift plans at once, across the service.
    pub(crate) drift_concurrency: usize,
    /// Drift plans started per interval, across the service.
    pub(crate) drift_plans_per_interval: usize,
    /// On PostgreSQL: how long a replica's lease on a tenant lasts unless
    /// renewed, and so how soon another replica takes over from a dead one.
    #[serde(deserialize_with = "duration")]
    pub(crate) lease_ttl: Duration,
    /// How long a tenant's tool state lock whose holder is gone is left
    /// alone before the replica that takes up the tenant releases it;
    /// three lease TTLs when unset.
    #[serde(deserialize_with = "optional_duration")]
    pub(crate) state_lock_stale_after: Option<Duration>,
    /// Where tenants' etcd backups are kept: an S3-compatible bucket
    /// `s3://bucket/prefix`, configured by the `AWS_*` variables; the
    /// directory `<data_dir>/backups` when unset.
    pub(crate) backup_url: Option<String>,
    /// How often tenants' backup schedules are looked at: a scheduled
    /// backup starts up to this long after its time.
    #[serde(deserialize_with = "duration")]
    pub(crate) backup_schedule_tick: Duration,
    /// Where the cluster autoscaler's `externalgrpc` service listens, such
    /// as `0.0.0.0:8086`; the service is off when unset.
    pub(crate) autoscaler_listen: Option<String>,
    /// The `host:port` tenants' autoscalers dial: written into the identity
    /// they download, and named by the service's certificate. The address
    /// listened on when unset (`localhost` for an unspecified IP).
    pub(crate) autoscaler_address: Option<String>,
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
    /// How many password checks of logins run at once; the cores the
    /// process may use when unset.
    pub(crate) login_concurrency: usize,
    /// How many API tokens one user may hold.
    pub(crate) tokens_per_user: usize,
    /// The largest `count` of one node group (and the most hosts a metal
    /// group lists).
    pub(crate) max_group_count: u32,
    /// The most machines a tenant may have: the sum of its node groups'
    /// counts.
    pub(crate) max_machines_per_tenant: u64,
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
            watch_bookmark_interval: service.watch_bookmark_interval,
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
            metrics_tenant_labels: service.metrics_tenant_labels,
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
            cloud_public_addresses: false,
            cloud_admin_cidrs: String::new(),
            openstack_floating_ip_pool: None,
            resync_interval: Duration::from_secs(5 * 60),
            reconcile_concurrency: 4,
            drift_interval: Duration::from_secs(30 * 60),
            drift_concurrency: 2,
            drift_plans_per_interval: 100,
            lease_ttl: Duration::from_secs(30),
            state_lock_stale_after: None,
            backup_url: None,
            backup_schedule_tick: Duration::from_secs(10),
            public_url: None,
            autoscaler_listen: None,
            autoscaler_address: None,
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
            login_concurrency: cms_auth::AuthOptions::default_login_concurrency(),
            tokens_per_user: cms_auth::AuthOptions::DEFAULT_TOKENS_PER_USER,
            max_group_count: cms_tenancy::DEFAULT_MAX_GROUP_COUNT,
            max_machines_per_tenant: store.max_machines_per_tenant,
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

    /// The administrative CIDRs of [`Settings::cloud_admin_cidrs`].
    pub(crate) fn admin_cidrs(&self) -> Vec<String> {
        let given = self.cloud_admin_cidrs.split([',', ' ', '\n', '\t']);
        given.filter(|cidr| !cidr.is_empty()).map(str::to_string).collect()
    }

    /// Whether the store is PostgreSQL: multi-replica mode.
    pub(crate) fn is_postgres(&self) -> bool {
        let url = self.database_url();
        url.starts_with("postgres://") || url.starts_with("postgresql://")
    }
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
fn optional_duration<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Duration>, D::Error> {
    duration(deserializer).map(Some)
}

fn duration<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(deserializer)?;
    humantime::parse_duration(&text)
        .map_err(|err| D::Error::custom(format!("{text:?} is not a duration such as 15s: {err}")))
}

#[cfg(test)]
mod tests;

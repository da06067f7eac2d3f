//! Tenant secrets: a bundle is generated and sealed when a tenant is
//! created, and opened again for the documents built from it (client
//! configs, machine configs, the break-glass export) and for the node API
//! credentials of the reconciler and the prober.
//!
//! The store only ever holds the sealed blob. The seal binds the tenant and
//! the purpose [`cms_talos::BUNDLE_PURPOSE`], so a blob copied to another tenant does not open.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use cms_model::FieldError;
use cms_store::Store;
use cms_talos::{MAX_TALOS_MINOR, Sealer, SecretsBundle, TalosVersion};

use crate::error::TenancyError;
use crate::key_pool::KeyPool;

/// How tenant secrets and the documents built from them are made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretsOptions {
    /// The Talos version a bundle is generated for when the tenant names none.
    pub default_talos_version: String,
    /// The lifetime of a client certificate when the request names none.
    pub client_cert_ttl: Duration,
    /// The longest lifetime a request may ask for with `?ttl=`.
    pub client_cert_max_ttl: Duration,
    /// How many service-account keys are kept ready; 0 generates each on demand.
    pub key_pool: usize,
}

impl SecretsOptions {
    /// 24 hours.
    pub const DEFAULT_CLIENT_CERT_TTL: Duration = Duration::from_secs(24 * 3600);
    /// 8 keys.
    pub const DEFAULT_KEY_POOL: usize = 8;

    /// The newest Talos version cms renders configs for, at patch 0.
    pub fn newest_talos_version() -> String {
        format!("1.{MAX_TALOS_MINOR}.0")
    }
}

impl Default for SecretsOptions {
    fn default() -> SecretsOptions {
        SecretsOptions {
            default_talos_version: SecretsOptions::newest_talos_version(),
            client_cert_ttl: SecretsOptions::DEFAULT_CLIENT_CERT_TTL,
            client_cert_max_ttl: SecretsOptions::DEFAULT_CLIENT_CERT_TTL,
            key_pool: SecretsOptions::DEFAULT_KEY_POOL,
        }
    }
}

/// The sealer, the key pool and the options: everything tenant secrets need.
pub struct Secrets {
    sealer: Sealer,
    pool: KeyPool,
    options: SecretsOptions,
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Secrets")
            .field("key_id", &self.sealer.current_key_id())
            .field("pool", &self.pool)
            .field("options", &self.options)
            .finish()
    }
}

impl Secrets {
    /// Checks the options and starts the key pool.
    pub fn new(sealer: Sealer, options: SecretsOptions) -> Result<Arc<Secrets>, String> {
        TalosVersion::supported(&options.default_talos_version)
            .map_err(|err| format!("the default Talos version: {err}"))?;
        if options.client_cert_ttl.is_zero() || options.client_cert_ttl > options.client_cert_max_ttl {
            return Err(format!(
                "the client certificate lifetime must be above zero and at most the longest allowed ({})",
                humantime::format_duration(options.client_cert_max_ttl)
            ));
        }
        let pool = KeyPool::start(options.key_pool);
        Ok(Arc::new(Secrets { sealer, pool, options }))
    }

    /// The options in force.
    pub fn options(&self) -> &SecretsOptions {
        &self.options
    }

    /// The sealer the bundles are sealed with, for other data kept under
    /// the same keys (etcd backups derive their keys from it).
    pub fn sealer(&self) -> &Sealer {
        &self.sealer
    }

    /// How many pre-generated keys are ready.
    pub fn keys_ready(&self) -> usize {
        self.pool.ready()
    }

    /// Stops refilling the key pool.
    pub fn stop(&self) {
        self.pool.stop();
    }

    /// The Talos version a new tenant's bundle is generated for: its own
    /// (checked with the tenant), else the default.
    pub(crate) fn talos_version(&self, wanted: Option<&str>) -> String {
        wanted.unwrap_or(&self.options.default_talos_version).to_string()
    }

    /// Generates a bundle for `tenant` and seals it. The service-account key
    /// comes from the pool; the rest takes milliseconds, off the async workers.
    pub(crate) async fn generate_sealed(
        self: &Arc<Self>,
        tenant: &str,
        talos_version: String,
    ) -> Result<Vec<u8>, TenancyError> {
        let key = self.pool.key().await?;
        let secrets = self.clone();
        let tenant = tenant.to_string();
        let sealed = tokio::task::spawn_blocking(move || -> Result<Vec<u8>, TenancyError> {
            let bundle = SecretsBundle::generate_with_key(&talos_version, key)?;
            Ok(secrets.sealer.seal_bundle(&tenant, &bundle)?)
        });
        sealed.await.map_err(|err| TenancyError::Task(err.to_string()))?
    }

    /// Opens the bundle of `tenant`: [`TenancyError::NoSecrets`] when the
    /// tenant has none (its secrets were dropped while it is being deleted).
    pub async fn open(&self, store: &dyn Store, tenant: &str) -> Result<SecretsBundle, TenancyError> {
        let sealed = store
            .secrets(tenant.to_string())
            .await?
            .ok_or_else(|| TenancyError::NoSecrets(tenant.to_string()))?;
        let bundle = self.sealer.open_bundle(tenant, &sealed)?;
        if let Ok(expiry) = bundle.earliest_ca_expiry() {
            certificate_expiry(expiry);
        }
        Ok(bundle)
    }
}

/// The name of the gauge of the earliest tenant CA expiry this process has
/// seen, for the service to describe.
pub const CERTIFICATE_EXPIRY_GAUGE: &str = "cms_certificate_expiry_timestamp_seconds";

/// Records the expiry of a tenant CA certificate: the gauge keeps the
/// earliest seen.
fn certificate_expiry(not_after_unix: i64) {
    use std::sync::atomic::{AtomicI64, Ordering};
    static EARLIEST: AtomicI64 = AtomicI64::new(i64::MAX);
    let earliest = EARLIEST.fetch_min(not_after_unix, Ordering::Relaxed).min(not_after_unix);
    metrics::gauge!(CERTIFICATE_EXPIRY_GAUGE).set(earliest as f64);
}

/// Refuses a Talos version that cms cannot render configs for, naming `field`.
pub(crate) fn check_talos_version(field: &str, version: &str) -> Result<(), FieldError> {
    TalosVersion::supported(version).map(|_| ()).map_err(|err| match err {
        cms_talos::TalosError::UnsupportedVersion { reason, .. } => {
            FieldError::new(field, format!("{version:?} is not supported: {reason}"))
        }
        other => FieldError::new(field, other.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cms_talos::SealingKey;

    fn sealer() -> Sealer {
        Sealer::new(SealingKey::generate("test").expect("a key"))
    }

    #[test]
    fn options_are_checked() {
        let options = SecretsOptions { key_pool: 0, ..SecretsOptions::default() };
        assert_eq!(options.default_talos_version, "1.14.0");
        assert!(Secrets::new(sealer(), options.clone()).is_ok());
        let old = SecretsOptions { default_talos_version: "1.7.0".into(), ..options.clone() };
        assert!(Secrets::new(sealer(), old).unwrap_err().contains("Talos"));
        let long = SecretsOptions { client_cert_ttl: Duration::from_secs(48 * 3600), ..options };
        assert!(Secrets::new(sealer(), long).unwrap_err().contains("at most"));
    }

    #[test]
    fn versions_outside_the_range_name_their_field() {
        let err = check_talos_version("spec.talosVersion", "1.7.0").unwrap_err();
        assert_eq!(err.field, "spec.talosVersion");
        assert!(err.to_string().contains("1.8 to 1.14"), "{err}");
        assert!(check_talos_version("spec.talosVersion", "1.9.6").is_ok());
    }
}

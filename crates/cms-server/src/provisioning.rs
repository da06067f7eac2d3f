//! The provisioning pipeline of the server: the driver (`cms-tofu`) with its
//! workspaces under `<data dir>/workspaces`, and the reconcile controller,
//! run as a task that stops with the server.

use std::sync::Arc;
use std::time::Duration;

use cms_reconciler::{Backoff, Context, ControllerOptions, DriftOptions, LeaseOptions, StateLockOptions};
use cms_store::{Audit, Leases, Sealed, SqlStore, StateLocks, Store};
use cms_tenancy::{
    SealedCredentials, SealedRotations, Secrets, StoreMachineConfigs, Tenancy, TenantKube, TenantNodeClient,
    talos_node_api,
};
use cms_tofu::{Credentials, ProcessRunner, StateBackend, Tofu, TofuOptions};
use secrecy::SecretString;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::settings::Settings;

/// How long one node API call of the reconciler may take, connecting
/// included.
const NODE_API_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one Kubernetes API call of the reconciler may take.
const KUBE_API_TIMEOUT: Duration = Duration::from_secs(10);

/// The running controller.
pub(crate) struct Provisioning {
    shutdown: CancellationToken,
    task: JoinHandle<()>,
}

/// The store, as each seam the controller takes.
type Seams = (Arc<dyn Store>, Arc<dyn Leases>, Arc<dyn StateLocks>, Arc<dyn Audit>, Arc<dyn Sealed>);

impl Provisioning {
    /// Starts the controller on `store`; cloud instances boot with configs
    /// rendered from `secrets`, and OpenTofu's states are encrypted with
    /// passphrases derived from `state_key` (checked by
    /// `tool_state::prepare`).
    pub(crate) fn start(
        settings: &Settings,
        state_key: Option<SecretString>,
        sql: Arc<SqlStore>,
        secrets: Arc<Secrets>,
    ) -> Provisioning {
        let (store, leases, locks, audit, sealed): Seams =
            (sql.clone(), sql.clone(), sql.clone(), sql.clone(), sql);
        let holder = cms_store::replica_id().to_string();
        let mut credentials = Credentials::from_env();
        let mut backend = StateBackend::Local;
        if settings.is_postgres() {
            // Any replica may apply any tenant: the state lives in the database.
            credentials = credentials.with_state_connection(SecretString::from(settings.database_url()));
            backend = StateBackend::Postgres;
        }
        tracing::info!(binary = %settings.tofu_binary.display(), ?credentials, "provisioning with the tool");
        let options = TofuOptions {
            binary: settings.tofu_binary.clone(),
            root: settings.data_dir.join("workspaces"),
            timeout: settings.tofu_timeout,
            grace: Duration::from_secs(10).min(settings.tofu_timeout),
            plugin_dir: settings.tofu_plugin_dir.clone(),
            cli_config: settings.tofu_cli_config.clone(),
            state_key,
            backend,
        };
        let tofu =
            Arc::new(Tofu::new(options, credentials, Arc::new(ProcessRunner)).with_holder(holder.clone()));
        let configs = Arc::new(StoreMachineConfigs::new(store.clone(), secrets.clone()));
        let tenancy = Arc::new(Tenancy::new(store.clone(), secrets.clone()));
        let kube = Arc::new(TenantKube::new(tenancy, KUBE_API_TIMEOUT));
        let rotations = Arc::new(SealedRotations::new(store.clone(), sealed, secrets.clone()));
        let credentials = Arc::new(SealedCredentials::new(store.clone(), secrets));
        let nodes = Arc::new(TenantNodeClient::new(talos_node_api(NODE_API_TIMEOUT), credentials));
        let ctx = Arc::new(Context {
            store,
            tofu,
            nodes,
            kube,
            configs: Some(configs),
            network: cms_tofu::Network {
                public_addresses: settings.cloud_public_addresses,
                admin_cidrs: settings.admin_cidrs(),
                floating_ip_pool: settings.openstack_floating_ip_pool.clone(),
                ..cms_tofu::Network::default()
            },
            resync: settings.resync_interval,
            // Several replicas share a PostgreSQL store: each tenant is
            // reconciled under its lease. One SQLite process needs none.
            leases: settings.is_postgres().then(|| LeaseOptions {
                leases,
                holder: holder.clone(),
                ttl: settings.lease_ttl,
            }),
            state_lock: Some(StateLockOptions {
                locks,
                audit: Some(audit),
                holder,
                stale_after: settings.state_lock_stale_after.unwrap_or(settings.lease_ttl * 3),
            }),
            rotations: Some(rotations),
        });
        let drift = DriftOptions {
            interval: settings.drift_interval,
            concurrency: settings.drift_concurrency,
            budget: settings.drift_plans_per_interval,
        };
        let controller = ControllerOptions {
            concurrency: settings.reconcile_concurrency,
            backoff: Backoff::default(),
            drift,
        };
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(cms_reconciler::run(ctx, controller, shutdown.clone()));
        Provisioning { shutdown, task }
    }

    /// Stops the controller, letting runs in flight finish for up to
    /// `grace`; a run still going then is abandoned, and its process killed.
    pub(crate) async fn stop(self, grace: Duration) {
        self.shutdown.cancel();
        let abort = self.task.abort_handle();
        if tokio::time::timeout(grace, self.task).await.is_err() {
            tracing::warn!("provisioning runs did not finish in {grace:?}; abandoning them");
            abort.abort();
        }
    }
}

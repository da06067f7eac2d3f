//! Running the server: lock the embedded store, open it, bind, serve, and on
//! SIGTERM or SIGINT close the watch streams and drain in-flight requests
//! before exiting.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use cms_auth::{
    AuthError, AuthOptions, Authenticator, BOOTSTRAP_ADMIN, FirstAdmin, LimitOptions, LoginsHeld,
    bootstrap_admin, create_first_admin,
};
use cms_backup::{BackupStore, Backups, DirStore, S3Store, Scheduler, SchedulerLease, SchedulerOptions};
use cms_prober::{Prober, ProberOptions, SystemClock};
use cms_service::{AppState, HttpService, ServiceOptions};
use cms_store::{DatabaseLock, SqlStore, StoreOptions};
use cms_tenancy::{
    RekeyLease, Rekeyer, SealedCredentials, Secrets, Tenancy, TenantNodeClient, talos_node_api,
};
use secrecy::{ExposeSecret, SecretSlice, SecretString};
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::task::JoinHandle;

use crate::provisioning::Provisioning;
use crate::sealing;
use crate::settings::{DATABASE_FILE, Settings};

/// How long in-flight requests get to finish after a shutdown signal.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(30);

/// How long a call of a tenant's Kubernetes API may take, for support bundles.
const KUBE_API_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long reading a machine's logs waits to connect to its node and, but
/// for a followed log, for each chunk.
const NODE_LOGS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Serves until a shutdown signal, then stops gracefully.
pub(crate) async fn run(settings: Settings) -> anyhow::Result<()> {
    // Listen for signals before anything else, so that one sent as soon as
    // the server reports that it listens is never missed.
    let mut signals = Signals::new()?;
    // The metrics recorder, before anything records.
    cms_service::metrics_handle();

    if let Some(warning) = crate::data_dir::prepare(&settings.data_dir)? {
        tracing::warn!("{warning}");
    }
    // Held until the server exits, so that a restore (or a second server)
    // cannot replace the embedded database under it.
    let _lock = match settings.is_postgres() {
        true => None,
        false => Some(DatabaseLock::acquire(&settings.database_url()).context("could not lock the store")?),
    };
    let mut store_options = StoreOptions::new(settings.database_url());
    store_options.event_retention = settings.event_retention;
    store_options.watch_buffer = settings.watch_buffer;
    store_options.audit_retention = settings.audit_retention;
    store_options.max_machines_per_tenant = settings.max_machines_per_tenant;
    // A first start on embedded SQLite will need the first admin: its
    // password is hashed while the store is created.
    let prepared = (settings.database_url.is_none() && !settings.data_dir.join(DATABASE_FILE).exists())
        .then(|| tokio::spawn(FirstAdmin::prepare(settings.bootstrap_admin_password.clone())));
    let store = SqlStore::open(&store_options).await.context("could not open the store")?;

    let sealer = sealing::sealer(&settings, store.as_ref()).await?;
    let secrets = Secrets::new(sealer, settings.secrets_options())
        .map_err(|err| anyhow::anyhow!("invalid secrets settings: {err}"))?;
    let login_key = sealing::login_signing_key(&settings, store.as_ref(), secrets.sealer()).await?;
    let auth = Arc::new(authenticator(&settings, store.clone(), login_key).await?);
    // The first admin is created while the server already serves; a login
    // that comes meanwhile waits for it.
    let held = auth.hold_logins().await;
    let password = settings.bootstrap_admin_password.clone();
    let first_admin = tokio::spawn(create_admin(auth.clone(), password, prepared, held));
    let mut first_admin = std::pin::pin!(async move {
        match first_admin.await {
            Ok(Ok(())) => std::future::pending().await,
            Ok(Err(err)) => err,
            Err(err) => anyhow::Error::new(err),
        }
    });
    let options = ServiceOptions {
        body_limit: settings.body_limit,
        watch_heartbeat: settings.watch_heartbeat,
        watch_bookmark_interval: settings.watch_bookmark_interval,
        send_timeout: settings.send_timeout,
        insecure_disable_auth: settings.insecure_disable_auth,
        // The server speaks plain HTTP; behind a TLS proxy,
        // `CMS_SECURE_COOKIES` marks the console's cookie `Secure`.
        secure_cookies: settings.secure_cookies,
        public_url: settings.public_url.clone(),
        metrics_tenant_labels: settings.metrics_tenant_labels,
        request_spans: crate::logging::request_spans(settings.otlp_endpoint.as_deref()),
    };
    if options.insecure_disable_auth {
        tracing::warn!(
            "authentication is DISABLED: every request is served as admin (CMS_INSECURE_DISABLE_AUTH)"
        );
    }
    let provisioning = match settings.provisioning {
        true => {
            let state_key = crate::tool_state::prepare(&settings, store.as_ref()).await?;
            Some(Provisioning::start(&settings, state_key, store.clone(), secrets.clone()))
        }
        false => None,
    };
    let tenancy = Tenancy::new(store.clone(), secrets.clone()).with_max_group_count(settings.max_group_count);
    let store_for_keys = store.clone();
    let backups = backups(&settings, store.clone(), secrets.clone())?;
    let schedules = schedules(&settings, store.clone(), backups.clone());
    // Support bundles read tenants' Kubernetes Nodes and events.
    let kube = Arc::new(cms_tenancy::TenantKube::new(Arc::new(tenancy.clone()), KUBE_API_TIMEOUT));
    // Machines' logs over the node API, with each tenant's credentials.
    let node_credentials = Arc::new(SealedCredentials::new(store.clone(), secrets.clone()));
    let nodes = Arc::new(TenantNodeClient::new(talos_node_api(NODE_LOGS_TIMEOUT), node_credentials));
    let autoscaler = crate::autoscaler::prepare(&settings, store.as_ref(), &secrets).await?;
    let (scaling, scaling_kube) = (tenancy.clone(), kube.clone());
    let mut state =
        AppState::new(tenancy, auth, store.clone(), prober(store.clone(), secrets.clone()), options)
            .with_nodes(nodes)
            .with_kube(kube)
            .with_backups(backups)
            .with_state_locks(store.clone())
            .with_rotations(Arc::new(cms_tenancy::SealedRotations::new(
                store.clone(),
                store.clone(),
                secrets.clone(),
            )));
    if let Some(autoscaler) = &autoscaler {
        state = state.with_autoscaler(autoscaler.access());
    }
    let shutdown = state.shutdown.clone();
    let autoscaler = match autoscaler {
        Some(autoscaler) => Some(autoscaler.start(scaling, scaling_kube, store, shutdown.clone())?),
        None => None,
    };
    let schedules = tokio::spawn(schedules.run(shutdown.clone()));
    let rekeyer = rekeyer(&settings, store_for_keys, secrets.clone());
    let stop = shutdown.clone();
    let rekeying = tokio::spawn(rekeyer.run(async move { stop.cancelled().await }));
    let mut server = HttpService::start(&settings.listen, state, DRAIN)
        .with_context(|| format!("could not listen on {}", settings.listen))?;
    tracing::info!("listening on {}", addresses(server.addrs()));

    tokio::select! {
        result = server.stopped() => {
            result.context("the server failed")?;
            anyhow::bail!("the server stopped without a shutdown signal");
        }
        err = &mut first_admin => return Err(err.context("could not create the first admin")),
        name = signals.next() => tracing::info!(signal = name, "shutting down"),
    }
    shutdown.cancel();
    if let Some(provisioning) = provisioning {
        provisioning.stop(DRAIN).await;
    }
    // A scheduled backup under way finishes, within the drain time.
    let abort = schedules.abort_handle();
    if tokio::time::timeout(DRAIN, schedules).await.is_err() {
        abort.abort();
    }
    rekeying.abort();
    if let Some(autoscaler) = autoscaler {
        let _ = tokio::time::timeout(DRAIN, autoscaler.stopped()).await;
    }
    secrets.stop();
    server.stop().await.context("the server failed")?;
    tracing::info!("stopped");
    Ok(())
}

/// Follows the active sealing key and re-seals stored blobs with it; on
/// PostgreSQL, the replica that holds the lease re-seals.
fn rekeyer(settings: &Settings, store: Arc<SqlStore>, secrets: Arc<Secrets>) -> Rekeyer {
    let lease = settings.is_postgres().then(|| RekeyLease {
        leases: store.clone(),
        holder: cms_store::replica_id().to_string(),
        ttl: settings.lease_ttl,
    });
    Rekeyer::new(store, secrets, settings.rekey_options(), lease)
}

/// The health prober: the real node API client and clock, with each
/// tenant's credentials from its sealed bundle.
fn prober(store: Arc<SqlStore>, secrets: Arc<Secrets>) -> Arc<Prober> {
    let options = ProberOptions::default();
    let credentials = Arc::new(SealedCredentials::new(store.clone(), secrets));
    let client = talos_node_api(options.deadline);
    Arc::new(Prober::new(store, credentials, client, Arc::new(SystemClock), options))
}

/// Tenants' etcd backups, in the store `CMS_BACKUP_URL` names or else in
/// `<data dir>/backups`, taken and restored with the real node API client,
/// each step of a transfer bounded by [`BACKUP_STEP_TIMEOUT`].
fn backups(settings: &Settings, store: Arc<SqlStore>, secrets: Arc<Secrets>) -> anyhow::Result<Backups> {
    let credentials = Arc::new(SealedCredentials::new(store.clone(), secrets.clone()));
    let nodes = Arc::new(TenantNodeClient::new(talos_node_api(BACKUP_STEP_TIMEOUT), credentials));
    Ok(Backups::new(store, nodes, secrets, backup_store(settings)?))
}

/// The tenants' backup schedules; on PostgreSQL, run by the replica that
/// holds the scheduler's lease.
fn schedules(settings: &Settings, store: Arc<SqlStore>, backups: Backups) -> Scheduler {
    let lease = settings.is_postgres().then(|| SchedulerLease {
        leases: store.clone(),
        holder: cms_store::replica_id().to_string(),
        ttl: settings.lease_ttl,
    });
    let options = SchedulerOptions { tick: settings.backup_schedule_tick, lease, audit: Some(store) };
    Scheduler::new(backups, options)
}

/// Where backups are kept: the S3-compatible bucket of `CMS_BACKUP_URL`
/// (with the `AWS_*` variables), or the directory `<data dir>/backups`.
fn backup_store(settings: &Settings) -> anyhow::Result<Arc<dyn BackupStore>> {
    let Some(url) = &settings.backup_url else {
        let root = settings.data_dir.join("backups");
        tracing::info!(directory = %root.display(), "tenants' backups are kept in a directory");
        return Ok(Arc::new(DirStore::new(root)));
    };
    let objects = S3Store::from_env(url).context("CMS_BACKUP_URL names no usable S3 store")?;
    tracing::info!(
        bucket = objects.bucket(),
        prefix = objects.prefix(),
        "tenants' backups are kept in an S3-compatible bucket"
    );
    Ok(Arc::new(objects))
}

/// How long each step of a node API call for a backup may take: the node
/// starting to answer, each chunk after the one before.
const BACKUP_STEP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The authenticator, with the login signing key.
async fn authenticator(
    settings: &Settings,
    store: Arc<SqlStore>,
    signing_key: SecretSlice<u8>,
) -> anyhow::Result<Authenticator> {
    let (sso, workloads) = crate::identity::options(settings)?;
    let options = AuthOptions {
        password_login: settings.password_login,
        sso,
        workloads,
        login_ttl: settings.login_token_ttl,
        limits: LimitOptions {
            watches_per_identity: settings.watches_per_identity,
            requests_per_second: settings.request_rate_per_identity,
            request_burst: settings.request_burst_per_identity,
        },
        login_concurrency: settings.login_concurrency,
        tokens_per_user: settings.tokens_per_user,
        signing_key: Some(signing_key),
        ..AuthOptions::default()
    };
    Authenticator::new(store, options).await.context("could not set up authentication")
}

/// The first admin on an empty store, with its password prepared ahead
/// when there is `prepared`; logins are held until it exists. A generated
/// password is logged this once.
async fn create_admin(
    auth: Arc<Authenticator>,
    password: Option<SecretString>,
    prepared: Option<JoinHandle<Result<FirstAdmin, AuthError>>>,
    _held: LoginsHeld,
) -> anyhow::Result<()> {
    let generated = match prepared {
        Some(prepared) => {
            let prepared = prepared.await.context("hashing the first admin's password")?;
            create_first_admin(&auth, prepared?).await
        }
        None => bootstrap_admin(&auth, password).await,
    };
    if let Some(password) = generated? {
        tracing::warn!(
            user = BOOTSTRAP_ADMIN,
            password = password.expose_secret(),
            "created the first admin with a generated password; it is shown only this once"
        );
    }
    Ok(())
}

fn addresses(addrs: &[SocketAddr]) -> String {
    addrs.iter().map(SocketAddr::to_string).collect::<Vec<_>>().join(", ")
}

/// SIGTERM and SIGINT.
struct Signals {
    terminate: Signal,
    interrupt: Signal,
}

impl Signals {
    fn new() -> anyhow::Result<Signals> {
        Ok(Signals {
            terminate: signal(SignalKind::terminate()).context("could not handle SIGTERM")?,
            interrupt: signal(SignalKind::interrupt()).context("could not handle SIGINT")?,
        })
    }

    /// Waits for either signal and names it.
    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.terminate.recv() => "SIGTERM",
            _ = self.interrupt.recv() => "SIGINT",
        }
    }
}

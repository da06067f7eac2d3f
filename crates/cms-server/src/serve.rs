//! Running the server: open the store, bind, serve, and on SIGTERM or SIGINT
//! close the watch streams and drain in-flight requests before exiting.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use cms_auth::{AuthOptions, Authenticator, BOOTSTRAP_ADMIN, bootstrap_admin};
use cms_service::{AppState, HttpService, Secrets, ServiceOptions};
use cms_store::{SqlStore, StoreOptions};
use secrecy::{ExposeSecret, SecretSlice};
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::provisioning::Provisioning;
use crate::sealing;
use crate::settings::Settings;

/// How long in-flight requests get to finish after a shutdown signal.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(30);

/// Serves until a shutdown signal, then stops gracefully.
pub(crate) async fn run(settings: Settings) -> anyhow::Result<()> {
    // Listen for signals before anything else, so that one sent as soon as
    // the server reports that it listens is never missed.
    let mut signals = Signals::new()?;
    // The metrics recorder, before anything records.
    cms_service::metrics_handle();

    std::fs::create_dir_all(&settings.data_dir)
        .with_context(|| format!("could not create the data directory {}", settings.data_dir.display()))?;
    let mut store_options = StoreOptions::new(settings.database_url());
    store_options.event_retention = settings.event_retention;
    store_options.watch_buffer = settings.watch_buffer;
    store_options.audit_retention = settings.audit_retention;
    let store = SqlStore::open(&store_options).await.context("could not open the store")?;

    let sealer = sealing::sealer(&settings, store.as_ref()).await?;
    let secrets = Secrets::new(sealer, settings.secrets_options())
        .map_err(|err| anyhow::anyhow!("invalid secrets settings: {err}"))?;
    let auth = authenticator(&settings, store.clone()).await?;
    let options = ServiceOptions {
        body_limit: settings.body_limit,
        watch_heartbeat: settings.watch_heartbeat,
        insecure_disable_auth: settings.insecure_disable_auth,
    };
    if options.insecure_disable_auth {
        tracing::warn!(
            "authentication is DISABLED: every request is served as admin (CMS_INSECURE_DISABLE_AUTH)"
        );
    }
    let provisioning = settings
        .provisioning
        .then(|| Provisioning::start(&settings, store.clone(), store.clone(), secrets.clone()));
    let state = AppState::new(store.clone(), Arc::new(auth), store, secrets.clone(), options);
    let shutdown = state.shutdown.clone();
    let mut server = HttpService::start(&settings.listen, state, DRAIN)
        .with_context(|| format!("could not listen on {}", settings.listen))?;
    tracing::info!("listening on {}", addresses(server.addrs()));

    tokio::select! {
        result = server.stopped() => {
            result.context("the server failed")?;
            anyhow::bail!("the server stopped without a shutdown signal");
        }
        name = signals.next() => tracing::info!(signal = name, "shutting down"),
    }
    shutdown.cancel();
    if let Some(provisioning) = provisioning {
        provisioning.stop(DRAIN).await;
    }
    secrets.stop();
    server.stop().await.context("the server failed")?;
    tracing::info!("stopped");
    Ok(())
}

/// The authenticator, and the first admin on an empty store. A generated
/// password is logged this once.
async fn authenticator(settings: &Settings, store: Arc<SqlStore>) -> anyhow::Result<Authenticator> {
    let options = AuthOptions {
        login_ttl: settings.login_token_ttl,
        signing_key: settings
            .login_signing_key
            .as_ref()
            .map(|key| SecretSlice::from(key.expose_secret().as_bytes().to_vec())),
        ..AuthOptions::default()
    };
    let auth = Authenticator::new(store, options).await.context("could not set up authentication")?;
    let password = settings.bootstrap_admin_password.clone();
    let generated = bootstrap_admin(&auth, password).await.context("could not create the first admin")?;
    if let Some(password) = generated {
        tracing::warn!(
            user = BOOTSTRAP_ADMIN,
            password = password.expose_secret(),
            "created the first admin with a generated password; it is shown only this once"
        );
    }
    Ok(auth)
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

//! The prober over a real store, the real node API client and fake nodes
//! on loopback ports, with TLS verified both ways.

mod cache;
mod probes;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use cms_fake_node::{FakeNode, FakeNodeOptions};
use cms_model::{Kind, UserRole};
use cms_nodeapi::{NodeCredentials, TalosNodeClient};
use cms_prober::{ManualClock, Prober, ProberOptions};
use cms_store::{Draft, Key, SqlStore, Store, StoreOptions};
use cms_talos::SecretsBundle;
use cms_tenancy::{TenancyError, TenantCredentials};
use serde_json::json;
use tempfile::TempDir;

/// A store, the tenants' bundles and a clock that tests move.
struct World {
    store: Arc<SqlStore>,
    bundles: Arc<Bundles>,
    clock: Arc<ManualClock>,
    _dir: TempDir,
}

/// The test's credential source: bundles kept in memory.
#[derive(Default)]
struct Bundles(Mutex<HashMap<String, SecretsBundle>>);

#[async_trait]
impl TenantCredentials for Bundles {
    async fn credentials(&self, tenant: &str) -> Result<NodeCredentials, TenancyError> {
        let bundle = self.0.lock().unwrap().get(tenant).cloned();
        let bundle = bundle.ok_or_else(|| TenancyError::NoSecrets(tenant.to_string()))?;
        NodeCredentials::for_tenant(&bundle, UserRole::Admin, Duration::from_secs(600))
            .map_err(|err| TenancyError::Credentials(err.to_string()))
    }
}

impl World {
    async fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("cms.db").display());
        let store = SqlStore::open(&StoreOptions::new(url)).await.unwrap();
        World { store, bundles: Arc::default(), clock: Arc::new(ManualClock::new(Utc::now())), _dir: dir }
    }

    fn prober(&self) -> Prober {
        let options = ProberOptions::default();
        let client = Arc::new(TalosNodeClient::new(options.deadline));
        Prober::new(self.store.clone(), self.bundles.clone(), client, self.clock.clone(), options)
    }

    /// A tenant whose bundle the prober can open.
    async fn tenant(&self, name: &str) -> SecretsBundle {
        let bundle = SecretsBundle::generate("1.14.0").unwrap();
        self.bundles.0.lock().unwrap().insert(name.to_string(), bundle.clone());
        self.tenant_without_credentials(name).await;
        bundle
    }

    async fn tenant_without_credentials(&self, name: &str) {
        let spec = json!({"kubernetesVersion": "1.31.1", "talosVersion": "1.14.0"});
        self.store.create(Key::tenant(name), Draft { spec, ..Draft::default() }).await.unwrap();
    }

    /// A machine as the reconciler would write it.
    async fn machine(&self, tenant: &str, id: &str, role: &str, address: Option<String>) {
        let spec = match address {
            Some(address) => json!({"managementAddress": address, "connected": true}),
            None => json!({"connected": false}),
        };
        let status = json!({"stage": "ready", "ready": true, "role": role});
        let draft = Draft { spec, status: Some(status), ..Draft::default() };
        self.store.create(Key::child(Kind::Machine, tenant, id), draft).await.unwrap();
    }
}

/// A fake node serving with `bundle`'s OS CA.
async fn fake(bundle: &SecretsBundle, version: &str) -> FakeNode {
    FakeNode::start(FakeNodeOptions::new(bundle.os_ca().clone()).version(version)).await.unwrap()
}

/// An address where nothing listens.
async fn dead_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

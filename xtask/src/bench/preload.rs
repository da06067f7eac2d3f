//! Preloading tenants straight into a server's data directory, before the
//! server starts. Creating them through the API would generate an RSA-4096
//! key per tenant, tens of minutes for 10,000; here every tenant gets a full
//! sealed secrets bundle, but the bundles share one service-account key.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use cms_model::Tenant;
use cms_store::{Draft, Key, SqlStore, Store, StoreOptions};
use cms_talos::{Sealer, SecretsBundle, ServiceAccountKey};

use super::workloads::{tenant_body, tenant_name};
use crate::shell::seconds;

/// How many tenants are prepared at once.
const PARALLEL: usize = 4;

/// Writes tenants `0..total` into the store of `data_dir`, sealed with the
/// key file the server will use.
pub(crate) async fn preload(data_dir: &Path, total: usize) -> Result<()> {
    let started = Instant::now();
    let url = format!("sqlite://{}?mode=rwc", data_dir.join("cms.db").display());
    let store = SqlStore::open(&StoreOptions::new(url)).await.context("opening the bench store")?;
    let sealer =
        Arc::new(Sealer::from_key_file(&data_dir.join("secrets.key")).context("the secrets key file")?);
    let key = ServiceAccountKey::generate().context("a service-account key")?.pem().clone();
    let mut next = 0;
    while next < total {
        let batch: Vec<usize> = (next..total.min(next + PARALLEL)).collect();
        next += batch.len();
        let mut tasks = Vec::new();
        for index in batch {
            let (store, sealer) = (store.clone(), sealer.clone());
            let key = ServiceAccountKey::from_pem(key.clone())?;
            tasks.push(tokio::spawn(async move { create(&store, &sealer, key, index).await }));
        }
        for task in tasks {
            task.await.context("a preload task")??;
        }
        if next % 1000 == 0 {
            println!("  stored {next} of {total} tenants in {}", seconds(started.elapsed()));
        }
    }
    let listed = store.list(cms_model::Kind::Tenant, None, cms_model::Page::default()).total;
    ensure!(listed as usize == total, "stored {listed} tenants, not {total}");
    Ok(())
}

async fn create(store: &SqlStore, sealer: &Sealer, key: ServiceAccountKey, index: usize) -> Result<()> {
    let name = tenant_name(index);
    let mut tenant: Tenant =
        cms_model::parse_json(&tenant_body(&name, serde_json::json!({"bench": "preload"}), None))?;
    tenant.prepare()?;
    let version = tenant.spec.talos_version.clone().context("bench tenants name a Talos version")?;
    let bundle = SecretsBundle::generate_with_key(&version, key)?;
    let draft = Draft {
        labels: tenant.metadata.labels,
        annotations: tenant.metadata.annotations,
        spec: serde_json::to_value(&tenant.spec)?,
        status: None,
        secrets: Some(sealer.seal_bundle(&name, &bundle)?),
    };
    store.create(Key::tenant(name), draft).await?;
    Ok(())
}

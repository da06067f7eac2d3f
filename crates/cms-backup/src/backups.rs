//! [`Backups`]: taking a tenant's etcd backup, listing, reading and
//! restoring it, one operation per tenant at a time.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use chrono::Utc;
use cms_model::Backup;
use cms_store::Store;
use cms_tenancy::{NodeClient, NodeRef, Secrets};
use futures_util::StreamExt;
use sha2::{Digest, Sha256};

use crate::error::BackupError;
use crate::format::{self, Binding};
use crate::nodes::{control_planes, snapshot_source};
use crate::outcome::{self, Trigger};
use crate::record::{file_key, is_id, new_id, record_key};
use crate::store::{BackupStore, ByteStream};

/// What a restore did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    pub backup: Backup,
    /// The control plane whose etcd started from the snapshot.
    pub machine: String,
}

/// Backups of tenants' etcd, kept encrypted in a [`BackupStore`] under keys
/// derived from the service's sealing key. Cloning is cheap.
#[derive(Clone)]
pub struct Backups {
    store: Arc<dyn Store>,
    nodes: Arc<dyn NodeClient>,
    secrets: Arc<Secrets>,
    objects: Arc<dyn BackupStore>,
    busy: Arc<Mutex<HashSet<String>>>,
}

impl std::fmt::Debug for Backups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backups").finish_non_exhaustive()
    }
}

impl Backups {
    /// Backups of the tenants in `store`, taken and restored through
    /// `nodes`, encrypted under `secrets`' sealer, kept in `objects`.
    pub fn new(
        store: Arc<dyn Store>,
        nodes: Arc<dyn NodeClient>,
        secrets: Arc<Secrets>,
        objects: Arc<dyn BackupStore>,
    ) -> Backups {
        Backups { store, nodes, secrets, objects, busy: Arc::default() }
    }

    /// The store of the tenants backed up.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Takes a backup of `tenant` now, from a healthy control plane, and
    /// records the outcome in the tenant's `status.backups` and the metrics.
    pub async fn take(&self, tenant: &str) -> Result<Backup, BackupError> {
        self.take_as(tenant, Trigger::OnDemand).await
    }

    /// [`Backups::take`], counted in the metrics under `trigger`.
    pub(crate) async fn take_as(&self, tenant: &str, trigger: Trigger) -> Result<Backup, BackupError> {
        let result = self.snapshot(tenant).await;
        outcome::record(self.store.as_ref(), tenant, trigger, &result).await;
        result
    }

    async fn snapshot(&self, tenant: &str) -> Result<Backup, BackupError> {
        let sources = control_planes(self.store.as_ref(), tenant)?;
        let _busy = self.hold(tenant)?;
        let (node, etcd_version) = snapshot_source(self.nodes.as_ref(), tenant, sources).await?;
        let talos_version = self.nodes.version(&node).await.ok();
        let time = Utc::now();
        let id = new_id(time);
        let node_error = |source| BackupError::Node { machine: node.machine.clone(), source };
        let chunks = self.nodes.etcd_snapshot(&node).await.map_err(node_error)?;
        let digest = Arc::new(Mutex::new((Sha256::new(), 0u64)));
        let hashing = digest.clone();
        let machine = node.machine.clone();
        let plain: ByteStream = Box::pin(chunks.map(move |chunk| {
            let chunk = chunk.map_err(|source| BackupError::Node { machine: machine.clone(), source })?;
            let mut digest = hashing.lock().expect("digest lock");
            digest.0.update(&chunk);
            digest.1 += chunk.len() as u64;
            Ok(Bytes::from(chunk))
        }));
        let sealed = format::encrypt(self.secrets.sealer(), Binding { tenant, id: &id }, plain)?;
        self.objects.put(&file_key(tenant, &id), sealed).await?;
        let (hasher, size) = std::mem::take(&mut *digest.lock().expect("digest lock"));
        let backup = Backup {
            id: id.clone(),
            tenant: tenant.to_string(),
            time,
            size,
            sha256: hex::encode(hasher.finalize()),
            machine: node.machine.clone(),
            talos_version,
            etcd_version: Some(etcd_version).filter(|version| !version.is_empty()),
        };
        let json = serde_json::to_vec_pretty(&backup).expect("a backup serializes");
        let record: ByteStream = Box::pin(futures_util::stream::iter([Ok(Bytes::from(json))]));
        self.objects.put(&record_key(tenant, &id), record).await?;
        tracing::info!(tenant, backup = %id, machine = %node.machine, size, "took an etcd backup");
        Ok(backup)
    }

    /// Where the backup `id` of `tenant` is kept, for people: its file's
    /// path or its object's `s3://` URL (the record lies beside it).
    pub fn location(&self, tenant: &str, id: &str) -> String {
        self.objects.locate(&file_key(tenant, id))
    }

    /// The backups of `tenant`, oldest first.
    pub async fn list(&self, tenant: &str) -> Result<Vec<Backup>, BackupError> {
        control_planes(self.store.as_ref(), tenant)?;
        let mut backups = Vec::new();
        for key in self.objects.list(&format!("{tenant}/")).await? {
            let Some(id) =
                key.strip_prefix(&format!("{tenant}/")).and_then(|rest| rest.strip_suffix(".json"))
            else {
                continue;
            };
            match self.record(tenant, id).await {
                Ok(backup) => backups.push(backup),
                Err(BackupError::BackupNotFound { .. }) => {}
                Err(err) => return Err(err),
            }
        }
        backups.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(backups)
    }

    /// The backup `id` of `tenant`.
    pub async fn get(&self, tenant: &str, id: &str) -> Result<Backup, BackupError> {
        control_planes(self.store.as_ref(), tenant)?;
        self.record(tenant, id).await
    }

    /// Deletes the backup `id` of `tenant`.
    pub async fn delete(&self, tenant: &str, id: &str) -> Result<Backup, BackupError> {
        let backup = self.get(tenant, id).await?;
        self.remove(tenant, id).await?;
        tracing::info!(tenant, backup = %id, "deleted an etcd backup");
        Ok(backup)
    }

    /// Removes a backup's objects: the record first, so that it is no
    /// longer listed, then the file.
    async fn remove(&self, tenant: &str, id: &str) -> Result<(), BackupError> {
        self.objects.delete(&record_key(tenant, id)).await?;
        self.objects.delete(&file_key(tenant, id)).await
    }

    /// Deletes the oldest backups of `tenant` beyond the newest `retain`;
    /// gives the ids deleted, oldest first.
    pub async fn prune(&self, tenant: &str, retain: usize) -> Result<Vec<String>, BackupError> {
        let backups = self.list(tenant).await?;
        let surplus = backups.len().saturating_sub(retain);
        let mut deleted = Vec::with_capacity(surplus);
        for backup in backups.into_iter().take(surplus) {
            self.remove(tenant, &backup.id).await?;
            deleted.push(backup.id);
        }
        if !deleted.is_empty() {
            tracing::info!(tenant, deleted = ?deleted, retain, "pruned etcd backups");
        }
        Ok(deleted)
    }

    /// The snapshot of the backup `id`, decrypted as it is read. Each chunk
    /// is verified before it is given; the stream ends with an error if the
    /// file was altered or its SHA-256 is not the recorded one.
    pub async fn download(&self, tenant: &str, id: &str) -> Result<(Backup, ByteStream), BackupError> {
        let backup = self.get(tenant, id).await?;
        let sealed = self.objects.get(&file_key(tenant, id)).await?;
        let plain = format::decrypt(self.secrets.sealer(), Binding { tenant, id }, sealed).await?;
        Ok((backup.clone(), checked(plain, backup)))
    }

    /// Reads the whole backup `id` and checks it: it decrypts, verifies,
    /// and has the recorded size and SHA-256.
    pub async fn verify(&self, tenant: &str, id: &str) -> Result<Backup, BackupError> {
        let (backup, mut plain) = self.download(tenant, id).await?;
        while let Some(chunk) = plain.next().await {
            chunk?;
        }
        Ok(backup)
    }

    /// Restores `tenant`'s etcd from the backup `id`: verifies the whole
    /// backup first, so that nothing reaches a node from a bad one, then
    /// uploads it to the first control plane (by name) whose etcd waits
    /// for its bootstrap and bootstraps etcd from it there.
    pub async fn restore(&self, tenant: &str, id: &str) -> Result<Restored, BackupError> {
        let targets = control_planes(self.store.as_ref(), tenant)?;
        let _busy = self.hold(tenant)?;
        let backup = self.verify(tenant, id).await?;
        let node = targets.into_iter().next().ok_or_else(|| BackupError::NoControlPlane {
            tenant: tenant.to_string(),
            why: "it has no control plane with an address".to_string(),
        })?;
        let store = self.store.as_ref();
        let message = format!("restoring backup {id} onto {}", node.machine);
        outcome::restoring(store, tenant, true, "Restoring", &message).await;
        let result = async {
            self.upload(&node, tenant, id).await?;
            self.nodes
                .bootstrap_recover(&node, false)
                .await
                .map_err(|source| BackupError::Node { machine: node.machine.clone(), source })
        }
        .await;
        match &result {
            Ok(()) => {
                let message = format!("etcd started from backup {id} on {}", node.machine);
                outcome::restoring(store, tenant, false, "Restored", &message).await;
                tracing::info!(tenant, backup = %id, machine = %node.machine, "restored etcd from a backup");
            }
            Err(err) => {
                let message = format!("restoring backup {id} onto {} failed: {err}", node.machine);
                outcome::restoring(store, tenant, false, "RestoreFailed", &message).await;
            }
        }
        result.map(|()| Restored { backup, machine: node.machine })
    }

    async fn upload(&self, node: &NodeRef, tenant: &str, id: &str) -> Result<(), BackupError> {
        let (_, plain) = self.download(tenant, id).await?;
        let upload =
            Box::pin(plain.map(|chunk| chunk.map(|bytes| bytes.to_vec()).map_err(BackupError::into_io)));
        self.nodes
            .etcd_recover(node, upload)
            .await
            .map_err(|source| BackupError::Node { machine: node.machine.clone(), source })
    }

    async fn record(&self, tenant: &str, id: &str) -> Result<Backup, BackupError> {
        let missing = || BackupError::BackupNotFound { tenant: tenant.to_string(), id: id.to_string() };
        if !is_id(id) {
            return Err(missing());
        }
        let mut json = Vec::new();
        let mut chunks = match self.objects.get(&record_key(tenant, id)).await {
            Ok(chunks) => chunks,
            Err(BackupError::NotFound(_)) => return Err(missing()),
            Err(err) => return Err(err),
        };
        while let Some(chunk) = chunks.next().await {
            json.extend_from_slice(&chunk?);
        }
        serde_json::from_slice(&json)
            .map_err(|_| BackupError::Malformed("the backup's record does not parse"))
    }

    /// Marks `tenant` busy until the guard drops; [`BackupError::Busy`]
    /// when it already is.
    fn hold(&self, tenant: &str) -> Result<Busy, BackupError> {
        let mut busy = self.busy.lock().expect("busy lock");
        if !busy.insert(tenant.to_string()) {
            return Err(BackupError::Busy(tenant.to_string()));
        }
        Ok(Busy { set: self.busy.clone(), tenant: tenant.to_string() })
    }
}

/// A tenant marked busy, until dropped.
struct Busy {
    set: Arc<Mutex<HashSet<String>>>,
    tenant: String,
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.set.lock().expect("busy lock").remove(&self.tenant);
    }
}

/// `plain`, failing at its end unless it had `backup`'s size and SHA-256.
fn checked(mut plain: ByteStream, backup: Backup) -> ByteStream {
    Box::pin(async_stream::try_stream! {
        let mut hasher = Sha256::new();
        let mut size = 0u64;
        while let Some(chunk) = plain.next().await {
            let chunk = chunk?;
            hasher.update(&chunk);
            size += chunk.len() as u64;
            yield chunk;
        }
        if size != backup.size || hex::encode(hasher.finalize()) != backup.sha256 {
            Err(BackupError::Checksum)?;
        }
    })
}

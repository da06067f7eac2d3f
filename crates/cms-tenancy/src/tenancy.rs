//! [`Tenancy`]: what each tenant operation means, callable without HTTP.
//! The API's handlers parse and authorize, then call these; a Rust tool on
//! `cms-tenancy` and `cms-store` gets the same checks and the same errors.
//! Every write here keeps the `service.io/*` annotations to the service
//! ([`crate::service_annotations`]); the reconciler writes them through the
//! store.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use cms_model::Tenant;
use cms_store::{Deleted, Key, Object, Store, StoreError};

use crate::error::TenancyError;
use crate::reservations::Reservations;
use crate::resources::{Writable, service_annotations};
use crate::secrets::Secrets;
use crate::user_data_limits::check_new_tenant;

/// Tenant operations over a store and the tenants' secrets. Cloning is cheap.
#[derive(Clone)]
pub struct Tenancy {
    store: Arc<dyn Store>,
    secrets: Arc<Secrets>,
    /// Tenant names whose create is under way on this process.
    creating: Reservations,
    /// The largest `count` (and metal host list) of one node group.
    max_group_count: u32,
}

/// The default of [`Tenancy::with_max_group_count`].
pub const DEFAULT_MAX_GROUP_COUNT: u32 = 100;

impl fmt::Debug for Tenancy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tenancy").field("secrets", &self.secrets).finish_non_exhaustive()
    }
}

impl Tenancy {
    pub fn new(store: Arc<dyn Store>, secrets: Arc<Secrets>) -> Tenancy {
        Tenancy {
            store,
            secrets,
            creating: Reservations::default(),
            max_group_count: DEFAULT_MAX_GROUP_COUNT,
        }
    }

    /// Caps the `count` of one node group, and the hosts of a metal group,
    /// at `max`: a write over it is [`TenancyError::Invalid`] naming the
    /// field. (The cap on a tenant's machines is the store's,
    /// `StoreOptions::max_machines_per_tenant`.)
    pub fn with_max_group_count(mut self, max: u32) -> Tenancy {
        self.max_group_count = max;
        self
    }

    /// The store the operations write to.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The tenants' secrets.
    pub fn secrets(&self) -> &Arc<Secrets> {
        &self.secrets
    }

    /// The object at `key`, or [`TenancyError::NotFound`] naming the tenant
    /// when that is what is missing.
    pub fn find(&self, key: &Key) -> Result<Arc<Object>, TenancyError> {
        find(self.store.as_ref(), key)
    }

    /// The tenant `name`, parsed.
    pub fn tenant(&self, name: &str) -> Result<Tenant, TenancyError> {
        let key = Key::tenant(name);
        self.find(&key)?.parse().map_err(TenancyError::corrupt(&key))
    }

    /// Creates a tenant with its inline node groups and a secrets bundle,
    /// generated and sealed here and written in the same transaction.
    ///
    /// A name already in the cache is refused before any cryptography, so a
    /// repeated create costs nothing; concurrent creates of one name on this
    /// process make the bundle once and the others are refused at once. The
    /// store's transaction still decides between replicas.
    pub async fn create_tenant(&self, mut tenant: Tenant) -> Result<Arc<Object>, TenancyError> {
        tenant.check()?;
        tenant.check_sizes(self.max_group_count, None)?;
        let wanted = std::mem::take(&mut tenant.metadata.annotations);
        tenant.metadata.annotations = service_annotations(&BTreeMap::new(), wanted)?;
        let name = tenant.metadata.name.clone();
        let key = Key::tenant(name.clone());
        if self.store.get(&key).is_some() {
            return Err(StoreError::AlreadyExists(key.to_string()).into());
        }
        let _reservation = self
            .creating
            .reserve(&name)
            .ok_or_else(|| TenancyError::Conflict(format!("{key} is being created")))?;
        let version = self.secrets.talos_version(tenant.spec.talos_version.as_deref());
        let sealed = self.secrets.generate_sealed(&name, version).await?;
        check_new_tenant(&self.secrets, &tenant, &sealed)?;
        let mut draft = tenant.draft()?;
        draft.secrets = Some(sealed);
        Ok(self.store.create(key, draft).await?)
    }

    /// Creates a node group or config patch in `tenant`.
    pub async fn create_child<R: Writable>(
        &self,
        tenant: &str,
        mut resource: R,
    ) -> Result<Arc<Object>, TenancyError> {
        resource.check()?;
        resource.check_sizes(self.max_group_count, None)?;
        let wanted = std::mem::take(&mut resource.metadata_mut().annotations);
        resource.metadata_mut().annotations = service_annotations(&BTreeMap::new(), wanted)?;
        self.check_user_data(tenant, resource.config_change()).await?;
        let key = Key::child(R::KIND, tenant, resource.metadata().name.clone());
        Ok(self.store.create(key, resource.draft()?).await?)
    }

    /// Replaces the spec, labels and annotations of the tenant named by
    /// `tenant`'s metadata, which carries the `resourceVersion` it was read at.
    /// Its `kubernetesVersion` may move to any patch of the stored minor or
    /// of the next one, and to the next only once no machine reports a
    /// version more than one minor behind it ([`Writable::check_change`]).
    pub async fn update_tenant(&self, tenant: Tenant) -> Result<Arc<Object>, TenancyError> {
        let key = Key::tenant(tenant.metadata.name.clone());
        self.replace(key, tenant).await
    }

    /// Replaces a node group or config patch in `tenant`, as
    /// [`Tenancy::update_tenant`] replaces a tenant.
    pub async fn update_child<R: Writable>(
        &self,
        tenant: &str,
        resource: R,
    ) -> Result<Arc<Object>, TenancyError> {
        let key = Key::child(R::KIND, tenant, resource.metadata().name.clone());
        self.replace(key, resource).await
    }

    /// Replaces the object at `key`, keeping its service annotations. They
    /// are read from the cache at the version the writer read: a cache at
    /// another version answers 409, since the store accepts the write only
    /// at that version, whose annotations are the ones merged. The sizes are
    /// checked against that version too: a group over the cap may stay as
    /// it is stored, or shrink.
    async fn replace<R: Writable>(&self, key: Key, mut resource: R) -> Result<Arc<Object>, TenancyError> {
        let expected = resource.metadata().read_at()?;
        resource.check()?;
        let current = self.find(&key)?;
        if current.resource_version != expected {
            let current = current.resource_version;
            return Err(StoreError::Conflict { what: key.to_string(), expected, current }.into());
        }
        let stored: R = current.parse().map_err(TenancyError::corrupt(&key))?;
        resource.check_sizes(self.max_group_count, Some(&stored))?;
        resource.check_change(&stored, self.store.as_ref())?;
        let wanted = std::mem::take(&mut resource.metadata_mut().annotations);
        resource.metadata_mut().annotations = service_annotations(&stored.metadata().annotations, wanted)?;
        self.check_user_data(&key.owner().name, resource.config_change()).await?;
        Ok(self.store.update(key, resource.draft()?, expected).await?)
    }

    /// Deletes the object at `key`: a tenant or a machine is marked for
    /// deletion and cleaned up by the reconciler; others are removed.
    pub async fn delete(&self, key: Key) -> Result<Deleted, TenancyError> {
        Ok(self.store.delete(key).await?)
    }
}

/// The object at `key`, or [`TenancyError::NotFound`] naming the tenant
/// when that is what is missing.
pub fn find(store: &dyn Store, key: &Key) -> Result<Arc<Object>, TenancyError> {
    if let Some(object) = store.get(key) {
        return Ok(object);
    }
    let owner = key.owner();
    if owner != *key && store.get(&owner).is_none() {
        return Err(TenancyError::NotFound(owner.to_string()));
    }
    Err(TenancyError::NotFound(key.to_string()))
}

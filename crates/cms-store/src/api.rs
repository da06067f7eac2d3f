//! The store's public contract: keys, objects, drafts, watch events and the
//! [`Store`] trait that every backend implements.

use std::collections::BTreeMap;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use cms_model::{Kind, LabelSelector, Page, Projected};
use futures_util::Stream;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::StoreError;

/// Where an object lives: its kind, its tenant (empty for tenants) and its name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    pub kind: Kind,
    pub tenant: String,
    pub name: String,
}

impl Key {
    /// The key of a tenant.
    pub fn tenant(name: impl Into<String>) -> Key {
        Key { kind: Kind::Tenant, tenant: String::new(), name: name.into() }
    }

    /// The key of an object inside a tenant.
    pub fn child(kind: Kind, tenant: impl Into<String>, name: impl Into<String>) -> Key {
        Key { kind, tenant: tenant.into(), name: name.into() }
    }

    /// The key of the tenant that owns this object (itself for a tenant).
    pub fn owner(&self) -> Key {
        match self.kind {
            Kind::Tenant => self.clone(),
            _ => Key::tenant(self.tenant.clone()),
        }
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            Kind::Tenant => write!(f, "tenant {:?}", self.name),
            kind => write!(f, "{} {:?} in tenant {:?}", kind.noun(), self.name, self.tenant),
        }
    }
}

/// A stored object as the API shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    pub key: Key,
    pub resource_version: u64,
    pub generation: u64,
    /// Whether deletion has begun (`metadata.deletionTimestamp` is set).
    pub deleting: bool,
    /// The whole resource, `{metadata, spec, status}`, serialized once.
    pub json: Bytes,
}

impl Object {
    /// Parses the object into a typed resource such as [`cms_model::Tenant`].
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.json)
    }
}

/// The user-settable parts of an object, already validated and normalized.
#[derive(Clone, Default, PartialEq)]
pub struct Draft {
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// The spec. For a tenant, `nodeGroups` is split off: absent keeps the
    /// current groups, a list replaces them.
    pub spec: Value,
    /// The status to start with on create; the kind's default when `None`.
    /// A tenant's `ConfigPatchesResolved` condition in it is the store's to set.
    /// Ignored on update: status changes go through [`Store::update_status`].
    pub status: Option<Value>,
    /// A tenant's secrets bundle, sealed by the caller: opaque bytes that
    /// the store keeps apart from the resource and never decodes. Written in
    /// the transaction that creates the tenant; refused for other kinds and
    /// ignored on update.
    pub secrets: Option<Vec<u8>>,
}

impl Draft {
    /// The draft that writes a stored tenant (`raw`, its JSON) back as it
    /// is: its labels, annotations and spec, its node groups kept.
    pub fn tenant_as_stored(raw: &Value) -> Draft {
        let field = |name: &str| serde_json::from_value(raw["metadata"][name].clone()).unwrap_or_default();
        let mut spec = raw["spec"].clone();
        if let Some(spec) = spec.as_object_mut() {
            spec.remove("nodeGroups");
        }
        Draft { labels: field("labels"), annotations: field("annotations"), spec, ..Draft::default() }
    }
}

impl fmt::Debug for Draft {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Draft")
            .field("labels", &self.labels)
            .field("annotations", &self.annotations)
            .field("spec", &self.spec)
            .field("status", &self.status)
            .field("secrets", &self.secrets.as_ref().map(|sealed| format!("<{} sealed bytes>", sealed.len())))
            .finish()
    }
}

/// What a delete did.
#[derive(Debug, Clone, PartialEq)]
pub enum Deleted {
    /// The record is gone.
    Removed,
    /// Deletion has begun: the object now carries `deletionTimestamp` and its
    /// finalizers, and stays until they are cleared.
    Marked(Arc<Object>),
}

/// A page of a list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Listing {
    pub items: Vec<Arc<Object>>,
    /// How many objects match, on every page.
    pub total: u64,
}

/// The type of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    /// The name used on the wire and in the event log.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }

    /// Parses the name written by [`EventType::as_str`].
    pub fn from_name(name: &str) -> Option<EventType> {
        match name {
            "ADDED" => Some(EventType::Added),
            "MODIFIED" => Some(EventType::Modified),
            "DELETED" => Some(EventType::Deleted),
            _ => None,
        }
    }
}

/// One change, at one store-wide revision.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchEvent {
    /// The store-wide revision of the change. Events of the initial burst all
    /// carry the snapshot's revision.
    pub revision: u64,
    pub event_type: EventType,
    /// The object after the change; for `DELETED`, its last state.
    pub object: Arc<Object>,
}

/// What a watch yields.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchItem {
    Event(WatchEvent),
    /// Every change up to this revision has been yielded: resuming from it
    /// misses nothing. The first ends a fresh watch's initial burst; a watch
    /// opened with [`WatchRequest::progress`] yields more as the store's
    /// revision moves past changes the watch leaves out.
    Synced(u64),
}

/// What [`Store::watch_with`] follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchRequest {
    /// The kind watched.
    pub kind: Kind,
    /// Only the changes of this one object (of `kind`): a fresh watch's
    /// burst is the object alone, if it exists, and a resumed watch needs
    /// only the object's own changes after `since` to still be in the log.
    pub only: Option<Key>,
    /// Resume after this revision instead of opening with a burst.
    pub since: Option<u64>,
    /// Yield [`WatchItem::Synced`] as the store's revision moves past
    /// changes the watch leaves out, once the watch has caught up with them.
    pub progress: bool,
}

impl WatchRequest {
    /// Every change of `kind`, with a burst, without progress.
    pub fn kind(kind: Kind) -> WatchRequest {
        WatchRequest { kind, only: None, since: None, progress: false }
    }

    /// The changes of the object of `key` only.
    pub fn only(key: Key) -> WatchRequest {
        WatchRequest { kind: key.kind, only: Some(key), since: None, progress: false }
    }

    /// Resumes after `since`, when given.
    pub fn since(self, since: Option<u64>) -> WatchRequest {
        WatchRequest { since, ..self }
    }

    /// Reports progress past the changes left out.
    pub fn with_progress(self) -> WatchRequest {
        WatchRequest { progress: true, ..self }
    }
}

/// Why a watch ended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WatchError {
    /// The watcher fell too far behind and was cut off.
    #[error("watcher fell behind and was disconnected")]
    Lagged,
    /// The event log could not be read.
    #[error("event log unavailable: {0}")]
    Unavailable(String),
}

/// A stream of watch items; it ends on a [`WatchError`].
pub type WatchStream = Pin<Box<dyn Stream<Item = Result<WatchItem, WatchError>> + Send>>;

/// The resource store. Reads come from a cache kept coherent by the event
/// log; writes are transactions that also append to the event log.
///
/// Each write that changes which config patch refs of a tenant resolve (its
/// spec, its node groups, its config patches) sets the tenant's
/// `ConfigPatchesResolved` condition ([`cms_model::patch_refs`]) in the same
/// transaction: amended into the tenant's own change, or as one more
/// `MODIFIED` event of the tenant.
#[cfg_attr(any(test, feature = "testsuite"), mockall::automock)]
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Reads one object.
    fn get(&self, key: &Key) -> Option<Arc<Object>>;

    /// Lists objects of `kind` (in `tenant` when given), sorted by tenant,
    /// then name.
    fn list(&self, kind: Kind, tenant: Option<String>, page: Page) -> Listing;

    /// Lists, as [`Store::list`] does, the objects whose labels `selector`
    /// matches: `total` counts the matches and `page` slices them. The
    /// empty selector lists everything.
    fn select(&self, kind: Kind, tenant: Option<String>, selector: &LabelSelector, page: Page) -> Listing;

    /// Every object of `kind` (in `tenant` when given), sorted like
    /// [`Store::list`]: by tenant, then name. Not paged: for callers that
    /// need them all, such as a sweep of every tenant.
    fn all(&self, kind: Kind, tenant: Option<String>) -> Vec<Arc<Object>>;

    /// Creates an object. A tenant's inline node groups are created with it.
    async fn create(&self, key: Key, draft: Draft) -> Result<Arc<Object>, StoreError>;

    /// Replaces the spec, labels and annotations of an object whose
    /// `resourceVersion` is `expected`.
    async fn update(&self, key: Key, draft: Draft, expected: u64) -> Result<Arc<Object>, StoreError>;

    /// Replaces the status of an object, checking `resourceVersion` when given.
    /// A tenant's `ConfigPatchesResolved` condition is the store's: the one
    /// in `status`, if any, is replaced by the stored one.
    async fn update_status(
        &self,
        key: Key,
        status: Value,
        expected: Option<u64>,
    ) -> Result<Arc<Object>, StoreError>;

    /// Deletes an object: tenants and machines are marked for deletion, other
    /// kinds are removed at once.
    async fn delete(&self, key: Key) -> Result<Deleted, StoreError>;

    /// Clears one finalizer. When none remain on a deleting object, the
    /// record (and, for a tenant, everything in it) is removed, and `None`
    /// is returned.
    async fn remove_finalizer(&self, key: Key, finalizer: String) -> Result<Option<Arc<Object>>, StoreError>;

    /// Watches one kind. Without `since`: an `ADDED` burst of the current
    /// objects, [`WatchItem::Synced`], then live changes. With `since`: every
    /// change after that revision from the event log, then live changes;
    /// [`StoreError::Gone`] when the log no longer reaches back that far.
    async fn watch(&self, kind: Kind, since: Option<u64>) -> Result<WatchStream, StoreError>;

    /// Watches as [`Store::watch`] does, narrowed to one object and with
    /// progress when `request` asks. A resume of one object after `since`
    /// is [`StoreError::Gone`] only when the object changed after `since`
    /// and the log was compacted past `since` (or the object no longer
    /// exists and the log was compacted past `since`): an object that did
    /// not change since resumes with nothing to replay, however far the log
    /// moved on.
    async fn watch_with(&self, request: WatchRequest) -> Result<WatchStream, StoreError>;

    /// Replaces a tenant's projected resources after a provisioning run.
    async fn set_projection(&self, tenant: String, items: Vec<Projected>) -> Result<(), StoreError>;

    /// The projected resources of one tenant, or of all tenants; `None` when
    /// no provisioning run has recorded any yet.
    async fn projection(&self, tenant: Option<String>) -> Result<Option<Vec<Projected>>, StoreError>;

    /// Replaces the tenant's last run of `run.command` by the provisioning
    /// tool (its output cut to [`cms_model::TOOL_OUTPUT_LIMIT`]); the tenant
    /// must exist. Its runs go when it is removed.
    async fn set_tool_run(&self, tenant: String, run: cms_model::ToolRun) -> Result<(), StoreError>;

    /// The tenant's last run of each command recorded, apply first.
    async fn tool_runs(&self, tenant: String) -> Result<Vec<cms_model::ToolRun>, StoreError>;

    /// The sealed secrets bundle of a tenant, as its create wrote it; `None`
    /// when the tenant has none, or they were dropped with the
    /// `service.io/secrets` finalizer.
    async fn secrets(&self, tenant: String) -> Result<Option<Vec<u8>>, StoreError>;

    /// Checks that the database answers.
    async fn ping(&self) -> Result<(), StoreError>;

    /// The newest store-wide revision this replica has applied.
    fn revision(&self) -> u64;
}

//! The durable store of `cms`.
//!
//! Resources live in one table keyed by `(kind, tenant, name)`. Writes queue
//! for one writer per replica, which runs those waiting in one transaction
//! (group commit) that also takes the next store-wide revisions from a
//! counter row and appends the changes to the event log, so the log holds
//! every change in commit order. Reads are served from an in-memory cache
//! that applies the log in revision order, and watches are fed from it.
//!
//! [`SqlStore`] runs through sea-orm on SQLite (embedded, the default) or on
//! PostgreSQL, where several replicas share one database: each follows the
//! others' writes through the event log, woken by `NOTIFY`, and [`Leases`]
//! give one replica at a time a piece of work, with fenced writes.
//!
//! Where things are: `api.rs`, the [`Store`] trait (mocked under `testsuite`),
//! keys, drafts and watch events. The writes are pure: `write.rs` is every
//! write as a function of its tenant's rows, `view.rs` those rows as one write
//! sees and changes them in memory (only those the write looks at are read), `rows.rs` new rows and their parts,
//! `refs.rs` the `ConfigPatchesResolved` condition each write keeps. The SQL
//! that runs them is apart: `commit.rs` submits a write and publishes it,
//! `batch.rs` is group commit (lock the batch's tenants, read the rows their
//! writes need, run the writes, write the result in multi-row statements,
//! take the revisions, log the events, append the audit records queued with
//! them, commit once; [`BATCH_SIZE`] is the histogram of entries per commit). `cache.rs`: the read cache and the
//! broadcast, applied strictly in revision order. `watch.rs`: bursts, replays
//! a page of the log at a time, 410 past compaction, catch-up with the log
//! (a replica that lagged past the log reloads and cuts its watchers off);
//! watches of one object ([`WatchRequest`]), which resume by the revision of
//! each object's last change (on its row and in the cache) and of each
//! logged change's predecessor, and progress past what a watch leaves out.
//! `listener.rs`: on PostgreSQL, `LISTEN cms_events` and a poll. `lease.rs`:
//! [`Leases`] and fenced stores. `dialect.rs`: the statements that differ by
//! backend. `render.rs`: rows to API JSON, once per write. `migration.rs`: the
//! schema. `sql.rs`: [`SqlStore`] and [`StoreOptions`]. `projection.rs`,
//! `secrets.rs`, `accounts*.rs`, `audit*.rs`: projected state, sealed secrets
//! (never cached, logged or watched), accounts (users, tokens, grants) and the audit log.
//! `sealed.rs`: [`Sealed`], the sealed secrets and settings a page at a
//! time, each swapped only if it still holds the bytes read, for re-sealing
//! under another key.
//! `schemas.rs`: [`SqlStore::rename_schema`], for the provisioning tool's
//! schemas on PostgreSQL.
//! `state_lock.rs`: [`StateLocks`], the sessions holding the tool's state
//! locks on PostgreSQL, ended to release them, and whether a lease holder
//! is still there.
//! `tool_runs.rs`: the provisioning tool's last output of each command per
//! tenant ([`Store::set_tool_run`]), for support bundles.
//! `backup.rs`: [`backup_sqlite`] and [`restore_sqlite`], the embedded
//! database as one file; `lock_file.rs`: the [`DatabaseLock`] a server holds
//! on it; `file_modes.rs`: its files owner-only (0600, a directory made for
//! it 0700). `tenant_status.rs`: [`update_tenant_status`], one writer's fields
//! of a tenant's status, kept apart from the others'. `conformance/`: the
//! suite run on every backend (`conformance_suite!`).

mod accounts;
mod accounts_grants;
mod accounts_sql;
mod api;
mod audit;
mod audit_sql;
mod backup;
mod batch;
mod cache;
mod commit;
#[cfg(any(test, feature = "testsuite"))]
pub mod conformance;
mod dialect;
mod entity;
mod error;
mod file_modes;
mod lease;
mod listener;
mod lock_file;
mod migration;
mod projection;
mod refs;
mod render;
mod rows;
mod schemas;
mod sealed;
mod secrets;
mod sql;
mod state_lock;
mod tenant_status;
mod tool_runs;
mod view;
mod watch;
mod write;

/// A throwaway PostgreSQL server for tests: [`pgtest::PgServer`].
#[cfg(feature = "testsuite")]
pub use cms_pgtest as pgtest;

#[cfg(any(test, feature = "testsuite"))]
pub use accounts::MockAccounts;
pub use accounts::{Accounts, GrantRecord, TokenRecord, UserChange, UserRecord};
#[cfg(any(test, feature = "testsuite"))]
pub use api::MockStore;
pub use api::{
    Deleted, Draft, EventType, Key, Listing, Object, Store, WatchError, WatchEvent, WatchItem, WatchRequest,
    WatchStream,
};
#[cfg(any(test, feature = "testsuite"))]
pub use audit::MockAudit;
pub use audit::{Audit, AuditFilter};
pub use backup::{Restored, Snapshot, backup_sqlite, restore_sqlite, sqlite_setting};
pub use batch::BATCH_SIZE;
pub use error::StoreError;
#[cfg(any(test, feature = "testsuite"))]
pub use lease::MockLeases;
pub use lease::{Lease, Leases};
pub use lock_file::DatabaseLock;
pub use schemas::SchemaRename;
#[cfg(any(test, feature = "testsuite"))]
pub use sealed::MockSealed;
pub use sealed::Sealed;
pub use sql::{DEFAULT_MAX_MACHINES_PER_TENANT, SqlStore, StoreOptions};
#[cfg(any(test, feature = "testsuite"))]
pub use state_lock::MockStateLocks;
pub use state_lock::{LockSession, StateLocks, replica_id};
pub use tenant_status::update_tenant_status;

/// The finalizer that stands for a tenant's machines and infrastructure.
pub const FINALIZER_MACHINES: &str = "service.io/machines";
/// The finalizer that stands for a tenant's secrets.
pub const FINALIZER_SECRETS: &str = "service.io/secrets";

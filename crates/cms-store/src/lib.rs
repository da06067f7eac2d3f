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

mod accounts;
mod accounts_sql;
mod api;
mod audit;
mod audit_sql;
mod batch;
mod cache;
mod commit;
#[cfg(any(test, feature = "testsuite"))]
pub mod conformance;
mod dialect;
mod entity;
mod error;
mod lease;
mod listener;
mod migration;
mod projection;
mod refs;
mod render;
mod rows;
mod secrets;
mod sql;
mod view;
mod watch;
mod write;

/// A throwaway PostgreSQL server for tests: [`pgtest::PgServer`].
#[cfg(feature = "testsuite")]
pub use cms_pgtest as pgtest;

#[cfg(any(test, feature = "testsuite"))]
pub use accounts::MockAccounts;
pub use accounts::{Accounts, TokenRecord, UserChange, UserRecord};
#[cfg(any(test, feature = "testsuite"))]
pub use api::MockStore;
pub use api::{
    Deleted, Draft, EventType, Key, Listing, Object, Store, WatchError, WatchEvent, WatchItem, WatchStream,
};
#[cfg(any(test, feature = "testsuite"))]
pub use audit::MockAudit;
pub use audit::{Audit, AuditFilter};
pub use error::StoreError;
#[cfg(any(test, feature = "testsuite"))]
pub use lease::MockLeases;
pub use lease::{Lease, Leases};
pub use sql::{SqlStore, StoreOptions};

/// The finalizer that stands for a tenant's machines and infrastructure.
pub const FINALIZER_MACHINES: &str = "service.io/machines";
/// The finalizer that stands for a tenant's secrets.
pub const FINALIZER_SECRETS: &str = "service.io/secrets";

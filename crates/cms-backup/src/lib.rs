//! Per-tenant etcd backups: snapshots taken from a tenant's control plane
//! over the node API, encrypted as they stream, kept in a backup store,
//! and restored onto a control plane whose etcd waits for its bootstrap.
//!
//! - [`Backups`] (`backups.rs`): take, list, get, download, verify and
//!   restore, one at a time per tenant; which control plane is asked is in
//!   `nodes.rs` (a healthy follower before the leader).
//! - [`BackupStore`] (`store.rs`): the seam where backups live, mocked under
//!   the `testsuite` feature; [`DirStore`] keeps them in a local directory,
//!   writing each object whole or not at all.
//! - [`S3Store`] (`s3.rs`): the same in an S3-compatible bucket, written by
//!   multipart upload as the stream comes, aborted when it fails.
//! - [`encrypt`] and [`decrypt`] (`format.rs`): the file format, STREAM over
//!   XChaCha20-Poly1305 with a key derived from the sealing key, bound to
//!   the tenant and the backup id.
//! - [`Scheduler`] (`schedule.rs`): the tenants' `spec.backups` schedules,
//!   each scheduled time claimed by one replica, old backups pruned.
//! - `outcome.rs`: what became of a backup or restore, in the tenant's
//!   `status.backups`, its [`RESTORING`] condition and the metrics.
//! - `record.rs`: where a [`Backup`] (the API's, from `cms-model`) is kept,
//!   a JSON sidecar beside its file, and backup ids.
//!
//! Snapshots are never whole in memory: each passes chunk by chunk from
//! the node to the store, and from the store to the node or the client.
//! See `docs/backups.md`.

mod backups;
mod error;
mod format;
mod nodes;
mod outcome;
mod record;
mod s3;
mod schedule;
mod store;

pub use backups::{Backups, Restored};
pub use cms_model::Backup;
pub use error::BackupError;
pub use format::{Binding, MAX_CHUNK, decrypt, encrypt};
pub use outcome::{BYTES, FAILED, NEWEST_AGE, RESTORING, TAKEN};
pub use s3::S3Store;
pub use schedule::{SCHEDULER_ACTOR, SCHEDULER_LEASE, Scheduler, SchedulerLease, SchedulerOptions, Sweep};
#[cfg(any(test, feature = "testsuite"))]
pub use store::MockBackupStore;
pub use store::{BackupStore, ByteStream, DirStore};

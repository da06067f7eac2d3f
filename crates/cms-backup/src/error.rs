//! The one error type of the crate.

use std::io;

use cms_talos::TalosError;
use cms_tenancy::NodeError;

/// Why a backup could not be stored, read, taken or restored.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// A key names no object in the backup store.
    #[error("no backup object {0:?}")]
    NotFound(String),
    /// A key is not a relative path of plain segments.
    #[error("invalid backup key {0:?}")]
    InvalidKey(String),
    /// Reading or writing the backup store failed.
    #[error("backup store: {0}")]
    Io(#[source] io::Error),
    /// A stored backup is not one this service wrote, or it was cut short.
    #[error("backup is malformed: {0}")]
    Malformed(&'static str),
    /// A stored backup failed its authentication: a byte changed, or it
    /// belongs to another tenant or another backup id.
    #[error("backup does not verify: it was altered, or belongs to another tenant or backup")]
    Tampered,
    /// The plaintext's SHA-256 is not the one recorded when it was taken.
    #[error("backup does not match its recorded SHA-256")]
    Checksum,
    /// The key the backup names cannot be derived, or encryption failed.
    #[error("backup key: {0}")]
    Key(#[source] TalosError),
    /// No such tenant.
    #[error("tenant {0:?} not found")]
    TenantNotFound(String),
    /// The tenant has no backup of this id.
    #[error("tenant {tenant:?} has no backup {id:?}")]
    BackupNotFound { tenant: String, id: String },
    /// A backup or a restore of the tenant is already running.
    #[error("a backup or restore of tenant {0:?} is already running")]
    Busy(String),
    /// No control plane of the tenant can serve the call.
    #[error("tenant {tenant:?} has no reachable control plane: {why}")]
    NoControlPlane { tenant: String, why: String },
    /// A node API call failed while taking or restoring a backup.
    #[error("node {machine}: {source}")]
    Node {
        machine: String,
        #[source]
        source: NodeError,
    },
}

impl From<io::Error> for BackupError {
    /// An `io::Error` that carries a [`BackupError`] (as the crate's own
    /// readers wrap one) gives it back; any other is [`BackupError::Io`].
    fn from(err: io::Error) -> BackupError {
        match err.downcast::<BackupError>() {
            Ok(inner) => inner,
            Err(err) => BackupError::Io(err),
        }
    }
}

impl BackupError {
    /// This error carried through an `io::Error`, as readers and upload
    /// streams need; `From<io::Error>` takes it out again.
    pub(crate) fn into_io(self) -> io::Error {
        match self {
            BackupError::Io(err) => err,
            other => io::Error::other(other),
        }
    }
}

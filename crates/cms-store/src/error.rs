//! The store's error type: what failed, for the service to map to a status.

use sea_orm::DbErr;

/// An error from the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The object, or the tenant it belongs to, does not exist.
    #[error("{0} not found")]
    NotFound(String),
    /// The object already exists.
    #[error("{0} already exists")]
    AlreadyExists(String),
    /// The `resourceVersion` given is not the current one.
    #[error("{what} has resourceVersion {current}, not {expected}: read it again and retry")]
    Conflict { what: String, expected: u64, current: u64 },
    /// The write is not allowed in the object's state, such as changing a
    /// tenant that is being deleted.
    #[error("{0}")]
    Refused(String),
    /// A watch asked for revisions that the event log no longer holds.
    #[error("revision {requested} is too old: the event log starts after revision {compacted}")]
    Gone { requested: u64, compacted: u64 },
    /// A watch asked for a revision the store has not reached.
    #[error("revision {requested} is ahead of the store's revision {current}")]
    Future { requested: u64, current: u64 },
    /// The database could not be reached.
    #[error("database unavailable")]
    Unavailable(#[source] DbErr),
    /// Stored data could not be read back.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// Any other database failure.
    #[error("database error")]
    Database(#[source] DbErr),
}

impl From<DbErr> for StoreError {
    fn from(err: DbErr) -> StoreError {
        match err {
            DbErr::Conn(_) | DbErr::ConnectionAcquire(_) => StoreError::Unavailable(err),
            other => StoreError::Database(other),
        }
    }
}

//! The store's error type: what failed, for the service to map to a status.

use sea_orm::{DbErr, RuntimeErr};

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
    /// The write breaks a rule that only the stored state can tell, such as
    /// the cap on a tenant's machines; `field` names the field.
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    /// A fenced write carried a lease that is no longer held: it expired, was
    /// released, or another holder took it over. Nothing was written.
    #[error("lease {name:?} (epoch {epoch}) is no longer held")]
    LeaseLost { name: String, epoch: u64 },
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
        if unreachable(&err) { StoreError::Unavailable(err) } else { StoreError::Database(err) }
    }
}

/// Whether `err` means that the database could not be reached or went away
/// mid-statement, rather than that the statement failed.
fn unreachable(err: &DbErr) -> bool {
    match err {
        DbErr::Conn(_) | DbErr::ConnectionAcquire(_) => true,
        DbErr::Exec(RuntimeErr::SqlxError(err)) | DbErr::Query(RuntimeErr::SqlxError(err)) => {
            lost_connection(err)
        }
        _ => false,
    }
}

fn lost_connection(err: &sea_orm::sqlx::Error) -> bool {
    use sea_orm::sqlx::Error;
    match err {
        Error::Io(_)
        | Error::Tls(_)
        | Error::Protocol(_)
        | Error::PoolTimedOut
        | Error::PoolClosed
        | Error::WorkerCrashed => true,
        // PostgreSQL's connection exceptions (class 08), shutdowns (57P01-3)
        // and a full server (53300).
        Error::Database(err) => err.code().is_some_and(|code| {
            code.starts_with("08") || matches!(&*code, "57P01" | "57P02" | "57P03" | "53300")
        }),
        _ => false,
    }
}

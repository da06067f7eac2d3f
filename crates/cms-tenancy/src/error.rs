//! The application layer's error type: what failed, by kind, so that each
//! caller (the HTTP API, the reconciler, a Rust tool) decides what it means
//! for it in one place.

use cms_model::FieldError;
use cms_store::StoreError;
use cms_talos::TalosError;

/// Why a tenant operation failed.
#[derive(Debug, thiserror::Error)]
pub enum TenancyError {
    /// The resource breaks a rule; the error names the field.
    #[error(transparent)]
    Invalid(#[from] FieldError),
    /// No such object, or no tenant for it.
    #[error("{0} not found")]
    NotFound(String),
    /// The operation conflicts with the stored state: a create of the same
    /// name under way, a machine whose node group is gone, a config patch
    /// ref that names no patch, a patch that does not apply.
    #[error("{0}")]
    Conflict(String),
    /// The tenant has no sealed secrets: they were dropped while it is being
    /// deleted, or never made.
    #[error("tenant {0:?} has no secrets: they were dropped or never made")]
    NoSecrets(String),
    /// Something the operation needs does not exist yet, such as the
    /// control-plane endpoint before any control-plane machine.
    #[error("{0}")]
    NotReady(String),
    /// The store refused or failed a read or a write. (A write the store
    /// finds invalid, such as one over the cap on a tenant's machines, is
    /// [`TenancyError::Invalid`], naming the field.)
    #[error(transparent)]
    Store(StoreError),
    /// Talos interop failed: an unsupported version, a config that does not
    /// render, a bundle that does not open.
    #[error(transparent)]
    Talos(#[from] TalosError),
    /// A stored object could not be read back.
    #[error("stored {what} is unreadable: {source}")]
    Corrupt {
        what: String,
        #[source]
        source: serde_json::Error,
    },
    /// Node API credentials could not be made from the tenant's bundle.
    #[error("cannot make node API credentials: {0}")]
    Credentials(String),
    /// A background task of the operation died.
    #[error("a background task failed: {0}")]
    Task(String),
}

impl From<StoreError> for TenancyError {
    fn from(err: StoreError) -> TenancyError {
        match err {
            StoreError::Invalid { field, message } => TenancyError::Invalid(FieldError { field, message }),
            err => TenancyError::Store(err),
        }
    }
}

impl TenancyError {
    /// Whether trying again later may succeed without anyone changing the
    /// tenant: the database was away, or a background task died. A caller
    /// that retries (the reconciler) retries these as transient, never
    /// reporting them as a problem with the tenant's spec.
    pub fn is_transient(&self) -> bool {
        matches!(self, TenancyError::Store(StoreError::Unavailable(_)) | TenancyError::Task(_))
    }

    pub(crate) fn corrupt(what: impl ToString) -> impl FnOnce(serde_json::Error) -> TenancyError {
        let what = what.to_string();
        move |source| TenancyError::Corrupt { what, source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dead_tasks_are_transient_and_problems_with_the_tenant_are_not() {
        assert!(TenancyError::Task("panicked".into()).is_transient());
        assert!(!TenancyError::NoSecrets("a".into()).is_transient());
        assert!(!TenancyError::Conflict("missing patch".into()).is_transient());
        assert!(!TenancyError::Store(StoreError::NotFound("tenant \"a\"".into())).is_transient());
    }

    #[test]
    fn invalid_store_writes_name_their_field() {
        let err = StoreError::Invalid { field: "spec.count".into(), message: "over the limit".into() };
        match TenancyError::from(err) {
            TenancyError::Invalid(field) => {
                assert_eq!(field, FieldError::new("spec.count", "over the limit"))
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}

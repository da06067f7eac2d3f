//! The reconciler's error type: what failed in one reconcile.

use cms_store::StoreError;
use cms_tofu::TofuError;

/// Why a reconcile did not converge; the error policy requeues it.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The store refused or failed a read or write.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// A provisioning run failed, hung or printed garbage.
    #[error("{0}")]
    Provision(#[from] TofuError),
    /// The tenant's spec cannot be provisioned as it stands.
    #[error("{0}")]
    Invalid(String),
    /// A stored object could not be read back.
    #[error("stored {what} is unreadable: {source}")]
    Corrupt {
        what: String,
        #[source]
        source: serde_json::Error,
    },
}

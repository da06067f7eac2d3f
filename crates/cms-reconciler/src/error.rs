//! The reconciler's error type: what failed in one reconcile.

use cms_store::StoreError;
use cms_tenancy::TenancyError;
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
    /// The machine config that a node group's cloud instances boot with
    /// could not be rendered.
    #[error("node group {group:?}: {source}")]
    Render {
        group: String,
        #[source]
        source: TenancyError,
    },
    /// The tenant's sealed secrets could not be read or written (a
    /// rotation of its CAs).
    #[error("the tenant's secrets: {0}")]
    Secrets(#[source] TenancyError),
    /// A stored object could not be read back.
    #[error("stored {what} is unreadable: {source}")]
    Corrupt {
        what: String,
        #[source]
        source: serde_json::Error,
    },
}

impl ReconcileError {
    /// Whether the failure is of the moment (the database away, a
    /// background task dead) rather than of the tenant: such a reconcile is
    /// retried with backoff and the tenant is not marked failed.
    pub fn is_transient(&self) -> bool {
        match self {
            ReconcileError::Store(StoreError::Unavailable(_)) => true,
            ReconcileError::Render { source, .. } | ReconcileError::Secrets(source) => source.is_transient(),
            _ => false,
        }
    }
}

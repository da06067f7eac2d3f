//! What a health request can fail with; an unreachable cluster is not an
//! error but a [`crate::Health`] with `reachable: false`.

use thiserror::Error;

/// A failed health request.
#[derive(Debug, Error)]
pub enum ProberError {
    /// There is no tenant of that name.
    #[error("tenant {0:?} not found")]
    TenantNotFound(String),
}

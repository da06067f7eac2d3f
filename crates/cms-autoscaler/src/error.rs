//! What goes wrong, and the gRPC status each answer carries. Messages name
//! only what the caller sent or its own tenant's objects.

use cms_store::StoreError;
use cms_tenancy::TenancyError;
use tonic::{Code, Status};

/// A failure of the autoscaler service.
#[derive(Debug, thiserror::Error)]
pub enum AutoscalerError {
    /// The caller's certificate names no live tenant.
    #[error("{0}")]
    Unauthenticated(String),
    /// The node group or node asked for is not the caller's to scale.
    #[error("{0}")]
    NotFound(String),
    /// The request is malformed.
    #[error("{0}")]
    Invalid(String),
    /// The request breaks the group's limits or its state.
    #[error("{0}")]
    Refused(String),
    /// The service cannot answer this call for this group.
    #[error("{0}")]
    Unimplemented(String),
    /// Another writer kept changing the group.
    #[error("{0}")]
    Conflict(String),
    /// The store or the tenant's API cannot answer now.
    #[error("{0}")]
    Unavailable(String),
    /// TLS could not be set up.
    #[error("TLS: {0}")]
    Tls(String),
    /// Listening or serving failed.
    #[error("{0}")]
    Serve(String),
}

impl AutoscalerError {
    /// The gRPC code of the answer.
    pub fn code(&self) -> Code {
        match self {
            AutoscalerError::Unauthenticated(_) => Code::Unauthenticated,
            AutoscalerError::NotFound(_) => Code::NotFound,
            AutoscalerError::Invalid(_) => Code::InvalidArgument,
            AutoscalerError::Refused(_) => Code::FailedPrecondition,
            AutoscalerError::Conflict(_) => Code::Aborted,
            AutoscalerError::Unimplemented(_) => Code::Unimplemented,
            AutoscalerError::Unavailable(_) => Code::Unavailable,
            AutoscalerError::Tls(_) | AutoscalerError::Serve(_) => Code::Internal,
        }
    }

    /// The HTTP status the audit log records for the answer.
    pub(crate) fn http_status(&self) -> u16 {
        match self {
            AutoscalerError::Unauthenticated(_) => 401,
            AutoscalerError::NotFound(_) => 404,
            AutoscalerError::Invalid(_) => 400,
            AutoscalerError::Refused(_) | AutoscalerError::Conflict(_) => 409,
            AutoscalerError::Unavailable(_) => 503,
            AutoscalerError::Unimplemented(_) => 501,
            AutoscalerError::Tls(_) | AutoscalerError::Serve(_) => 500,
        }
    }
}

impl From<AutoscalerError> for Status {
    fn from(err: AutoscalerError) -> Status {
        Status::new(err.code(), err.to_string())
    }
}

impl From<StoreError> for AutoscalerError {
    fn from(err: StoreError) -> AutoscalerError {
        match err {
            StoreError::NotFound(what) => AutoscalerError::NotFound(format!("{what} was not found")),
            StoreError::Conflict { what, .. } => {
                AutoscalerError::Conflict(format!("{what} changed while it was written; try again"))
            }
            StoreError::Invalid { field, message } => AutoscalerError::Refused(format!("{field}: {message}")),
            StoreError::Refused(message) => AutoscalerError::Refused(message),
            other => {
                tracing::warn!("the autoscaler service could not use the store: {other}");
                AutoscalerError::Unavailable("the store cannot answer now; try again".into())
            }
        }
    }
}

impl From<TenancyError> for AutoscalerError {
    fn from(err: TenancyError) -> AutoscalerError {
        match err {
            TenancyError::Store(err) => err.into(),
            TenancyError::Invalid(err) => AutoscalerError::Refused(err.to_string()),
            TenancyError::Conflict(message) => AutoscalerError::Conflict(message),
            TenancyError::NotFound(message) => AutoscalerError::NotFound(message),
            other => {
                tracing::warn!("the autoscaler service could not write: {other}");
                AutoscalerError::Unavailable("the write could not be made now; try again".into())
            }
        }
    }
}

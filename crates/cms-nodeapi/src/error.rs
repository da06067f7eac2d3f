//! What can fail when cms talks to a node.

use thiserror::Error;

/// A failed node API call.
#[derive(Debug, Error)]
pub enum NodeApiError {
    /// The address is not `IP:port`, `IP`, `host:port` or `host`.
    #[error("invalid node address {0:?}")]
    InvalidAddress(String),
    /// A certificate or key could not be loaded.
    #[error("invalid node API credentials: {0}")]
    Credentials(String),
    /// A client certificate could not be issued.
    #[error("could not issue a node API client certificate")]
    Certificate(#[source] cms_talos::TalosError),
    /// No connection (TCP or TLS) could be made.
    #[error("could not connect to {endpoint}")]
    Connect {
        endpoint: String,
        #[source]
        source: tonic::transport::Error,
    },
    /// The call failed with a gRPC status (including deadlines).
    #[error("{endpoint} answered {}: {}", .status.code(), .status.message())]
    Status {
        endpoint: String,
        #[source]
        status: Box<tonic::Status>,
    },
    /// A node reported an error inside an otherwise successful answer.
    #[error("node {hostname:?} reported: {message}")]
    Node { hostname: String, message: String },
    /// A streamed transfer (a snapshot either way) waited longer than the
    /// client's timeout for its next step.
    #[error("{endpoint} stalled: nothing moved for {}s", .after.as_secs_f32())]
    Stalled { endpoint: String, after: std::time::Duration },
    /// The snapshot to upload could not be read; the upload was aborted.
    #[error("reading the snapshot to upload failed")]
    Upload(#[source] std::io::Error),
    /// An `ApplyConfiguration` answer named a mode Talos does not have.
    #[error("{endpoint} answered an unknown apply mode {mode}")]
    UnknownApplyMode { endpoint: String, mode: i32 },
    /// The answer carried no message at all.
    #[error("{0} sent an empty answer")]
    EmptyAnswer(String),
}

impl NodeApiError {
    /// Whether the node answered `AlreadyExists`: to `Bootstrap`, that etcd
    /// was bootstrapped before.
    pub fn is_already_exists(&self) -> bool {
        matches!(self, NodeApiError::Status { status, .. } if status.code() == tonic::Code::AlreadyExists)
    }

    /// Whether the node answered `InvalidArgument`: to an `ApplyConfiguration`
    /// in `NoReboot` (or `Try`) mode, Talos's answer to a change it cannot
    /// apply without a reboot ("this config change can't be applied in
    /// immediate mode", `CanApplyImmediate` in machined's v1alpha1 runtime).
    /// Talos gives the same code to a config it cannot parse or validate.
    pub fn is_reboot_required(&self) -> bool {
        matches!(self, NodeApiError::Status { status, .. } if status.code() == tonic::Code::InvalidArgument)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(code: tonic::Code) -> NodeApiError {
        NodeApiError::Status {
            endpoint: "10.0.0.1:50000".into(),
            status: Box::new(tonic::Status::new(code, "")),
        }
    }

    #[test]
    fn invalid_argument_is_a_reboot_required() {
        assert!(answered(tonic::Code::InvalidArgument).is_reboot_required());
        assert!(!answered(tonic::Code::Unavailable).is_reboot_required());
        assert!(!answered(tonic::Code::AlreadyExists).is_reboot_required());
        let reported = NodeApiError::Node { hostname: "n".into(), message: "invalid".into() };
        assert!(!reported.is_reboot_required());
    }
}

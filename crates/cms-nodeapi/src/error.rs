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
}

//! What can fail when cms talks to a node.

use thiserror::Error;

/// How Talos's refusal of a change that needs a reboot begins.
const IMMEDIATE_REFUSAL: &str = "can't be applied in immediate mode";

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

    /// Whether the node refused an `ApplyConfiguration` in `NoReboot` (or
    /// `Try`) mode because the change needs a reboot: Talos answers
    /// `InvalidArgument` with "this config change can't be applied in
    /// immediate mode" (`CanApplyImmediate` in machined's v1alpha1
    /// runtime). The same code for a config it cannot parse or validate is
    /// not that.
    pub fn is_reboot_required(&self) -> bool {
        matches!(self, NodeApiError::Status { status, .. }
            if status.code() == tonic::Code::InvalidArgument && status.message().contains(IMMEDIATE_REFUSAL))
    }

    /// The first line of the node's answer, without what follows it: to a
    /// change that needs a reboot, Talos appends a diff of the configs, which
    /// holds their secrets.
    pub fn first_line(&self) -> String {
        let message = match self {
            NodeApiError::Status { status, .. } => status.message().to_string(),
            other => other.to_string(),
        };
        message.lines().next().unwrap_or_default().chars().take(200).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REFUSAL: &str =
        "this config change can't be applied in immediate mode\ndiff:\n-  token: abc\n+  env: x";

    fn answered(code: tonic::Code) -> NodeApiError {
        NodeApiError::Status {
            endpoint: "10.0.0.1:50000".into(),
            status: Box::new(tonic::Status::new(code, REFUSAL)),
        }
    }

    #[test]
    fn invalid_argument_is_a_reboot_required() {
        assert!(answered(tonic::Code::InvalidArgument).is_reboot_required());
        assert!(!answered(tonic::Code::Unavailable).is_reboot_required());
        assert!(!answered(tonic::Code::AlreadyExists).is_reboot_required());
        let invalid = NodeApiError::Status {
            endpoint: "10.0.0.1:50000".into(),
            status: Box::new(tonic::Status::invalid_argument("failed to parse config: yaml: line 3")),
        };
        assert!(!invalid.is_reboot_required(), "a config Talos cannot parse needs no reboot");
        let line = answered(tonic::Code::InvalidArgument).first_line();
        assert_eq!(line, "this config change can't be applied in immediate mode");
        assert!(!line.contains("token"), "the diff stays out");
        let reported = NodeApiError::Node { hostname: "n".into(), message: "invalid".into() };
        assert!(!reported.is_reboot_required());
    }
}

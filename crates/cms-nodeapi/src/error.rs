//! What can fail when cms talks to a node.

use thiserror::Error;

/// How Talos's refusal of a change that needs a reboot begins.
const IMMEDIATE_REFUSAL: &str = "can't be applied in immediate mode";

/// The most characters of a [`NodeApiError::summary`].
const SUMMARY_LIMIT: usize = 200;

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

    /// Whether the node refused a `Logs` call because it keeps no log of
    /// that id: Talos answers `Unknown` with `log "x" was not registered`
    /// (the in-memory logging manager of machined's
    /// `internal/app/machined/pkg/system/logging/circular.go`).
    pub fn is_unknown_log(&self) -> bool {
        matches!(self, NodeApiError::Status { status, .. }
            if status.code() == tonic::Code::Unknown && status.message().ends_with("was not registered"))
    }

    /// Whether the node could not be reached: no connection (TCP or TLS)
    /// could be made, a transfer stalled, or the call got no answer in time
    /// (`Unavailable`, `DeadlineExceeded`). A node that answered, even with
    /// an error, was reached.
    pub fn is_unreachable(&self) -> bool {
        match self {
            NodeApiError::Connect { .. } | NodeApiError::Stalled { .. } => true,
            NodeApiError::Status { status, .. } => {
                matches!(status.code(), tonic::Code::Unavailable | tonic::Code::DeadlineExceeded)
            }
            _ => false,
        }
    }

    /// The error on one line of at most 200 characters (and `...`), with
    /// its first cause: a connection that could not be made says why
    /// (`could not connect to 10.0.0.1:50000: connection refused`), an
    /// answer only its first line (never the diff of the configs Talos
    /// appends, which holds their secrets).
    pub fn summary(&self) -> String {
        let text = match self {
            NodeApiError::Connect { endpoint, source } => match root_cause(source) {
                Some(cause) => format!("could not connect to {endpoint}: {cause}"),
                None => self.to_string(),
            },
            NodeApiError::Status { endpoint, status } => {
                format!("{endpoint} answered {}: {}", status.code(), self.first_line())
            }
            other => other.to_string(),
        };
        let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
        match line.char_indices().nth(SUMMARY_LIMIT) {
            Some((end, _)) => format!("{}...", &line[..end]),
            None => line,
        }
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

/// The innermost cause of a failed connection, as the operating system
/// says it (`connection refused`), without its error number; `None` when
/// the error has no cause beneath it.
fn root_cause(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cause = err.source()?;
    while let Some(next) = cause.source() {
        cause = next;
    }
    let text = cause.to_string();
    let text = match text.rsplit_once(" (os error ") {
        Some((said, number)) if number.trim_end_matches(')').bytes().all(|b| b.is_ascii_digit()) => said,
        _ => text.as_str(),
    };
    let mut chars = text.chars();
    let first = chars.next()?;
    // `Connection refused` reads as `connection refused` mid-sentence;
    // `TLS ...` keeps its capitals.
    let lower = chars.clone().next().is_some_and(char::is_lowercase);
    Some(match lower {
        true => first.to_lowercase().chain(chars).collect(),
        false => text.to_string(),
    })
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

    #[test]
    fn summaries_are_one_bounded_line_without_the_diff() {
        let refusal = answered(tonic::Code::InvalidArgument);
        let summary = refusal.summary();
        assert!(summary.starts_with("10.0.0.1:50000 answered "), "{summary}");
        assert!(summary.ends_with(": this config change can't be applied in immediate mode"), "{summary}");
        assert!(!summary.contains("token") && !summary.contains('\n'), "{summary}");
        assert!(!refusal.is_unreachable(), "the node answered");
        let long = NodeApiError::Node { hostname: "n".into(), message: "x ".repeat(400) };
        let summary = long.summary();
        assert_eq!(summary.chars().count(), SUMMARY_LIMIT + 3, "{summary}");
        assert!(summary.ends_with("..."), "{summary}");
        let silent = NodeApiError::Status {
            endpoint: "10.0.0.1:50000".into(),
            status: Box::new(tonic::Status::deadline_exceeded("timeout expired")),
        };
        assert!(silent.is_unreachable());
    }

    #[tokio::test]
    async fn a_refused_connection_says_so() {
        // Nothing listens on port 1 of the loopback address.
        let target = crate::NodeTarget::parse("127.0.0.1:1").expect("an address");
        let client = crate::TalosNodeClient::new(std::time::Duration::from_secs(5));
        let credentials = crate::NodeCredentials::maintenance();
        let err = crate::NodeApi::version(&client, &target, &credentials).await.expect_err("nothing listens");
        assert!(err.is_unreachable(), "{err:?}");
        assert_eq!(err.summary(), "could not connect to 127.0.0.1:1: connection refused");
    }
}

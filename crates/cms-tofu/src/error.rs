//! The driver's error type: what failed, with secrets already redacted.

use std::path::PathBuf;
use std::time::Duration;

/// An error from the provisioning driver. Messages never carry credentials:
/// tool output is redacted before it is put in an error.
#[derive(Debug, thiserror::Error)]
pub enum TofuError {
    /// The tool could not be started.
    #[error("cannot start {binary}: {source}")]
    Spawn {
        binary: String,
        #[source]
        source: std::io::Error,
    },
    /// The tool ran longer than its timeout and was killed.
    #[error("{command} timed out after {}s and was killed", timeout.as_secs())]
    TimedOut { command: String, timeout: Duration },
    /// The tool exited with a failure.
    #[error("{command} failed ({status}): {stderr}")]
    Failed { command: String, status: String, stderr: String },
    /// The tool's output could not be understood.
    #[error("{command} printed output that is not its JSON state: {reason}")]
    Garbage { command: String, reason: String },
    /// A workspace file could not be written or read.
    #[error("workspace {}: {source}", path.display())]
    Workspace {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The tenant's spec cannot be turned into a workspace.
    #[error("invalid provider configuration: {0}")]
    Invalid(String),
}

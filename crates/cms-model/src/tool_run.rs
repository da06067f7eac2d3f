//! [`ToolRun`]: what the provisioning tool printed in its last run of one
//! command for a tenant, as the reconciler records it for support bundles.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The longest output a [`ToolRun`] keeps, in bytes: the end of what the
/// tool printed.
pub const TOOL_OUTPUT_LIMIT: usize = 256 * 1024;

/// The commands whose last run is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolCommand {
    Apply,
    Plan,
    Destroy,
}

impl ToolCommand {
    pub const ALL: [ToolCommand; 3] = [ToolCommand::Apply, ToolCommand::Plan, ToolCommand::Destroy];

    /// The tool's own name of the command, such as `apply`.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolCommand::Apply => "apply",
            ToolCommand::Plan => "plan",
            ToolCommand::Destroy => "destroy",
        }
    }

    /// The command named `name`, if it is one recorded.
    pub fn from_name(name: &str) -> Option<ToolCommand> {
        ToolCommand::ALL.into_iter().find(|command| command.as_str() == name)
    }
}

/// One run of the provisioning tool: its command, how it ended, when, and
/// the end of its output, already redacted of credentials, user data and
/// PEM blocks by the driver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolRun {
    pub command: ToolCommand,
    /// Whether it exited with 0.
    pub succeeded: bool,
    /// How it ended: `exit code 0`, `exit code 1`, `killed by a signal`,
    /// or why it did not run to its end (such as a timeout).
    pub status: String,
    pub finished_at: DateTime<Utc>,
    /// Its standard output, then its standard error, redacted; at most
    /// [`TOOL_OUTPUT_LIMIT`] bytes, the end kept.
    pub output: String,
    /// Whether the start of the output was cut to keep it under the limit.
    pub truncated: bool,
}

impl ToolRun {
    /// `output` cut to its last [`TOOL_OUTPUT_LIMIT`] bytes, on a character
    /// boundary, and whether it was cut.
    pub fn bounded(output: String) -> (String, bool) {
        if output.len() <= TOOL_OUTPUT_LIMIT {
            return (output, false);
        }
        let mut start = output.len() - TOOL_OUTPUT_LIMIT;
        while !output.is_char_boundary(start) {
            start += 1;
        }
        (output[start..].to_string(), true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_keeps_its_end_within_the_limit() {
        let (short, cut) = ToolRun::bounded("done".into());
        assert_eq!((short.as_str(), cut), ("done", false));
        let long = format!("{}é{}", "a".repeat(TOOL_OUTPUT_LIMIT), "z".repeat(10));
        let (kept, cut) = ToolRun::bounded(long);
        assert!(cut);
        assert!(kept.len() <= TOOL_OUTPUT_LIMIT);
        assert!(kept.ends_with("zzzzzzzzzz"));
        assert_eq!(ToolCommand::from_name("plan"), Some(ToolCommand::Plan));
        assert_eq!(ToolCommand::from_name("init"), None);
    }
}

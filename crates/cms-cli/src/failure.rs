//! The failures a script can tell apart, and their exit codes.
//!
//! Commands return `anyhow::Error`; the typed failures below travel inside it
//! and [`exit_code`] finds them anywhere in the chain. Anything else is a plain
//! failure (exit 1). clap itself exits 2 on bad usage.

use std::fmt;

/// Exit codes, documented in `docs/cli.md`.
pub(crate) mod code {
    pub(crate) const FAILURE: u8 = 1;
    pub(crate) const USAGE: u8 = 2;
    pub(crate) const NOT_FOUND: u8 = 3;
    pub(crate) const CONFLICT: u8 = 4;
    pub(crate) const CONNECTION: u8 = 5;
    pub(crate) const UNAUTHORIZED: u8 = 6;
    pub(crate) const TIMEOUT: u8 = 7;
}

/// An error body from the server: `{error, code, status}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiError {
    pub(crate) status: u16,
    pub(crate) code: String,
    pub(crate) message: String,
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}, HTTP {})", self.message, self.code, self.status)?;
        match self.status {
            401 => write!(f, "; log in with `cms login` or set SERVICE_TOKEN"),
            _ => Ok(()),
        }
    }
}

impl std::error::Error for ApiError {}

/// The server could not be reached, or stopped answering.
#[derive(Debug)]
pub(crate) struct ConnectionError {
    pub(crate) server: String,
    pub(crate) detail: String,
}

impl fmt::Display for ConnectionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot reach the server at {}: {}", self.server, self.detail)
    }
}

impl std::error::Error for ConnectionError {}

/// The command line was well formed but does not make sense.
#[derive(Debug)]
pub(crate) struct UsageError(pub(crate) String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// A wait that ran out of time.
#[derive(Debug)]
pub(crate) struct TimeoutError(pub(crate) String);

impl fmt::Display for TimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TimeoutError {}

/// Shorthand for a usage failure.
pub(crate) fn usage(message: impl Into<String>) -> anyhow::Error {
    UsageError(message.into()).into()
}

/// The exit code of a failed command.
pub(crate) fn exit_code(error: &anyhow::Error) -> u8 {
    for cause in error.chain() {
        if let Some(api) = cause.downcast_ref::<ApiError>() {
            return match api.status {
                404 => code::NOT_FOUND,
                409 => code::CONFLICT,
                401 | 403 => code::UNAUTHORIZED,
                _ => code::FAILURE,
            };
        }
        if cause.is::<ConnectionError>() {
            return code::CONNECTION;
        }
        if cause.is::<UsageError>() {
            return code::USAGE;
        }
        if cause.is::<TimeoutError>() {
            return code::TIMEOUT;
        }
    }
    code::FAILURE
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(status: u16) -> anyhow::Error {
        ApiError { status, code: "X".into(), message: "m".into() }.into()
    }

    #[test]
    fn codes_follow_the_cause_through_context() {
        assert_eq!(exit_code(&api(404).context("reading tenant/x")), code::NOT_FOUND);
        assert_eq!(exit_code(&api(409)), code::CONFLICT);
        assert_eq!(exit_code(&api(403)), code::UNAUTHORIZED);
        assert_eq!(exit_code(&api(500)), code::FAILURE);
        assert_eq!(exit_code(&usage("bad")), code::USAGE);
        let connection = ConnectionError { server: "http://h:1".into(), detail: "refused".into() };
        assert_eq!(exit_code(&connection.into()), code::CONNECTION);
        assert_eq!(exit_code(&TimeoutError("late".into()).into()), code::TIMEOUT);
        assert_eq!(exit_code(&anyhow::anyhow!("other")), code::FAILURE);
    }

    #[test]
    fn server_errors_show_message_and_code() {
        let error = ApiError { status: 409, code: "Conflict".into(), message: "stale".into() };
        assert_eq!(error.to_string(), "stale (Conflict, HTTP 409)");
    }
}

//! The IO seam of the driver: a [`Runner`] runs one invocation of the tool.
//! [`ProcessRunner`] spawns it; unit tests use the generated mock.

use async_trait::async_trait;

use crate::TofuError;
use crate::process::{self, Invocation, Output};

/// Runs the provisioning tool.
#[cfg_attr(any(test, feature = "testsuite"), mockall::automock)]
#[async_trait]
pub trait Runner: Send + Sync + 'static {
    /// Runs one invocation to completion, or kills it at its timeout.
    async fn run(&self, invocation: Invocation) -> Result<Output, TofuError>;
}

/// The runner that spawns the real binary.
#[derive(Debug, Default, Clone, Copy)]
pub struct ProcessRunner;

#[async_trait]
impl Runner for ProcessRunner {
    async fn run(&self, invocation: Invocation) -> Result<Output, TofuError> {
        process::run(&invocation).await
    }
}

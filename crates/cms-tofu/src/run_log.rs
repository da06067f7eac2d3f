//! The last run of each recorded command (`apply`, `plan`, `destroy`) per
//! tenant, kept in memory by the driver until the caller takes it to store
//! ([`crate::Tofu::take_run`]): its exit status, when it ended and its
//! output (standard output, then standard error), redacted as errors are
//! and bounded to its end.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use chrono::Utc;
use cms_model::{ToolCommand, ToolRun};

use crate::TofuError;
use crate::process::Output;

/// The runs not yet taken, by tenant and command.
#[derive(Debug, Default)]
pub(crate) struct RunLog {
    runs: Mutex<HashMap<(String, ToolCommand), ToolRun>>,
}

impl RunLog {
    pub(crate) fn record(&self, tenant: &str, run: ToolRun) {
        self.lock().insert((tenant.to_string(), run.command), run);
    }

    pub(crate) fn take(&self, tenant: &str, command: ToolCommand) -> Option<ToolRun> {
        self.lock().remove(&(tenant.to_string(), command))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, ToolCommand), ToolRun>> {
        self.runs.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The run of `command` that ended with `result`, its output passed
/// through `redact`.
pub(crate) fn tool_run(
    command: ToolCommand,
    result: &Result<Output, TofuError>,
    redact: impl Fn(&str) -> String,
) -> ToolRun {
    let (succeeded, status, output) = match result {
        Ok(output) => {
            let status = match output.code {
                Some(code) => format!("exit code {code}"),
                None => "killed by a signal".to_string(),
            };
            let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
            if !output.stderr.is_empty() {
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(&String::from_utf8_lossy(&output.stderr));
            }
            (output.success(), status, text)
        }
        Err(err) => (false, err.to_string(), String::new()),
    };
    let (output, truncated) = ToolRun::bounded(redact(&output));
    ToolRun { command, succeeded, status: redact(&status), finished_at: Utc::now(), output, truncated }
}

#[cfg(test)]
mod tests {
    use cms_model::ToolCommand;

    use crate::tests::{credentials, options, plan};
    use crate::{MockRunner, Output, Tofu, TofuError, TofuOptions};

    const PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIBdzCCAR2gAwIBAgIQ\n-----END CERTIFICATE-----";

    fn tofu(root: &std::path::Path, runner: MockRunner) -> Tofu {
        let options = TofuOptions { plugin_dir: None, ..options(root) };
        Tofu::new(options, credentials(), std::sync::Arc::new(runner))
    }

    #[tokio::test]
    async fn a_failed_apply_is_recorded_redacted_until_taken() {
        let root = tempfile::tempdir().unwrap();
        let mut runner = MockRunner::new();
        runner.expect_run().returning(|invocation| {
            Ok(match invocation.args[0].as_str() {
                "apply" => Output {
                    code: Some(1),
                    stdout: b"terraform_data.cp-0: Creating...\n".to_vec(),
                    stderr: format!("Error: bad password s3cr3t-password\n{PEM}\n").into_bytes(),
                },
                _ => Output { code: Some(0), ..Output::default() },
            })
        });
        let tofu = tofu(root.path(), runner);
        assert!(tofu.take_run("acme", ToolCommand::Apply).is_none(), "nothing ran yet");
        let failed = tofu.apply(&plan(), &[]).await;
        assert!(matches!(failed, Err(TofuError::Failed { .. })), "{failed:?}");
        let run = tofu.take_run("acme", ToolCommand::Apply).expect("the apply is recorded");
        assert!(!run.succeeded);
        assert_eq!(run.status, "exit code 1");
        assert!(
            run.output.starts_with("terraform_data.cp-0: Creating...\nError: bad password"),
            "{}",
            run.output
        );
        assert!(!run.output.contains("s3cr3t-password") && !run.output.contains("MIIBdzCCAR2gAwIBAgIQ"));
        assert!(tofu.take_run("acme", ToolCommand::Apply).is_none(), "taken once");
        assert!(tofu.take_run("acme", ToolCommand::Destroy).is_none(), "init is not recorded");
    }
}

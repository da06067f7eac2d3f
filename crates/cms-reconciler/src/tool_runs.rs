//! The provisioning tool's last output of each command, kept in the store
//! after each run so that any replica's support bundle shows it.

use cms_model::ToolCommand;

use crate::reconcile::Context;

/// Keeps the driver's record of the tenant's last run of `command` (its
/// redacted, bounded output, exit status and time) in the store. Called
/// after each apply and destroy, and by whatever runs a plan. A failure to
/// keep it is logged and is never the reconcile's: the record is for
/// support, the run's outcome stands on its own.
pub async fn record_tool_run(ctx: &Context, tenant: &str, command: ToolCommand) {
    let Some(run) = ctx.tofu.take_run(tenant, command) else { return };
    if let Err(err) = ctx.store.set_tool_run(tenant.to_string(), run).await {
        tracing::warn!(tenant, command = command.as_str(), "could not keep the tool's output: {err}");
    }
}

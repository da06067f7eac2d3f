//! A deleted tenant's metal hosts are wiped before the infrastructure goes:
//! each host that took a config is asked to `Reset` (not gracefully: the
//! whole cluster goes) and returns to maintenance mode, free for reuse.
//! A host that was reset shows stage `reset`, so a retry asks only the
//! others; a host that does not answer is waited for until
//! [`RESET_TIMEOUT`] after the deletion began, then let go with a warning.

use chrono::{DateTime, Utc};
use cms_model::{Kind, Machine, MachineStatus, Provider};
use cms_store::{Key, StoreError};
use futures_util::future::join_all;

use crate::cluster::node_ref;
use crate::leaving::RESET_TIMEOUT;
use crate::settle::CONFIG_HASH_ANNOTATION;
use crate::{Context, ReconcileError};

/// The stage of a host that was wiped.
const RESET_STAGE: &str = "reset";

/// Resets every configured metal host of the tenant: the hosts that still
/// have to be waited for, with why.
pub(crate) async fn reset_hosts(
    tenant: &str,
    deleting_since: Option<DateTime<Utc>>,
    ctx: &Context,
) -> Result<Vec<String>, ReconcileError> {
    let stored = crate::view::View::read(ctx.store.as_ref(), tenant)?;
    let hosts: Vec<&Machine> = stored
        .values()
        .filter(|machine| machine.spec.provider_type.as_deref() == Some(Provider::Metal.as_str()))
        .filter(|machine| machine.metadata.annotations.contains_key(CONFIG_HASH_ANNOTATION))
        .filter(|machine| machine.status.stage != RESET_STAGE)
        .collect();
    let resets = hosts.iter().filter_map(|machine| {
        let node = node_ref(tenant, machine)?;
        Some(async move { (*machine, ctx.nodes.reset(&node, false).await) })
    });
    let elapsed = deleting_since.map(|since| (Utc::now() - since).to_std().unwrap_or_default());
    let late = elapsed.is_some_and(|elapsed| elapsed > RESET_TIMEOUT);
    let mut waiting = Vec::new();
    for (machine, outcome) in join_all(resets).await {
        let id = &machine.metadata.name;
        match outcome {
            Ok(()) => {
                tracing::info!(tenant, machine = %id, "reset the host");
                mark_reset(ctx, tenant, machine).await?;
            }
            Err(err) if late => {
                tracing::warn!(tenant, machine = %id, %err, "the host did not reset; letting it go");
            }
            Err(err) => waiting.push(format!("resetting {id}: {err}")),
        }
    }
    Ok(waiting)
}

async fn mark_reset(ctx: &Context, tenant: &str, machine: &Machine) -> Result<(), ReconcileError> {
    let key = Key::child(Kind::Machine, tenant, machine.metadata.name.clone());
    let status = MachineStatus { stage: RESET_STAGE.into(), ready: false, ..machine.status.clone() };
    let value = serde_json::to_value(&status)
        .map_err(|source| ReconcileError::Corrupt { what: key.to_string(), source })?;
    match ctx.store.update_status(key, value, None).await {
        Ok(_) | Err(StoreError::NotFound(_)) => Ok(()),
        Err(err) => Err(err.into()),
    }
}

//! Bootstrap, exactly once: when the first control plane has taken its
//! config, `Bootstrap` is called on it, and etcd starts there.
//!
//! The control plane is chosen stably: the first control-plane machine of
//! the workspace, by machine id. The choice is written to the tenant
//! ([`BOOTSTRAP_NODE_ANNOTATION`]) before the call, and the outcome
//! ([`BOOTSTRAPPED_ANNOTATION`]) after it, both by the reconcile's fenced
//! writes. A `kill -9`, a failover to another replica or a retry between
//! the two asks the same machine again, which answers that etcd is already
//! bootstrapped: that counts as done. So no second node is ever
//! bootstrapped. Should the chosen machine leave the workspace before any
//! answer, its etcd goes with it, and the first control plane is chosen anew.

use cms_model::{Provider, Role, Tenant};
use cms_tenancy::{Bootstrapped, NodeRef};
use cms_tofu::WorkspacePlan;

use crate::rollout::set_annotation;
use crate::settle::{CONFIG_HASH_ANNOTATION, CONFIG_UNKNOWN};
use crate::view::View;
use crate::{Context, ReconcileError};

/// The tenant annotation naming the control plane chosen to bootstrap etcd,
/// written before the call.
pub const BOOTSTRAP_NODE_ANNOTATION: &str = "service.io/bootstrap-node";
/// The tenant annotation written once `Bootstrap` succeeded:
/// `<machine> <time>`.
pub const BOOTSTRAPPED_ANNOTATION: &str = "service.io/bootstrapped";

/// Where the bootstrap stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Bootstrap {
    /// etcd was bootstrapped on this machine.
    Done(String),
    /// Not yet, and why, in words an operator can act on.
    Waiting(String),
}

/// Bootstraps etcd when it is time, once.
pub(crate) async fn ensure(
    tenant: &Tenant,
    plan: &WorkspacePlan,
    stored: &View,
    ctx: &Context,
) -> Result<Bootstrap, ReconcileError> {
    let annotations = &tenant.metadata.annotations;
    if let Some(done) = annotations.get(BOOTSTRAPPED_ANNOTATION) {
        return Ok(Bootstrap::Done(done.split(' ').next().unwrap_or_default().to_string()));
    }
    let name = tenant.metadata.name.as_str();
    let recorded =
        annotations.get(BOOTSTRAP_NODE_ANNOTATION).filter(|id| plan.machines.iter().any(|m| m.id == **id));
    let first =
        plan.machines.iter().filter(|machine| machine.role == Role::ControlPlane).map(|m| &m.id).min();
    let Some(chosen) = recorded.or(first).cloned() else {
        return Ok(Bootstrap::Waiting("the tenant has no control-plane machine to bootstrap etcd on".into()));
    };
    let waiting = |why: &str| Ok(Bootstrap::Waiting(format!("waiting for control plane {chosen} {why}")));
    let Some(machine) = stored.get(&chosen).filter(|m| m.metadata.deletion_timestamp.is_none()) else {
        return waiting("to exist");
    };
    let metal = plan.machines.iter().any(|m| m.id == chosen && m.provider == Provider::Metal);
    let configured = match metal {
        // A host marked configured but not yet with its own config is not.
        true => machine
            .metadata
            .annotations
            .get(CONFIG_HASH_ANNOTATION)
            .is_some_and(|hash| hash != CONFIG_UNKNOWN),
        false => machine.spec.connected,
    };
    let Some(address) = machine.spec.management_address.clone().filter(|_| configured) else {
        return waiting("to take its config");
    };
    if recorded.is_none() {
        set_annotation(ctx, name, BOOTSTRAP_NODE_ANNOTATION, Some(chosen.clone())).await?;
    }
    let node = NodeRef { tenant: name.to_string(), machine: chosen.clone(), management_address: address };
    match ctx.nodes.bootstrap(&node).await {
        Ok(outcome) => {
            let at = chrono::Utc::now().to_rfc3339();
            set_annotation(ctx, name, BOOTSTRAPPED_ANNOTATION, Some(format!("{chosen} {at}"))).await?;
            match outcome {
                Bootstrapped::Now => tracing::info!(tenant = name, machine = %chosen, "bootstrapped etcd"),
                Bootstrapped::Already => {
                    tracing::info!(tenant = name, machine = %chosen, "etcd was bootstrapped already")
                }
            }
            Ok(Bootstrap::Done(chosen))
        }
        Err(err) => Ok(Bootstrap::Waiting(format!("bootstrapping etcd on control plane {chosen}: {err}"))),
    }
}

//! Instances made with another image, shape or placement than their node
//! group asks for (`outdated.rs`) are replaced one machine at a time, so
//! that a change of them never takes a group down at once.
//!
//! When the tenant is ready and no machine is being replaced, the next
//! outdated one gets [`REPLACING_ANNOTATION`]: control planes first, in
//! name order, then the workers. It then leaves as a scaled-down machine
//! does (`leaving.rs`): a worker is drained, a control plane leaves etcd
//! (only while every other member answers), its Node is removed. Once it
//! has left, it is deleted as an operator's `DELETE` would, and the next
//! apply replaces its instance (`-replace`), which boots the current
//! config as a new machine of the same id. The tenant is not ready while
//! a machine leaves, so the next one waits until the new one has joined.

use cms_model::{Kind, Machine, Role, Tenant};
use cms_store::{Deleted, Key, StoreError};
use cms_tofu::WorkspacePlan;

use crate::leaving::{LEAVING_ANNOTATION, is_left};
use crate::machines::planned;
use crate::outdated::outdated_machines;
use crate::settle::{Observed, write};
use crate::view::View;
use crate::{Context, ReconcileError};

/// On a machine being replaced: what differs from its node group.
pub const REPLACING_ANNOTATION: &str = "service.io/replacing";

/// Whether `machine` is being replaced.
pub(crate) fn is_replacing(machine: &Machine) -> bool {
    machine.metadata.annotations.contains_key(REPLACING_ANNOTATION)
}

/// Deletes the machines being replaced that have left, so that the next
/// apply replaces their instances; gives how many.
pub(crate) async fn release(tenant: &str, view: &mut View, ctx: &Context) -> Result<usize, ReconcileError> {
    let mut released = 0;
    let done: Vec<Machine> = view
        .values()
        .filter(|m| m.metadata.deletion_timestamp.is_none() && is_replacing(m) && is_left(m))
        .cloned()
        .collect();
    for machine in done {
        let id = machine.metadata.name.clone();
        let key = Key::child(Kind::Machine, tenant, id.clone());
        match ctx.store.delete(key).await {
            Ok(Deleted::Marked(object)) => {
                let marked =
                    object.parse().map_err(|source| ReconcileError::Corrupt { what: id.clone(), source })?;
                view.put(marked);
            }
            Ok(Deleted::Removed) | Err(StoreError::NotFound(_)) => view.remove(&id),
            Err(err) => return Err(err.into()),
        }
        released += 1;
        tracing::info!(tenant, machine = %id, "replacing the instance");
    }
    Ok(released)
}

/// Starts replacing the next outdated machine of a ready tenant, when none
/// is being replaced; gives its id.
pub(crate) async fn start_next(
    name: &str,
    plan: &WorkspacePlan,
    stored: &View,
    ctx: &Context,
) -> Result<Option<String>, ReconcileError> {
    // The outdated machines as the last apply of this pass or an earlier
    // one recorded them: the tenant as stored now.
    let key = Key::tenant(name);
    let Some(object) = ctx.store.get(&key) else { return Ok(None) };
    let tenant: Tenant =
        object.parse().map_err(|source| ReconcileError::Corrupt { what: key.to_string(), source })?;
    let live = || stored.values().filter(|m| m.metadata.deletion_timestamp.is_none());
    if live()
        .any(|machine| is_replacing(machine) || machine.metadata.annotations.contains_key(LEAVING_ANNOTATION))
    {
        return Ok(None);
    }
    let outdated = outdated_machines(&tenant);
    let role = |id: &str| planned(plan, id).map(|machine| machine.role);
    let mut candidates: Vec<&(String, String)> =
        outdated.iter().filter(|(id, _)| stored.contains_key(id) && role(id).is_some()).collect();
    candidates.sort_by_key(|(id, _)| (role(id) != Some(Role::ControlPlane), id.clone()));
    let Some((id, what)) = candidates.first() else { return Ok(None) };
    let machine = &stored[id];
    let mut annotations = machine.metadata.annotations.clone();
    annotations.insert(REPLACING_ANNOTATION.to_string(), what.clone());
    let observed =
        Observed { annotations, connected: machine.spec.connected, status: machine.status.clone() };
    write(ctx, name, machine, observed).await?;
    tracing::info!(tenant = name, machine = %id, differs = %what, "replacing an outdated instance");
    Ok(Some(id.clone()))
}

//! Which control plane a backup is taken from, and which one a restore
//! goes to, as `cms-reconciler`'s `cluster.rs` finds them: the tenant's
//! machines whose node group is a control plane, with an address.

use cms_model::{Kind, Machine, Role, Tenant};
use cms_store::{Key, Store};
use cms_tenancy::{NodeClient, NodeRef};

use crate::error::BackupError;

/// The control planes of `tenant` that have a node API address, by name.
pub(crate) fn control_planes(store: &dyn Store, tenant: &str) -> Result<Vec<NodeRef>, BackupError> {
    let object = store.get(&Key::tenant(tenant)).ok_or_else(|| BackupError::TenantNotFound(tenant.into()))?;
    let spec = object.parse::<Tenant>().ok().map(|tenant| tenant.spec);
    let groups = spec.as_ref().and_then(|spec| spec.node_groups.as_deref()).unwrap_or_default();
    let mut nodes: Vec<NodeRef> = store
        .all(Kind::Machine, Some(tenant.to_string()))
        .iter()
        .filter_map(|object| object.parse::<Machine>().ok())
        .filter(|machine| machine.role(groups) == Some(Role::ControlPlane))
        .filter_map(|machine| {
            Some(NodeRef {
                tenant: tenant.to_string(),
                machine: machine.metadata.name.clone(),
                management_address: machine.spec.management_address.clone()?,
            })
        })
        .collect();
    nodes.sort_by(|a, b| a.machine.cmp(&b.machine));
    Ok(nodes)
}

/// A healthy member to snapshot: one whose `EtcdStatus` answers without
/// errors, a follower rather than the leader when there is one, so the
/// snapshot does not load the member that serves every write. Gives the
/// node and its member's etcd protocol version.
pub(crate) async fn snapshot_source(
    nodes: &dyn NodeClient,
    tenant: &str,
    control_planes: Vec<NodeRef>,
) -> Result<(NodeRef, String), BackupError> {
    let mut leader = None;
    let mut problems = Vec::new();
    for node in control_planes {
        match nodes.etcd_status(&node).await {
            Ok(status) if status.errors.is_empty() && status.member_id != status.leader => {
                return Ok((node, status.protocol_version));
            }
            Ok(status) if status.errors.is_empty() => {
                leader = leader.or(Some((node, status.protocol_version)))
            }
            Ok(status) => problems.push(format!("{}: {}", node.machine, status.errors.join(", "))),
            Err(err) => problems.push(format!("{}: {err}", node.machine)),
        }
    }
    leader.ok_or_else(|| BackupError::NoControlPlane {
        tenant: tenant.to_string(),
        why: match problems.is_empty() {
            true => "it has no control plane with an address".to_string(),
            false => problems.join("; "),
        },
    })
}

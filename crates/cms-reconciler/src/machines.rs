//! Machines in the store, made from the projection of the tool's state and
//! enriched from the plan: management address `IP:50000`, provider id,
//! provider type, shape, and status stage and role.
//!
//! Hosts are given to machines by their index in the group's host list, so
//! a machine's address can change. A machine given an address where a
//! configured host of the tenant is (one a machine of the tenant held
//! configured in this pass, or one in the tenant's
//! [`CONFIGURED_HOSTS_ANNOTATION`]) is configured: its
//! [`CONFIG_HASH_ANNOTATION`] becomes [`CONFIG_UNKNOWN`], so the host gets
//! its machine's config over mTLS only. Any other new address is another
//! host, which has taken no config: the machine loses the annotation. Either
//! way it loses `connected`. A machine replaced by a DELETE starts anew.

use std::collections::{BTreeMap, BTreeSet};

use cms_model::{Kind, Machine, MachineSpec, MachineStatus, Projected, Tenant};
use cms_store::{Draft, FINALIZER_MACHINES, Key, Store};
use cms_tofu::{MachinePlan, WorkspacePlan};

use crate::ReconcileError;
use crate::settle::{CONFIG_HASH_ANNOTATION, CONFIG_UNKNOWN};

/// The node API port of a machine's management address.
pub const NODE_API_PORT: u16 = 50000;

/// The tenant annotation naming (space-separated) the management addresses
/// of hosts that took a config of the tenant, were never reset by the
/// service (a `Reset` that timed out, or a host whose machine moved to
/// another address), and that no machine of the tenant holds now. A machine
/// that comes to one of them is configured.
pub const CONFIGURED_HOSTS_ANNOTATION: &str = "service.io/configured-hosts";

/// The addresses of the tenant's configured hosts before a pass: those its
/// live machines hold configured, and those of
/// [`CONFIGURED_HOSTS_ANNOTATION`]. A machine being replaced (a DELETE)
/// counts for nothing.
pub(crate) fn configured_hosts(tenant: &Tenant, stored: &BTreeMap<String, Machine>) -> BTreeSet<String> {
    let recorded = tenant.metadata.annotations.get(CONFIGURED_HOSTS_ANNOTATION);
    let mut hosts: BTreeSet<String> =
        recorded.into_iter().flat_map(|list| list.split_whitespace()).map(str::to_string).collect();
    let configured = stored.values().filter(|machine| {
        machine.metadata.deletion_timestamp.is_none()
            && machine.metadata.annotations.contains_key(CONFIG_HASH_ANNOTATION)
    });
    hosts.extend(configured.filter_map(|machine| machine.spec.management_address.clone()));
    hosts
}

/// The [`CONFIGURED_HOSTS_ANNOTATION`] after a pass: the configured hosts
/// that no machine holds now, or `None` when there are none.
pub(crate) fn unheld(configured: &BTreeSet<String>, held: &BTreeSet<String>) -> Option<String> {
    let unheld: Vec<&str> = configured.difference(held).map(String::as_str).collect();
    (!unheld.is_empty()).then(|| unheld.join(" "))
}

/// The config hash a machine at `address` starts from: [`CONFIG_UNKNOWN`]
/// on a configured host, else none.
fn config_hash_at(address: Option<&String>, configured: &BTreeSet<String>) -> Option<String> {
    address.filter(|address| configured.contains(*address)).map(|_| CONFIG_UNKNOWN.to_string())
}

/// A machine as the projection and the plan describe it.
pub(crate) fn desired(
    plan: &MachinePlan,
    projected: &Projected,
    stage: &str,
) -> (MachineSpec, MachineStatus) {
    let text = |field: &str| projected.spec.get(field).and_then(|value| value.as_str()).map(str::to_string);
    let spec = MachineSpec {
        management_address: text("address").map(|address| management_address(&address)),
        connected: false,
        provider_id: text("providerId"),
        provider_type: Some(plan.provider.as_str().to_string()),
        shape: text("shape").or_else(|| Some(plan.shape.clone())),
        node_group: Some(plan.group.clone()),
    };
    let status =
        MachineStatus { stage: stage.to_string(), role: Some(plan.role), ..MachineStatus::default() };
    (spec, status)
}

/// `IP:50000`, with brackets for IPv6.
pub fn management_address(ip: &str) -> String {
    if ip.contains(':') { format!("[{ip}]:{NODE_API_PORT}") } else { format!("{ip}:{NODE_API_PORT}") }
}

/// Updates one machine; a new address on one of the `configured` hosts
/// keeps it configured.
pub(crate) async fn upsert(
    store: &dyn Store,
    tenant: &str,
    current: Option<&Machine>,
    (spec, status): (MachineSpec, MachineStatus),
    configured: &BTreeSet<String>,
) -> Result<Machine, ReconcileError> {
    let key_name = |machine: &Machine| machine.metadata.name.clone();
    match current {
        Some(machine) if machine.metadata.deletion_timestamp.is_none() => {
            let key = Key::child(Kind::Machine, tenant, key_name(machine));
            // Whether the node answered is the node work's to say. A new
            // address is another host, which has not answered; it took a
            // config of ours only if it is one of the configured hosts.
            let moved = machine.spec.management_address != spec.management_address;
            let mut annotations = machine.metadata.annotations.clone();
            if moved {
                match config_hash_at(spec.management_address.as_ref(), configured) {
                    Some(unknown) => annotations.insert(CONFIG_HASH_ANNOTATION.to_string(), unknown),
                    None => annotations.remove(CONFIG_HASH_ANNOTATION),
                };
            }
            let spec = MachineSpec { connected: machine.spec.connected && !moved, ..spec };
            let spec_value = serde_json::to_value(&spec).map_err(|source| corrupt(tenant, source))?;
            let mut version = machine.metadata.resource_version.unwrap_or_default();
            let mut written = machine.clone();
            if machine.spec != spec {
                let draft = Draft {
                    labels: machine.metadata.labels.clone(),
                    annotations,
                    spec: spec_value,
                    ..Draft::default()
                };
                let object = store.update(key.clone(), draft, version).await?;
                version = object.resource_version;
                written = object.parse().map_err(|source| corrupt(tenant, source))?;
            }
            // What other writers observed (the prober: readiness, versions,
            // a later stage) stays.
            let mut status = status;
            status.ready = machine.status.ready;
            status.talos_version = machine.status.talos_version.clone().or(status.talos_version);
            status.kubernetes_version =
                machine.status.kubernetes_version.clone().or(status.kubernetes_version);
            if !matches!(machine.status.stage.as_str(), "" | "provisioning" | "initializing") {
                status.stage = machine.status.stage.clone();
            }
            if machine.status != status {
                let status_value = serde_json::to_value(&status).map_err(|source| corrupt(tenant, source))?;
                let object = store.update_status(key, status_value, Some(version)).await?;
                written = object.parse().map_err(|source| corrupt(tenant, source))?;
            }
            Ok(written)
        }
        _ => Err(ReconcileError::Invalid("upsert needs a live machine".into())),
    }
}

/// Creates a machine named `id`, removing a replaced one of that id first.
/// A new machine on one of the `configured` hosts is configured; a
/// replaced one (a DELETE) starts anew.
pub(crate) async fn create(
    store: &dyn Store,
    tenant: &str,
    (id, replaced): (&str, bool),
    (spec, status): (MachineSpec, MachineStatus),
    configured: &BTreeSet<String>,
) -> Result<Machine, ReconcileError> {
    let key = Key::child(Kind::Machine, tenant, id);
    let mut annotations = BTreeMap::new();
    if replaced {
        store.remove_finalizer(key.clone(), FINALIZER_MACHINES.to_string()).await?;
    } else if let Some(unknown) = config_hash_at(spec.management_address.as_ref(), configured) {
        annotations.insert(CONFIG_HASH_ANNOTATION.to_string(), unknown);
    }
    let draft = Draft {
        annotations,
        spec: serde_json::to_value(&spec).map_err(|source| corrupt(tenant, source))?,
        status: Some(serde_json::to_value(&status).map_err(|source| corrupt(tenant, source))?),
        ..Draft::default()
    };
    let object = store.create(key, draft).await?;
    object.parse().map_err(|source| corrupt(tenant, source))
}

/// Removes a machine the workspace no longer holds.
pub(crate) async fn remove(store: &dyn Store, tenant: &str, machine: &Machine) -> Result<(), ReconcileError> {
    let key = Key::child(Kind::Machine, tenant, machine.metadata.name.clone());
    if machine.metadata.deletion_timestamp.is_none() {
        store.delete(key.clone()).await?;
    }
    if store.get(&key).is_some() {
        store.remove_finalizer(key, FINALIZER_MACHINES.to_string()).await?;
    }
    Ok(())
}

/// The ids of the workspace's machines, newest (highest index) first within
/// each group, for removals.
pub(crate) fn newest_first(ids: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut ids: Vec<String> = ids.into_iter().collect();
    ids.sort_by_key(|id| {
        let (group, index) = id.rsplit_once('-').unwrap_or((id.as_str(), "0"));
        (group.to_string(), std::cmp::Reverse(index.parse::<u64>().unwrap_or(0)))
    });
    ids
}

/// The plan's machine with this id.
pub(crate) fn planned<'a>(plan: &'a WorkspacePlan, id: &str) -> Option<&'a MachinePlan> {
    plan.machines.iter().find(|machine| machine.id == id)
}

fn corrupt(tenant: &str, source: serde_json::Error) -> ReconcileError {
    ReconcileError::Corrupt { what: format!("a machine of tenant {tenant:?}"), source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removals_take_the_newest_first() {
        let ids = newest_first(["w-1".to_string(), "w-3".into(), "w-2".into(), "w-10".into()]);
        assert_eq!(ids, ["w-10", "w-3", "w-2", "w-1"]);
    }

    #[test]
    fn management_addresses() {
        assert_eq!(management_address("10.0.0.1"), "10.0.0.1:50000");
        assert_eq!(management_address("fd00::1"), "[fd00::1]:50000");
    }
}

//! The node groups a tenant's autoscaler sees, and its scaling, as versioned
//! writes of the group through [`Tenancy`], which checks them exactly as it
//! checks the API's: a group the autoscaler grows or shrinks is written as
//! a person's PUT would be, and the reconciler drains, resets and removes
//! the machines it drops as it does after any scale-down.
//!
//! Only worker groups with `spec.autoscaling` are offered. The limits are
//! the service's: whatever the autoscaler asks, a group stays within
//! `minCount..=maxCount`.

use std::collections::BTreeSet;
use std::sync::Arc;

use cms_model::{Kind, Machine, NodeGroup, Role, Tenant, machine_index};
use cms_store::{Key, StoreError};
use cms_tenancy::{KubeClient, KubeNode, Tenancy, TenancyError, node_of};

use crate::error::AutoscalerError;
use crate::identity::Identity;

/// How many times a write is tried again when another writer changed the
/// group meanwhile.
const ATTEMPTS: usize = 5;

/// A node of the tenant's cluster as the autoscaler names it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct NodeName {
    /// The Node's `spec.providerID`; empty when it has none.
    pub(crate) provider_id: String,
    /// The Node's name.
    pub(crate) name: String,
}

/// What an instance of a group is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Creating,
    Running,
    Deleting,
}

/// One instance of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Instance {
    /// The id the Node of the instance carries as `spec.providerID`.
    pub(crate) id: String,
    pub(crate) state: State,
    /// Why a machine that is being made is stuck.
    pub(crate) error: Option<String>,
}

/// The node groups of tenants, as their autoscalers see them.
#[derive(Clone)]
pub struct Backend {
    tenancy: Tenancy,
    kube: Arc<dyn KubeClient>,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend").finish_non_exhaustive()
    }
}

impl Backend {
    /// Reads and writes groups through `tenancy`; reads tenants' Nodes with
    /// `kube`.
    pub fn new(tenancy: Tenancy, kube: Arc<dyn KubeClient>) -> Backend {
        Backend { tenancy, kube }
    }

    /// The caller's tenant: it exists and is the one its certificate was
    /// issued for.
    pub(crate) fn tenant(&self, identity: &Identity) -> Result<Tenant, AutoscalerError> {
        let gone = || {
            AutoscalerError::Unauthenticated(format!(
                "the certificate's tenant {:?} no longer exists: download a new identity",
                identity.tenant
            ))
        };
        let object = match self.tenancy.find(&Key::tenant(identity.tenant.clone())) {
            Ok(object) => object,
            Err(TenancyError::NotFound(_) | TenancyError::Store(StoreError::NotFound(_))) => {
                return Err(gone());
            }
            Err(err) => return Err(err.into()),
        };
        let tenant: Tenant = object.parse().map_err(|_| corrupt(&identity.tenant))?;
        let created = tenant.metadata.created_at.map(|time| time.timestamp_millis());
        if created != Some(identity.created_ms) {
            return Err(gone());
        }
        Ok(tenant)
    }

    /// The tenant's autoscaled worker groups, by name.
    pub(crate) fn groups(&self, identity: &Identity) -> Result<Vec<NodeGroup>, AutoscalerError> {
        self.tenant(identity)?;
        let mut groups = Vec::new();
        for object in self.tenancy.store().all(Kind::NodeGroup, Some(identity.tenant.clone())) {
            let group: NodeGroup = object.parse().map_err(|_| corrupt(&identity.tenant))?;
            if offered(&group) {
                groups.push(group);
            }
        }
        groups.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        Ok(groups)
    }

    /// The autoscaled group `id` of the caller's tenant; an error naming
    /// only `id` when there is none.
    pub(crate) fn group(&self, identity: &Identity, id: &str) -> Result<NodeGroup, AutoscalerError> {
        self.groups(identity)?
            .into_iter()
            .find(|group| group.metadata.name == id)
            .ok_or_else(|| AutoscalerError::NotFound(format!("no autoscaled node group {:?}", clip(id))))
    }

    /// The tenant's machines.
    fn machines(&self, tenant: &str) -> Result<Vec<Machine>, AutoscalerError> {
        let objects = self.tenancy.store().all(Kind::Machine, Some(tenant.to_string()));
        objects.iter().map(|object| object.parse().map_err(|_| corrupt(tenant))).collect()
    }

    /// The tenant's Kubernetes Nodes; none when its API does not answer.
    async fn nodes(&self, tenant: &str) -> Vec<KubeNode> {
        match self.kube.nodes(tenant).await {
            Ok(nodes) => nodes,
            Err(err) => {
                tracing::debug!(tenant, "the autoscaler service could not list Nodes: {err}");
                Vec::new()
            }
        }
    }

    /// The autoscaled group of the machine `node` is, if any.
    pub(crate) async fn group_for_node(
        &self,
        identity: &Identity,
        node: &NodeName,
    ) -> Result<Option<NodeGroup>, AutoscalerError> {
        let groups = self.groups(identity)?;
        let machines = self.machines(&identity.tenant)?;
        let Some(machine) = self.machine_of(&identity.tenant, &machines, node, &mut None).await else {
            return Ok(None);
        };
        let group = machine.spec.node_group.as_deref();
        Ok(groups.into_iter().find(|candidate| Some(candidate.metadata.name.as_str()) == group))
    }

    /// The machine a node is: by provider id, else by the addresses or name
    /// of its Kubernetes Node.
    async fn machine_of<'a>(
        &self,
        tenant: &str,
        machines: &'a [Machine],
        node: &NodeName,
        nodes: &mut Option<Vec<KubeNode>>,
    ) -> Option<&'a Machine> {
        if !node.provider_id.is_empty() {
            let by_id = machines.iter().find(|machine| {
                machine.spec.provider_id.as_deref() == Some(node.provider_id.as_str())
                    || placeholder_id(tenant, machine) == node.provider_id
            });
            if by_id.is_some() {
                return by_id;
            }
        }
        if node.name.is_empty() {
            return None;
        }
        if nodes.is_none() {
            *nodes = Some(self.nodes(tenant).await);
        }
        let listed = nodes.as_deref().unwrap_or_default();
        let addresses = listed.iter().find(|kube| kube.name == node.name).map(|kube| kube.addresses.clone());
        machines
            .iter()
            .find(|machine| {
                addresses.as_ref().is_some_and(|list| machine.ip().is_some_and(|ip| list.contains(&ip)))
            })
            .or_else(|| machines.iter().find(|machine| machine.metadata.name == node.name))
    }

    /// Grows group `id` by `delta` machines, within its `maxCount`.
    pub(crate) async fn increase(
        &self,
        identity: &Identity,
        id: &str,
        delta: i32,
    ) -> Result<NodeGroup, AutoscalerError> {
        let delta = positive("delta", delta)?;
        self.write(identity, id, |group, members| {
            let limits = limits(group);
            let wanted = group.spec.count.saturating_add(delta);
            if wanted > limits.max_count {
                return Err(AutoscalerError::Refused(format!(
                    "node group {id:?} cannot grow to {wanted}: its maxCount is {}",
                    limits.max_count
                )));
            }
            // New machines take the lowest ids free: never one whose
            // machine is still leaving.
            let mut held = members.held.clone();
            held.extend(members.free(delta));
            Ok(held)
        })
        .await
    }

    /// Removes the named nodes' machines from group `id`, within its
    /// `minCount`; each leaves as a scaled-down machine does.
    pub(crate) async fn delete_nodes(
        &self,
        identity: &Identity,
        id: &str,
        nodes: &[NodeName],
    ) -> Result<NodeGroup, AutoscalerError> {
        if nodes.is_empty() {
            return Err(AutoscalerError::Invalid("no node to delete".into()));
        }
        // The caller's tenant and group first: nothing is looked up for a
        // certificate that speaks for no one.
        let group = self.group(identity, id)?;
        let tenant = identity.tenant.as_str();
        let machines = self.machines(tenant)?;
        let ids = group.spec.machine_ids();
        let mut listed = None;
        let mut chosen = BTreeSet::new();
        for node in nodes {
            // An instance not made yet is named by the id `NodeGroupNodes` gave it.
            let placeholder = node
                .provider_id
                .strip_prefix(crate::PLACEHOLDER_SCHEME)
                .and_then(|rest| rest.strip_prefix(tenant))
                .and_then(|rest| rest.strip_prefix('/'))
                .filter(|machine| ids.iter().any(|id| id == machine));
            if let Some(machine) = placeholder {
                chosen.insert(machine.to_string());
                continue;
            }
            let machine = self.machine_of(tenant, &machines, node, &mut listed).await;
            let in_group = machine.filter(|machine| machine.spec.node_group.as_deref() == Some(id));
            let Some(machine) = in_group else {
                return Err(AutoscalerError::NotFound(format!(
                    "node {:?} does not belong to node group {:?}",
                    clip(shown(node)),
                    clip(id)
                )));
            };
            chosen.insert(machine.metadata.name.clone());
        }
        self.write(identity, id, |group, members| {
            let mut held = members.held.clone();
            for machine in &chosen {
                let index = machine_index(id, machine).filter(|index| held.remove(index));
                if index.is_none() {
                    return Err(AutoscalerError::Refused(format!(
                        "node {machine:?} is already being removed"
                    )));
                }
            }
            let limits = limits(group);
            let wanted = held.len() as u32;
            if wanted < limits.min_count {
                return Err(AutoscalerError::Refused(format!(
                    "node group {id:?} cannot shrink to {wanted}: its minCount is {}",
                    limits.min_count
                )));
            }
            Ok(held)
        })
        .await
    }

    /// Lowers group `id`'s size by `-delta` machines that have not joined:
    /// those with no machine yet or whose machine has no Node, the newest
    /// first, written as a named removal. A machine with a Node is never
    /// dropped this way: the autoscaler names the nodes it deletes.
    pub(crate) async fn decrease_target(
        &self,
        identity: &Identity,
        id: &str,
        delta: i32,
    ) -> Result<NodeGroup, AutoscalerError> {
        if delta >= 0 {
            return Err(AutoscalerError::Invalid(format!("delta must be negative, got {delta}")));
        }
        let by = delta.unsigned_abs() as usize;
        self.group(identity, id)?;
        let nodes = self.nodes(&identity.tenant).await;
        self.write(identity, id, |group, members| {
            let limits = limits(group);
            let wanted = group.spec.count.saturating_sub(by as u32);
            if wanted < limits.min_count {
                return Err(AutoscalerError::Refused(format!(
                    "node group {id:?} cannot shrink to {wanted}: its minCount is {}",
                    limits.min_count
                )));
            }
            let joined = |index: u32| {
                members
                    .machine(index)
                    .is_some_and(|machine| machine.status.ready || node_of(machine, &nodes).is_some())
            };
            let pending: Vec<u32> =
                members.held.iter().rev().copied().filter(|i| !joined(*i)).take(by).collect();
            if pending.len() < by {
                return Err(AutoscalerError::Refused(format!(
                    "attempt to delete existing nodes: only {} of node group {id:?}'s machines have not \
                     joined; name the nodes to delete instead",
                    pending.len()
                )));
            }
            let mut held = members.held.clone();
            for index in pending {
                held.remove(&index);
            }
            Ok(held)
        })
        .await
    }

    /// The instances of group `id`: its machines, those being made, and
    /// those leaving it.
    pub(crate) async fn instances(
        &self,
        identity: &Identity,
        id: &str,
    ) -> Result<Vec<Instance>, AutoscalerError> {
        let group = self.group(identity, id)?;
        let tenant = identity.tenant.as_str();
        let machines: Vec<Machine> = self
            .machines(tenant)?
            .into_iter()
            .filter(|machine| machine.spec.node_group.as_deref() == Some(id))
            .collect();
        let nodes = self.nodes(tenant).await;
        let ids = group.spec.machine_ids();
        let mut instances = Vec::new();
        for machine_id in &ids {
            let Some(machine) = machines.iter().find(|machine| machine.metadata.name == *machine_id) else {
                let id = format!("{}{tenant}/{machine_id}", crate::PLACEHOLDER_SCHEME);
                instances.push(Instance { id, state: State::Creating, error: None });
                continue;
            };
            let leaving = machine.metadata.deletion_timestamp.is_some()
                || machine.metadata.annotations.contains_key(cms_reconciler::LEAVING_ANNOTATION);
            let state = match (leaving, machine.status.ready) {
                (true, _) => State::Deleting,
                (false, true) => State::Running,
                (false, false) => State::Creating,
            };
            // Only an error that does not clear by itself: a host that does
            // not answer as the tenant's node. A machine still booting says
            // so in its message, which is no error to the autoscaler.
            let stuck = machine.status.stage == cms_reconciler::STAGE_UNRECOGNIZED;
            let error = (state == State::Creating && stuck).then(|| machine.status.message.clone()).flatten();
            instances.push(Instance { id: instance_id(tenant, machine, &nodes), state, error });
        }
        for machine in machines.iter().filter(|machine| !ids.contains(&machine.metadata.name)) {
            instances.push(Instance {
                id: instance_id(tenant, machine, &nodes),
                state: State::Deleting,
                error: None,
            });
        }
        Ok(instances)
    }

    /// Gives each Node of the tenant's autoscaled groups that has no
    /// `spec.providerID` its machine's provider id, as a cloud's controller
    /// would (Talos on metal registers Nodes without one): the autoscaler
    /// pairs instances with Nodes by it, and takes an instance no Node
    /// carries for one that never registered. A Node that cannot be
    /// changed is left as it is, with a warning.
    pub(crate) async fn refresh(&self, identity: &Identity) -> Result<(), AutoscalerError> {
        let groups = self.groups(identity)?;
        let tenant = identity.tenant.as_str();
        let machines = self.machines(tenant)?;
        let autoscaled = |machine: &&Machine| {
            groups
                .iter()
                .any(|group| machine.spec.node_group.as_deref() == Some(group.metadata.name.as_str()))
        };
        let nodes = self.nodes(tenant).await;
        for machine in machines.iter().filter(autoscaled) {
            let Some(id) = machine.spec.provider_id.as_deref() else { continue };
            let Some(node) = node_of(machine, &nodes).filter(|node| node.provider_id.is_none()) else {
                continue;
            };
            match self.kube.set_provider_id(tenant, &node.name, id).await {
                Ok(()) => {
                    tracing::info!(tenant, node = %node.name, provider_id = id, "gave a Node its provider id")
                }
                Err(err) => {
                    tracing::warn!(tenant, node = %node.name, "could not give a Node its provider id: {err}")
                }
            }
        }
        Ok(())
    }

    /// The template node of group `id`, serialized (`template.rs`).
    pub(crate) async fn template(&self, identity: &Identity, id: &str) -> Result<Vec<u8>, AutoscalerError> {
        let group = self.group(identity, id)?;
        let machines = self.machines(&identity.tenant)?;
        let nodes = self.nodes(&identity.tenant).await;
        let sample = machines
            .iter()
            .filter(|machine| machine.spec.node_group.as_deref() == Some(id) && machine.status.ready)
            .find_map(|machine| node_of(machine, &nodes))
            .filter(|node| node.ready);
        crate::template::template(&group, sample)
    }

    /// The price of an hour of a machine of the group of `node`, if the
    /// group sets one.
    pub(crate) async fn hourly_price(
        &self,
        identity: &Identity,
        node: &NodeName,
    ) -> Result<f64, AutoscalerError> {
        let group = self.group_for_node(identity, node).await?.ok_or_else(|| {
            AutoscalerError::NotFound(format!("node {:?} is in no autoscaled node group", clip(shown(node))))
        })?;
        group.spec.autoscaling.and_then(|limits| limits.price_per_hour).ok_or_else(|| {
            AutoscalerError::Unimplemented(format!("node group {:?} sets no price", group.metadata.name))
        })
    }

    /// Writes group `id` at the version read with the machines `change`
    /// gives (indexes), reading again when another writer came first.
    async fn write(
        &self,
        identity: &Identity,
        id: &str,
        change: impl Fn(&NodeGroup, &Members) -> Result<BTreeSet<u32>, AutoscalerError>,
    ) -> Result<NodeGroup, AutoscalerError> {
        for _ in 0..ATTEMPTS {
            let tenant = self.tenant(identity)?;
            if tenant.metadata.deletion_timestamp.is_some() {
                return Err(AutoscalerError::Refused(format!(
                    "tenant {:?} is being deleted",
                    identity.tenant
                )));
            }
            let mut group = self.group(identity, id)?;
            let machines = self.machines(&identity.tenant)?;
            let members = Members::of(&group, &machines);
            let wanted = change(&group, &members)?;
            members.set(&mut group, &wanted);
            match self.tenancy.update_child(&identity.tenant, group).await {
                Ok(object) => return object.parse().map_err(|_| corrupt(&identity.tenant)),
                Err(TenancyError::Store(StoreError::Conflict { .. })) => continue,
                Err(err) => return Err(err.into()),
            }
        }
        Err(AutoscalerError::Conflict(format!(
            "node group {id:?} kept changing while it was written; try again"
        )))
    }
}

/// A group's machines by index: those it holds, and those whose machine
/// objects exist (it holds them, or they are leaving it).
pub(crate) struct Members<'a> {
    pub(crate) held: BTreeSet<u32>,
    present: BTreeSet<u32>,
    machines: &'a [Machine],
    group: String,
}

impl<'a> Members<'a> {
    fn of(group: &NodeGroup, machines: &'a [Machine]) -> Members<'a> {
        let name = group.metadata.name.clone();
        let present = machines
            .iter()
            .filter(|machine| machine.spec.node_group.as_deref() == Some(name.as_str()))
            .filter_map(|machine| machine_index(&name, &machine.metadata.name))
            .collect();
        Members { held: group.spec.indexes().into_iter().collect(), present, machines, group: name }
    }

    /// The machine of index `index`, if it exists.
    pub(crate) fn machine(&self, index: u32) -> Option<&'a Machine> {
        let id = cms_model::machine_id(&self.group, index);
        self.machines.iter().find(|machine| machine.metadata.name == id)
    }

    /// The `n` lowest indexes the group may take anew: neither held nor
    /// of a machine that still exists (one leaving the group).
    fn free(&self, n: u32) -> Vec<u32> {
        (0..=u32::MAX)
            .filter(|i| !self.held.contains(i) && !self.present.contains(i))
            .take(n as usize)
            .collect()
    }

    /// Sets `group`'s `count` and `removedMachines` so that it holds
    /// exactly `wanted`: every index under the highest that it does not
    /// hold is removed, and so is every machine still leaving it, so that
    /// no id comes back while its machine exists; ids of machines that are
    /// gone are free again above the highest.
    fn set(&self, group: &mut NodeGroup, wanted: &BTreeSet<u32>) {
        let highest = wanted.last().copied().unwrap_or(0);
        let mut removed: BTreeSet<u32> = (0..highest).filter(|i| !wanted.contains(i)).collect();
        removed.extend(self.present.iter().filter(|i| !wanted.contains(i)));
        group.spec.count = wanted.len() as u32;
        group.spec.removed_machines =
            removed.into_iter().map(|i| cms_model::machine_id(&self.group, i)).collect();
        debug_assert_eq!(group.spec.indexes().into_iter().collect::<BTreeSet<u32>>(), *wanted);
    }
}

/// Whether the autoscaler is offered `group`: a worker group with limits.
fn offered(group: &NodeGroup) -> bool {
    group.spec.role == Role::Worker
        && group.spec.autoscaling.is_some()
        && group.metadata.deletion_timestamp.is_none()
}

/// The limits of an offered group: `minCount..=maxCount`.
fn limits(group: &NodeGroup) -> Limits {
    group.spec.autoscaling.as_ref().map_or(
        Limits { min_count: group.spec.count, max_count: group.spec.count },
        |limits| Limits { min_count: limits.min_count, max_count: limits.max_count },
    )
}

/// A group's size limits.
struct Limits {
    min_count: u32,
    max_count: u32,
}

/// The id a machine's Node carries: its Kubernetes Node's provider id, else
/// the machine's, else one the service makes up.
fn instance_id(tenant: &str, machine: &Machine, nodes: &[KubeNode]) -> String {
    node_of(machine, nodes)
        .and_then(|node| node.provider_id.clone())
        .or_else(|| machine.spec.provider_id.clone())
        .unwrap_or_else(|| placeholder_id(tenant, machine))
}

/// `cms://<tenant>/<machine>`: the id of an instance whose provider id is
/// not known.
fn placeholder_id(tenant: &str, machine: &Machine) -> String {
    format!("{}{tenant}/{}", crate::PLACEHOLDER_SCHEME, machine.metadata.name)
}

fn positive(field: &str, value: i32) -> Result<u32, AutoscalerError> {
    u32::try_from(value)
        .ok()
        .filter(|value| *value > 0)
        .ok_or_else(|| AutoscalerError::Invalid(format!("{field} must be positive, got {value}")))
}

fn shown(node: &NodeName) -> &str {
    if node.name.is_empty() { &node.provider_id } else { &node.name }
}

/// At most 128 characters of what a caller sent, for a message.
pub(crate) fn clip(text: &str) -> String {
    text.chars().take(128).collect()
}

fn corrupt(tenant: &str) -> AutoscalerError {
    tracing::error!(tenant, "a stored object of the tenant does not parse");
    AutoscalerError::Unavailable("a stored object does not parse".into())
}

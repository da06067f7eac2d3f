//! After the infrastructure, the nodes. A machine gets its machine config
//! over the node API whenever the config rendered for it differs from the
//! one it last took, which the annotation [`CONFIG_HASH_ANNOTATION`]
//! records. A cloud instance boots its first config as user data; its
//! machine starts with no fingerprint, since the store cannot tell which
//! config an instance made in an earlier pass booted, so the config is
//! applied once more when it first answers (the same config changes
//! nothing). Every later config reaches it here too, over mTLS, as on
//! metal, and its user data never changes (`ignore_changes`), so no config
//! change replaces an instance. A host that carries it has taken a
//! config, and is only ever sent one over mTLS against the tenant's OS CA:
//! maintenance mode (no client certificate, any server certificate) is for
//! a host that never took one: the annotation goes only when the node
//! acknowledged the service's `Reset` (`leaving.rs`), when the machine is
//! replaced (a machine DELETE), or when its address changes to one where
//! no machine of the tenant left a configured host (`machines.rs`, which
//! otherwise marks it [`CONFIG_UNKNOWN`]). A node that
//! fails the CA gets nothing, and the machine's `status.message` says why,
//! as it says whatever else keeps the machine from being configured or
//! answering; a pass that finds nothing wrong clears it.
//!
//! A machine that has not answered yet is asked for its version with the
//! tenant's credentials, and becomes `connected` (stage `joining`) when it
//! answers; it is `ready` once its Kubernetes Node is Ready too
//! (`readiness.rs`). Machines that answered are not asked again: health
//! probes happen on request only.

use std::collections::{BTreeMap, HashMap};

use cms_model::{Kind, Machine, MachineSpec, MachineStatus, Provider, Role, Tenant};
use cms_store::{Draft, Key, StoreError};
use cms_tofu::{MachinePlan, WorkspacePlan};
use futures_util::future::join_all;
use sha2::{Digest, Sha256};

use crate::leaving::is_leaving;
use crate::machines::{self, planned};
use crate::rollout::UPGRADING_ANNOTATION;
use crate::{Context, ReconcileError};
use cms_tenancy::NodeRef;

/// The machine annotation holding the fingerprint of the config the node
/// last took.
pub const CONFIG_HASH_ANNOTATION: &str = "service.io/config-hash";

/// The [`CONFIG_HASH_ANNOTATION`] of a machine whose host took a config of
/// the tenant that is not known to be this machine's: a host given to
/// another machine (hosts reordered, or one that left without a reset and
/// came back). It is configured, so it is only spoken to over mTLS, and
/// since no fingerprint equals it, its config is due.
pub const CONFIG_UNKNOWN: &str = "unknown";

/// Why a metal host's config cannot be rendered without a renderer.
const NO_RENDERER: &str = "this server renders no machine configs";

/// What the nodes of a tenant came to.
#[derive(Debug, Default)]
pub(crate) struct Settled {
    /// `machine: reason` for each machine that is not configured or does
    /// not answer.
    pub(crate) pending: Vec<String>,
}

impl Settled {
    /// What is wrong with `machine` on the Talos side, if anything.
    pub(crate) fn problem(&self, machine: &str) -> Option<&str> {
        self.pending.iter().find_map(|line| line.strip_prefix(machine)?.strip_prefix(": "))
    }
}

/// Configures and checks the tenant's machines, each at once.
pub(crate) async fn settle(
    tenant: &Tenant,
    plan: &WorkspacePlan,
    ctx: &Context,
) -> Result<Settled, ReconcileError> {
    let name = tenant.metadata.name.as_str();
    let stored = machines::stored(ctx.store.as_ref(), name)?;
    let mut configs: HashMap<&str, Result<String, String>> = HashMap::new();
    for machine in &plan.machines {
        if configs.contains_key(machine.group.as_str()) {
            continue;
        }
        // A cloud group's config is rendered already: its user data.
        let rendered = match (&machine.user_data, &ctx.configs) {
            (Some(config), _) => Ok(config.clone()),
            (None, Some(renderer)) => renderer
                .render(name.to_string(), machine.group.clone(), machine.role)
                .await
                .map_err(|err| err.to_string()),
            (None, None) => Err(NO_RENDERER.to_string()),
        };
        configs.insert(machine.group.as_str(), rendered);
    }
    // Machines being upgraded are the rollout's.
    let live: Vec<(&Machine, &MachinePlan)> = stored
        .values()
        .filter(|machine| machine.metadata.deletion_timestamp.is_none())
        .filter(|machine| !machine.metadata.annotations.contains_key(UPGRADING_ANNOTATION))
        .filter(|machine| !is_leaving(machine))
        .filter_map(|machine| Some((machine, planned(plan, &machine.metadata.name)?)))
        .collect();
    // Control planes first, one at a time, then the workers at once: a
    // changed config (a new Kubernetes version) reaches them in that order.
    let mut outcomes = Vec::new();
    for (machine, plan) in live.iter().filter(|(_, plan)| plan.role == Role::ControlPlane) {
        outcomes.push(settle_one(name, machine, plan, configs.get(plan.group.as_str()), ctx).await);
    }
    let workers = live
        .iter()
        .filter(|(_, plan)| plan.role != Role::ControlPlane)
        .map(|(machine, plan)| settle_one(name, machine, plan, configs.get(plan.group.as_str()), ctx));
    outcomes.extend(join_all(workers).await);
    let mut settled = Settled::default();
    for outcome in outcomes {
        let (machine, problem) = outcome?;
        if let Some(reason) = problem {
            settled.pending.push(format!("{machine}: {reason}"));
        }
    }
    settled.pending.sort();
    Ok(settled)
}

/// One machine: its config when it is a metal host, then its version
/// while it is not ready. Gives the machine id and what is still wrong.
async fn settle_one(
    tenant: &str,
    machine: &Machine,
    plan: &MachinePlan,
    config: Option<&Result<String, String>>,
    ctx: &Context,
) -> Result<(String, Option<String>), ReconcileError> {
    let id = machine.metadata.name.clone();
    let Some(address) = machine.spec.management_address.clone() else {
        return Ok((id, Some("no management address yet".into())));
    };
    let node = NodeRef { tenant: tenant.to_string(), machine: id.clone(), management_address: address };
    let mut annotations = machine.metadata.annotations.clone();
    let mut status = machine.status.clone();
    let mut connected = machine.spec.connected;
    let mut problem = None;
    {
        match config {
            Some(Ok(yaml)) => {
                let hash = fingerprint(yaml);
                let taken = annotations.get(CONFIG_HASH_ANNOTATION);
                if taken != Some(&hash) {
                    // A host that took a config is never asked in maintenance
                    // mode, nor is a cloud instance, which booted with one.
                    let configured = taken.is_some() || plan.provider != Provider::Metal;
                    match ctx.nodes.apply_config(&node, yaml, configured).await {
                        Ok(()) => {
                            tracing::info!(tenant, machine = %id, "applied the machine config");
                            annotations.insert(CONFIG_HASH_ANNOTATION.to_string(), hash);
                            if matches!(status.stage.as_str(), "" | "provisioning") {
                                status.stage = "initializing".into();
                            }
                        }
                        Err(reason) => problem = Some(format!("applying the machine config: {reason}")),
                    }
                }
            }
            Some(Err(reason)) => problem = Some(format!("rendering the machine config: {reason}")),
            None => problem = Some(NO_RENDERER.to_string()),
        }
    }
    let configured = plan.provider != Provider::Metal || annotations.contains_key(CONFIG_HASH_ANNOTATION);
    if configured && !connected {
        match ctx.nodes.version(&node).await {
            Ok(version) => {
                if matches!(status.stage.as_str(), "" | "provisioning" | "initializing") {
                    status.stage = "joining".into();
                }
                status.talos_version = Some(version);
                connected = true;
            }
            Err(reason) => {
                problem.get_or_insert(format!("not answering yet: {reason}"));
            }
        }
    }
    status.message = problem.clone();
    write(ctx, tenant, machine, Observed { annotations, connected, status }).await?;
    Ok((id, problem))
}

/// The fingerprint of a rendered config.
fn fingerprint(config: &str) -> String {
    hex::encode(&Sha256::digest(config.as_bytes())[..12])
}

/// What a pass observed of a machine: written when it differs.
pub(crate) struct Observed {
    pub(crate) annotations: BTreeMap<String, String>,
    pub(crate) connected: bool,
    pub(crate) status: MachineStatus,
}

/// Writes the machine's changed annotations and `connected`, then its
/// status. A machine another writer changed meanwhile is left to the next
/// pass.
pub(crate) async fn write(
    ctx: &Context,
    tenant: &str,
    machine: &Machine,
    observed: Observed,
) -> Result<(), ReconcileError> {
    let store = ctx.store.as_ref();
    let key = Key::child(Kind::Machine, tenant, machine.metadata.name.clone());
    let corrupt = |source| ReconcileError::Corrupt { what: key.to_string(), source };
    let mut version = machine.metadata.resource_version.unwrap_or_default();
    if observed.annotations != machine.metadata.annotations || observed.connected != machine.spec.connected {
        let spec = MachineSpec { connected: observed.connected, ..machine.spec.clone() };
        let draft = Draft {
            labels: machine.metadata.labels.clone(),
            annotations: observed.annotations,
            spec: serde_json::to_value(&spec).map_err(corrupt)?,
            ..Draft::default()
        };
        version = match store.update(key.clone(), draft, version).await {
            Ok(object) => object.resource_version,
            Err(StoreError::Conflict { .. } | StoreError::NotFound(_)) => return Ok(()),
            Err(err) => return Err(err.into()),
        };
    }
    if observed.status != machine.status {
        let value = serde_json::to_value(&observed.status).map_err(corrupt)?;
        match store.update_status(key, value, Some(version)).await {
            Ok(_) | Err(StoreError::Conflict { .. } | StoreError::NotFound(_)) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}

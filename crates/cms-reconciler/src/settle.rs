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
//! fails the CA (a host in maintenance mode or another cluster's node at a
//! configured address: a replaced host or an impostor, which the service
//! cannot tell apart) gets nothing: its machine waits at stage
//! [`STAGE_UNRECOGNIZED`] until an operator confirms a replacement with a
//! machine DELETE. The machine's `status.message` says why, as it says
//! whatever else keeps the machine from being configured or answering; a
//! pass that finds nothing wrong clears it.
//!
//! Configs are applied without a reboot. A change the node takes only with
//! one (Talos refuses it in `NO_REBOOT` mode) is marked
//! [`REBOOT_PENDING_ANNOTATION`] and left to the rollout, which reboots
//! machines in turn, as upgrades roll (`rollout/reboot.rs`). While a Kubernetes upgrade
//! rolls, each machine's config names the versions its own steps reached
//! (`rollout/kubernetes.rs`).
//!
//! Every pass asks every configured machine for its version with the
//! tenant's credentials, all at once: a machine becomes `connected` (stage
//! `joining`) when it answers, and `connected: false` at stage
//! [`STAGE_OFF`] when it stops; it is `ready` once its Kubernetes Node is
//! Ready too (`readiness.rs`).

use std::collections::{BTreeMap, HashMap};

use cms_model::{Kind, Machine, MachineSpec, MachineStatus, Provider, Role, Tenant};
use cms_store::{Draft, Key, StoreError};
use cms_tenancy::{KubernetesVersions, NodeError};
use cms_tofu::{MachinePlan, WorkspacePlan};
use futures_util::{StreamExt, stream};
use sha2::{Digest, Sha256};

use crate::blocker::{Fault, MACHINE_MESSAGE_LIMIT, one_line};
use crate::cluster;
use crate::machines::planned;
use crate::rollout::{self, KubernetesRollout, MACHINE_KUBERNETES_ANNOTATION};
use crate::view::View;
use crate::{Context, ReconcileError};

/// The machine annotation holding the fingerprint of the config the node
/// last took.
pub const CONFIG_HASH_ANNOTATION: &str = "service.io/config-hash";

/// The [`CONFIG_HASH_ANNOTATION`] of a machine whose host took a config of
/// the tenant that is not known to be this machine's: a host given to
/// another machine (hosts reordered, or one that left without a reset and
/// came back). It is configured, so it is only spoken to over mTLS, and
/// since no fingerprint equals it, its config is due.
pub const CONFIG_UNKNOWN: &str = "unknown";

/// How many machines are configured or asked at once.
const AT_ONCE: usize = 32;

/// Why a metal host's config cannot be rendered without a renderer.
const NO_RENDERER: &str = "this server renders no machine configs";

/// The machine annotation of a config change the node would take only
/// with a reboot: the fingerprint of that config. The rollout applies it in
/// turn, as it rolls upgrades.
pub const REBOOT_PENDING_ANNOTATION: &str = "service.io/reboot-pending";

/// How a machine's message begins while its config change waits for the
/// reboot it needs.
const REBOOT_NOTE: &str = "its config change needs a reboot, which the rollout makes in turn";

/// The stage of a machine that stopped answering.
pub const STAGE_OFF: &str = "off";

/// The stage of a machine whose host does not answer as the tenant's node:
/// a replaced host or an impostor, waiting for an operator.
pub const STAGE_UNRECOGNIZED: &str = "awaiting-replacement";

/// What the nodes of a tenant came to.
#[derive(Debug, Default)]
pub(crate) struct Settled {
    /// What is wrong with each machine that is not configured or does not
    /// answer, by machine.
    pub(crate) problems: BTreeMap<String, Problem>,
    /// The machines that stopped answering.
    pub(crate) off: Vec<String>,
    /// The machines that do not run the config rendered for them in this
    /// pass (a rolling step's machines among them), by name.
    pub(crate) behind: Vec<String>,
}

impl Settled {
    /// What is wrong with `machine` on the Talos side, if anything.
    pub(crate) fn problem(&self, machine: &str) -> Option<&Problem> {
        self.problems.get(machine)
    }
}

/// Why a machine is not configured or does not answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    pub(crate) fault: Fault,
    /// The short cause, for the tenant's lists.
    pub(crate) cause: String,
    /// The machine's `status.message`.
    pub(crate) message: String,
}

impl Problem {
    /// A problem whose message is its cause.
    fn new(fault: Fault, cause: impl Into<String>) -> Problem {
        let cause = cause.into();
        Problem { fault, message: cause.clone(), cause }
    }

    /// A failed node API call: its cause is the error's one-line summary,
    /// its message that, after what was being done.
    fn node(fault: Fault, doing: &str, err: &NodeError) -> Problem {
        let cause = err.summary();
        Problem { fault, message: format!("{doing}: {cause}"), cause }
    }
}

/// Configures and checks the tenant's machines. Configs go to control
/// planes one at a time, then to the workers at once (`one_by_one`: one at
/// a time too, as a rotation of the CAs goes); then every machine is asked
/// for its version at once.
pub(crate) async fn settle(
    tenant: &Tenant,
    plan: &WorkspacePlan,
    view: &mut View,
    (kubernetes, one_by_one): (&KubernetesRollout, bool),
    ctx: &Context,
) -> Result<Settled, ReconcileError> {
    let name = tenant.metadata.name.as_str();
    // Machines in a rolling step are the rollout's.
    let mut live: Vec<(Machine, MachinePlan)> = view
        .live()
        .filter(|machine| !rollout::in_flight(machine))
        .filter_map(|machine| Some((machine.clone(), planned(plan, &machine.metadata.name)?.clone())))
        .collect();
    live.sort_by_key(|(_, plan)| plan.role != Role::ControlPlane);
    let mut configs: HashMap<(String, KubernetesVersions), Result<String, String>> = HashMap::new();
    for (machine, machine_plan) in &live {
        let versions = kubernetes.versions_of(machine);
        let key = (machine_plan.group.clone(), versions.clone());
        if configs.contains_key(&key) {
            continue;
        }
        let rendered = render(name, machine_plan, versions, &kubernetes.starting(), ctx).await;
        configs.insert(key, rendered);
    }
    let config_of = |machine: &Machine, plan: &MachinePlan| {
        configs.get(&(plan.group.clone(), kubernetes.versions_of(machine)))
    };
    // Control planes one at a time, then the workers, several at once; the
    // outcomes in the order of `live`, control planes first.
    let control_planes = live.iter().take_while(|(_, plan)| plan.role == Role::ControlPlane).count();
    let mut configured = Vec::new();
    for (machine, plan) in &live[..control_planes] {
        configured.push(configure(name, machine, plan, config_of(machine, plan), ctx).await?);
    }
    let workers: Vec<_> = live[control_planes..]
        .iter()
        .map(|(machine, plan)| configure(name, machine, plan, config_of(machine, plan), ctx))
        .collect();
    let at_once = if one_by_one { 1 } else { AT_ONCE };
    for outcome in stream::iter(workers).buffered(at_once).collect::<Vec<_>>().await {
        configured.push(outcome?);
    }
    // Who does not run its config now: a rolling step's machines, and
    // those whose config did not go through.
    let mut behind: Vec<String> = view
        .live()
        .filter(|machine| rollout::in_flight(machine) && planned(plan, &machine.metadata.name).is_some())
        .map(|machine| machine.metadata.name.clone())
        .collect();
    for (outcome, (machine, plan)) in configured.iter().zip(&live) {
        let runs = match config_of(machine, plan) {
            // As stored: a write that lost its race leaves the machine behind.
            Some(Ok(yaml)) => {
                outcome.machine.metadata.annotations.get(CONFIG_HASH_ANNOTATION) == Some(&fingerprint(yaml))
            }
            _ => false,
        };
        if !runs || outcome.unrecognized.is_some() {
            behind.push(machine.metadata.name.clone());
        }
    }
    // Then every machine answers, or not.
    let paused = tenant.metadata.annotations.contains_key(rollout::PAUSED_ANNOTATION);
    let checks = configured.into_iter().zip(&live).map(|(mut outcome, (_, plan))| {
        // The versions of an upgrade that no longer rolls mean nothing.
        if !kubernetes.active() {
            outcome.annotations.remove(MACHINE_KUBERNETES_ANNOTATION);
        }
        check(name, plan, outcome, paused, ctx)
    });
    let checks: Vec<_> = checks.collect();
    behind.sort();
    let mut settled = Settled { behind, ..Settled::default() };
    for outcome in stream::iter(checks).buffered(AT_ONCE).collect::<Vec<_>>().await {
        let (written, problem, off) = outcome?;
        let id = written.as_ref().map(|machine| machine.metadata.name.clone());
        if let (Some(id), Some(problem)) = (&id, problem) {
            settled.problems.insert(id.clone(), problem);
        }
        if let (Some(id), true) = (&id, off) {
            settled.off.push(id.clone());
        }
        view.put_written(written);
    }
    settled.off.sort();
    Ok(settled)
}

/// A machine's config at `versions`: a cloud group's user data when it
/// names those (new machines' `starting` versions), else rendered.
async fn render(
    tenant: &str,
    plan: &MachinePlan,
    versions: KubernetesVersions,
    starting: &KubernetesVersions,
    ctx: &Context,
) -> Result<String, String> {
    match (&plan.user_data, &ctx.configs) {
        (Some(config), _) if versions == *starting => Ok(config.clone()),
        (_, Some(renderer)) => renderer
            .render(tenant.to_string(), plan.group.clone(), plan.role, Some(versions))
            .await
            .map_err(|err| err.to_string()),
        (Some(config), None) => Ok(config.clone()),
        (None, None) => Err(NO_RENDERER.to_string()),
    }
}

/// What configuring a machine came to.
struct Configured {
    /// The machine as stored: written already when its node took a config.
    machine: Machine,
    annotations: BTreeMap<String, String>,
    status: MachineStatus,
    problem: Option<Problem>,
    /// The node is not the tenant's: a replaced host or an impostor.
    unrecognized: Option<String>,
    /// What the machine's message says when nothing is wrong: a change
    /// that waits for its reboot, and why.
    note: Option<String>,
}

/// Gives the machine its config when it differs from the one it took, and
/// records at once that the node took it, so that a restart resends
/// nothing. A change the node refuses to take without a reboot waits for
/// its turn in the rollout ([`REBOOT_PENDING_ANNOTATION`]).
async fn configure(
    tenant: &str,
    machine: &Machine,
    plan: &MachinePlan,
    config: Option<&Result<String, String>>,
    ctx: &Context,
) -> Result<Configured, ReconcileError> {
    let mut annotations = machine.metadata.annotations.clone();
    let mut status = machine.status.clone();
    let unchanged = |problem: Option<Problem>| Configured {
        machine: machine.clone(),
        annotations: machine.metadata.annotations.clone(),
        status: machine.status.clone(),
        problem,
        unrecognized: None,
        note: None,
    };
    let Some(node) = cluster::node_ref(tenant, machine) else {
        return Ok(unchanged(Some(Problem::new(Fault::Starting, "no management address yet"))));
    };
    let yaml = match config {
        Some(Ok(yaml)) => yaml,
        Some(Err(reason)) => {
            return Ok(unchanged(Some(Problem::new(
                Fault::Config,
                format!("rendering the machine config: {reason}"),
            ))));
        }
        None => return Ok(unchanged(Some(Problem::new(Fault::Config, NO_RENDERER)))),
    };
    let hash = fingerprint(yaml);
    let taken = annotations.get(CONFIG_HASH_ANNOTATION);
    if taken == Some(&hash) && annotations.contains_key(REBOOT_PENDING_ANNOTATION) {
        // Back to the config it runs: nothing waits for a reboot any more.
        annotations.remove(REBOOT_PENDING_ANNOTATION);
        let machine = machine.clone();
        return Ok(Configured {
            machine,
            annotations,
            status,
            problem: None,
            unrecognized: None,
            note: None,
        });
    }
    if taken == Some(&hash) || annotations.get(REBOOT_PENDING_ANNOTATION) == Some(&hash) {
        return Ok(unchanged(None));
    }
    // A host that took a config is never asked in maintenance mode, nor is
    // a cloud instance, which booted with one.
    let configured = taken.is_some() || plan.provider != Provider::Metal;
    let id = &machine.metadata.name;
    let mut note = None;
    let mut stored = machine.clone();
    let (problem, unrecognized) = match ctx.nodes.apply_config(&node, yaml, configured).await {
        Ok(()) => {
            tracing::info!(tenant, machine = %id, "applied the machine config");
            annotations.insert(CONFIG_HASH_ANNOTATION.to_string(), hash);
            annotations.remove(REBOOT_PENDING_ANNOTATION);
            if matches!(status.stage.as_str(), "" | "provisioning") {
                status.stage = "initializing".into();
            }
            // Recorded before anything else is sent: a restart resends
            // nothing the node took. A machine another writer changed
            // meanwhile is written in the check, or the next pass.
            let observed = Observed {
                annotations: annotations.clone(),
                connected: machine.spec.connected,
                status: status.clone(),
            };
            if let Some(written) = write(ctx, tenant, machine, observed).await? {
                stored = written;
            }
            (None, None)
        }
        Err(NodeError::RebootRequired(reason)) => {
            tracing::info!(tenant, machine = %id, %reason, "the config change needs a reboot; it waits for its turn");
            annotations.insert(REBOOT_PENDING_ANNOTATION.to_string(), hash);
            note = Some(format!("{REBOOT_NOTE}: {reason}"));
            (None, None)
        }
        Err(err @ NodeError::Untrusted { .. }) => (None, Some(err.to_string())),
        Err(reason) => {
            let fault = if reason.is_unreachable() { Fault::Unreachable } else { Fault::Config };
            (Some(Problem::node(fault, "applying the machine config", &reason)), None)
        }
    };
    Ok(Configured { machine: stored, annotations, status, problem, unrecognized, note })
}

/// Asks a configured machine for its version: it is `connected` while it
/// answers, and `off` once it stops. Gives the machine as written, what is
/// wrong with it, and whether it is off. Its `status.message` says what is
/// wrong, and clears once nothing is (but for a note that still holds: a
/// change waiting for its reboot, a step at which the rollout, `paused`,
/// stopped).
async fn check(
    tenant: &str,
    plan: &MachinePlan,
    configured: Configured,
    paused: bool,
    ctx: &Context,
) -> Result<(Option<Machine>, Option<Problem>, bool), ReconcileError> {
    let Configured { machine, annotations, mut status, mut problem, unrecognized, note } = configured;
    let machine = &machine;
    let mut connected = machine.spec.connected;
    let mut off = false;
    let took_config = plan.provider != Provider::Metal || annotations.contains_key(CONFIG_HASH_ANNOTATION);
    let answer = match (&unrecognized, cluster::node_ref(tenant, machine)) {
        (Some(why), _) => Some(Err(NodeError::Untrusted { endpoint: why.clone() })),
        (None, Some(node)) if took_config => Some(ctx.nodes.version(&node).await),
        _ => None,
    };
    match answer {
        Some(Ok(version)) => {
            if matches!(
                status.stage.as_str(),
                "" | "provisioning" | "initializing" | STAGE_OFF | STAGE_UNRECOGNIZED
            ) {
                status.stage = "joining".into();
            }
            status.talos_version = Some(version);
            connected = true;
        }
        Some(Err(NodeError::Untrusted { .. })) => {
            let address = machine.spec.management_address.clone().unwrap_or_default();
            let id = &machine.metadata.name;
            let cause = format!("the host at {address} does not answer as this tenant's node");
            let message = format!(
                "{cause} (it answers in maintenance mode, or with a certificate the tenant's OS CA did \
                 not sign): a replaced host or an impostor, so nothing is sent to it. If the host was \
                 replaced, confirm it with `cms delete machine {id} -t {tenant}`: the machine leaves etcd \
                 and the cluster, then the host takes its config anew"
            );
            problem = Some(Problem { fault: Fault::Unrecognized, cause, message });
            status.stage = STAGE_UNRECOGNIZED.into();
            status.ready = false;
            connected = false;
        }
        Some(Err(reason)) if connected || status.stage == STAGE_OFF => {
            // Whatever its config's apply said, it no longer answers.
            problem = Some(Problem::node(Fault::Off, "off: not answering", &reason));
            status.stage = STAGE_OFF.into();
            status.ready = false;
            connected = false;
            off = true;
        }
        Some(Err(reason)) => {
            problem.get_or_insert_with(|| Problem::node(Fault::Starting, "not answering yet", &reason));
        }
        None => {}
    }
    let said = problem.as_ref().map(|problem| problem.message.clone());
    status.message = said.or(note).or_else(|| match machine.status.message.as_deref() {
        // Kept while the change still waits for its reboot, and while the
        // rollout that stopped at this machine is paused.
        Some(message)
            if message.starts_with(REBOOT_NOTE) && annotations.contains_key(REBOOT_PENDING_ANNOTATION) =>
        {
            Some(message.to_string())
        }
        Some(message) if message.starts_with(rollout::STOPPED_NOTE) && paused => Some(message.to_string()),
        _ => None,
    });
    status.message = status.message.map(|message| one_line(&message, MACHINE_MESSAGE_LIMIT));
    let written = write(ctx, tenant, machine, Observed { annotations, connected, status }).await?;
    Ok((written, problem, off))
}

/// The fingerprint of a rendered config.
pub(crate) fn fingerprint(config: &str) -> String {
    hex::encode(&Sha256::digest(config.as_bytes())[..12])
}

/// What a pass observed of a machine: written when it differs.
pub(crate) struct Observed {
    pub(crate) annotations: BTreeMap<String, String>,
    pub(crate) connected: bool,
    pub(crate) status: MachineStatus,
}

/// Writes the machine's changed annotations and `connected`, then its
/// status; gives the machine as written (as it was when nothing changed).
/// A machine another writer changed meanwhile is left to the next pass,
/// and gives `None`.
pub(crate) async fn write(
    ctx: &Context,
    tenant: &str,
    machine: &Machine,
    observed: Observed,
) -> Result<Option<Machine>, ReconcileError> {
    let store = ctx.store.as_ref();
    let key = Key::child(Kind::Machine, tenant, machine.metadata.name.clone());
    let corrupt = |source| ReconcileError::Corrupt { what: key.to_string(), source };
    let mut version = machine.metadata.resource_version.unwrap_or_default();
    let mut written = Some(machine.clone());
    if observed.annotations != machine.metadata.annotations || observed.connected != machine.spec.connected {
        let spec = MachineSpec { connected: observed.connected, ..machine.spec.clone() };
        let draft = Draft {
            labels: machine.metadata.labels.clone(),
            annotations: observed.annotations,
            spec: serde_json::to_value(&spec).map_err(corrupt)?,
            ..Draft::default()
        };
        match store.update(key.clone(), draft, version).await {
            Ok(object) => {
                version = object.resource_version;
                written = Some(object.parse().map_err(corrupt)?);
            }
            Err(StoreError::Conflict { .. } | StoreError::NotFound(_)) => return Ok(None),
            Err(err) => return Err(err.into()),
        }
    }
    if observed.status != machine.status {
        let value = serde_json::to_value(&observed.status).map_err(corrupt)?;
        match store.update_status(key.clone(), value, Some(version)).await {
            Ok(object) => written = Some(object.parse().map_err(corrupt)?),
            Err(StoreError::Conflict { .. } | StoreError::NotFound(_)) => return Ok(None),
            Err(err) => return Err(err.into()),
        }
    }
    Ok(written)
}

//! One reconcile of one tenant, in kube-runtime's shape:
//! `reconcile(tenant, ctx) -> Result<Action, ReconcileError>`.
//!
//! A live tenant: render its workspace; when the inputs hash equals the last
//! good apply's (the tenant's [`APPLIED_ANNOTATION`]) and no machine awaits
//! replacement, no tool runs. Otherwise
//! apply (replacing deleted machines), record the projection, bring the
//! machines in the store in line with it, apply `metal` configs, bootstrap
//! etcd once (`bootstrap.rs`), and write the status: the phase
//! (`status::phase`), `ready`, the conditions, and of a tenant that is not
//! ready the first blocker as its message (`blocker.rs`). A deleting tenant:
//! destroy, then clear the finalizers, which removes the record and
//! everything in it.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use cms_model::{Machine, Phase, Role, Tenant};
use cms_store::{FINALIZER_MACHINES, FINALIZER_SECRETS, Key, Leases, Store};
use cms_tenancy::{CaRotations, KubeClient, MADE_ENDPOINT_ANNOTATION, MachineConfigs, NodeClient};
use cms_tofu::{Network, Tofu, WorkspacePlan, endpoint_address, project};

use crate::blocker::{self, Pass, listed};
use crate::bootstrap::{self, BOOTSTRAPPED_ANNOTATION, Bootstrap};
use crate::ca_rotation::{self, Step};
use crate::cluster::{self, Check, Observed};
use crate::leaving;
use crate::machines::{self, newest_first, planned};
use crate::outdated;
use crate::plan;
use crate::readiness;
use crate::replacement;
use crate::rollout::{self, KubernetesRollout, Rollout, UPGRADE_POLL};
use crate::settle::{STAGE_OFF, settle};
use crate::state_lock::{self, StateLockOptions};
use crate::status::{
    self, BOOTSTRAPPED, ETCD_HEALTHY, FIRST_READY_ANNOTATION, KUBERNETES_API_READY, MACHINES_CONNECTED,
    MACHINES_READY, NODES_READY, PROVISIONED, set_condition,
};
use crate::teardown;
use crate::view::View;
use crate::{Action, ReconcileError};

/// The tenant annotation holding the inputs hash (rendered workspace and
/// credentials fingerprint) of the last good apply: equal inputs run no tool.
pub const APPLIED_ANNOTATION: &str = "service.io/applied-inputs";

/// The Kubernetes API port of an endpoint the service makes.
const KUBERNETES_API_PORT: u16 = 6443;

/// How soon a tenant whose machines are not all ready is looked at again
/// (or the resync interval, when shorter).
pub const NODE_RETRY: Duration = Duration::from_secs(10);

/// How soon a tenant with machines on their way out is looked at again.
pub const LEAVE_POLL: Duration = Duration::from_secs(2);

/// The message of a tenant that is not ready while the tool applies.
const APPLYING: &str = "the provisioning tool is applying the infrastructure";

/// Work leases, for several replicas on one database: a tenant is
/// reconciled only under its lease, and every write of that reconcile is
/// fenced by it.
#[derive(Clone)]
pub struct LeaseOptions {
    pub leases: Arc<dyn Leases>,
    /// This replica, as lease holders are named.
    pub holder: String,
    /// How long a lease lasts unless renewed; renewed every third of it
    /// while a reconcile runs.
    pub ttl: Duration,
}

impl std::fmt::Debug for LeaseOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseOptions").field("holder", &self.holder).field("ttl", &self.ttl).finish()
    }
}

/// What a reconcile works with.
#[derive(Clone)]
pub struct Context {
    pub store: Arc<dyn Store>,
    pub tofu: Arc<Tofu>,
    pub nodes: Arc<dyn NodeClient>,
    /// The tenants' Kubernetes APIs.
    pub kube: Arc<dyn KubeClient>,
    pub configs: Option<Arc<dyn MachineConfigs>>,
    /// The settings of the network made around cloud machines (public
    /// addresses, administrative CIDRs, a floating IP pool).
    pub network: Network,
    /// The periodic resync.
    pub resync: Duration,
    /// Leases when several replicas share the store; `None` for one.
    pub leases: Option<LeaseOptions>,
    /// Seeing and releasing the tool's state locks (`state_lock.rs`);
    /// `None` records none.
    pub state_lock: Option<StateLockOptions>,
    /// The rotations of tenants' CAs (`ca_rotation.rs`); `None` carries
    /// none on.
    pub rotations: Option<Arc<dyn CaRotations>>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("tofu", &self.tofu).field("resync", &self.resync).finish()
    }
}

/// Reconciles one tenant.
#[tracing::instrument(name = "reconcile", skip(ctx))]
pub async fn reconcile(tenant: &str, ctx: &Context) -> Result<Action, ReconcileError> {
    let Some(object) = ctx.store.get(&Key::tenant(tenant)) else { return Ok(Action::AwaitChange) };
    let resource: Tenant =
        object.parse().map_err(|source| ReconcileError::Corrupt { what: object.key.to_string(), source })?;
    if let Some(waiting) = state_lock::take_up(&resource, ctx).await? {
        return Ok(waiting);
    }
    if object.deleting {
        return cleanup(tenant, resource.metadata.deletion_timestamp, ctx).await;
    }
    match converge(&resource, object.generation, ctx).await {
        Ok(action) => Ok(action),
        Err(err) if err.is_transient() => {
            // Of the moment: retried with backoff; the phase stays.
            let message = format!("retrying: {err}");
            status::update(ctx.store.as_ref(), tenant, |status| {
                status.message = Some(blocker::tool_failure(&message));
                set_condition(status, PROVISIONED, false, "Retrying", &message);
            })
            .await?;
            Err(err)
        }
        Err(err) => {
            let message = err.to_string();
            status::update(ctx.store.as_ref(), tenant, |status| {
                status.phase = Phase::Failed;
                status.ready = false;
                status.message = Some(blocker::tool_failure(&message));
                set_condition(status, PROVISIONED, false, "ProvisioningFailed", &message);
            })
            .await?;
            Err(err)
        }
    }
}

async fn converge(tenant: &Tenant, generation: u64, ctx: &Context) -> Result<Action, ReconcileError> {
    let name = tenant.metadata.name.as_str();
    let store = ctx.store.as_ref();
    // Asked only when an endpoint could be made.
    let may_make = tenant.spec.control_plane_endpoint.is_none()
        && !tenant.metadata.annotations.contains_key(MADE_ENDPOINT_ANNOTATION);
    // The machines, read once: each phase puts back what it writes.
    let mut view = View::read(store, name)?;
    let has_instances = may_make && has_cloud_instances(store, name, &view).await?;
    rollout::record_version(tenant, ctx).await?;
    let kubernetes = KubernetesRollout::of(tenant);
    let plan = plan::desired(tenant, ctx.configs.as_deref(), &ctx.network, has_instances).await?;
    if plan.network.oci_regions != plan::recorded_regions(tenant) {
        // Before the apply that makes anything there.
        let regions = plan.network.oci_regions.join(" ");
        rollout::set_annotation(ctx, name, plan::OCI_REGIONS_ANNOTATION, Some(regions)).await?;
    }
    // The phase `active` or `updating` says so too, should the annotation
    // have gone with a write that did not keep it.
    let ready_once = tenant.metadata.annotations.contains_key(FIRST_READY_ANNOTATION)
        || matches!(tenant.status.phase, Phase::Active | Phase::Updating);
    let bootstrapped = tenant.metadata.annotations.contains_key(BOOTSTRAPPED_ANNOTATION)
        || tenant.status.conditions.iter().any(|c| c.kind == BOOTSTRAPPED && c.status == "True");
    // Machines on their way out leave etcd, drain and reset first; the
    // infrastructure changes once none is still leaving.
    let leaving = leaving::advance(name, &plan, &mut view, bootstrapped, ctx).await?;
    // A machine being replaced that has left goes, for the apply to replace.
    replacement::release(name, &mut view, ctx).await?;
    let replacing: BTreeSet<String> = view
        .iter()
        .filter(|(id, machine)| machine.metadata.deletion_timestamp.is_some() && planned(&plan, id).is_some())
        .filter(|(_, machine)| leaving::is_left(machine))
        .map(|(id, _)| id.clone())
        .collect();
    let hash = ctx.tofu.inputs_hash(&plan)?;
    let unchanged = replacing.is_empty()
        && tenant.status.phase != Phase::Failed
        && tenant.metadata.annotations.get(APPLIED_ANNOTATION) == Some(&hash);
    let applying = !unchanged && leaving.settled();
    if applying {
        provision(tenant, &plan, &mut view, (&replacing, ready_once), ctx).await?;
        record_applied(ctx, name, &hash).await?;
        if plan.network.instances_held {
            // The endpoint is made: the machines come in the next pass,
            // with configs that name it.
            return Ok(Action::Requeue(Duration::ZERO));
        }
    }
    // The nodes: configs, and whether each machine answers; the rolling
    // procedures (Talos upgrades, reboots for configs, Kubernetes
    // upgrades); etcd's bootstrap; then what etcd and Kubernetes say of
    // the cluster.
    // A rotation of the CAs is read before the configs are rendered, and
    // moves on once every machine runs its phase's config.
    let rotation = ca_rotation::read(name, ctx).await?;
    let settled = settle(tenant, &plan, &mut view, (&kubernetes, rotation.is_some()), ctx).await?;
    let procedures = rollout::procedures(tenant, &kubernetes, ctx);
    let steps = (procedures.as_slice(), leaving.settled());
    let rollout = rollout::advance(tenant, generation, &plan, &mut view, steps, ctx).await?;
    let bootstrap = bootstrap::ensure(tenant, &plan, &view, ctx).await?;
    let observed = match &bootstrap {
        Bootstrap::Done(_) => {
            let control_planes = staying_control_planes(&plan, &view);
            cluster::observe(name, &control_planes, ctx).await
        }
        Bootstrap::Waiting(_) => Observed::before_bootstrap(),
    };
    let readiness = readiness::mark(name, &plan, &settled, &observed.nodes, &mut view, ctx).await?;
    let ready = readiness.all_ready()
        && rollout == Rollout::Idle
        && matches!(bootstrap, Bootstrap::Done(_))
        && observed.etcd.ok
        && observed.api.ok
        && leaving.settled();
    // The next outdated instance is replaced once the tenant is ready, in a
    // pass that changed no infrastructure (its machines are as observed).
    let replacing_next = match ready && !applying {
        true => replacement::start_next(name, &plan, &view, ctx).await?,
        false => None,
    };
    if ready && !ready_once {
        rollout::set_annotation(ctx, name, FIRST_READY_ANNOTATION, Some(Utc::now().to_rfc3339())).await?;
    }
    let pass = Pass {
        rollout: &rollout,
        bootstrap: &bootstrap,
        observed: &observed,
        machines: &readiness.blockers,
        leaving: &leaving,
    };
    let message = (!ready).then(|| blocker::headline(&pass));
    // After the rollout, which renders from the phase it read; and only
    // from a tenant that is ready with the phase's configs.
    let rotated = ca_rotation::advance(name, rotation, &settled, message.as_deref(), ctx).await?;
    let changing = rollout != Rollout::Idle || !leaving.settled() || rotated.under_way();
    let machine_count = plan.machines.len();
    status::update(store, name, |status| {
        status.ready = ready;
        status.observed_generation = generation;
        status.phase = status::phase(ready_once || ready, changing);
        status.message = message.clone();
        if status.conditions.iter().any(|c| c.kind == PROVISIONED && c.reason == "Retrying") {
            // The pass went through: what was retried is done.
            let applied = format!("{machine_count} machines provisioned");
            set_condition(status, PROVISIONED, true, "Applied", &applied);
        }
        match &bootstrap {
            Bootstrap::Done(machine) => set_condition(
                status,
                BOOTSTRAPPED,
                true,
                "Bootstrapped",
                &format!("etcd bootstrapped on {machine}"),
            ),
            Bootstrap::Waiting(why) => set_condition(status, BOOTSTRAPPED, false, "Waiting", why),
        }
        set_check(status, ETCD_HEALTHY, &observed.etcd);
        if observed.members.is_some() {
            status.etcd = observed.members.clone();
        }
        set_check(status, KUBERNETES_API_READY, &observed.api);
        set_check(status, NODES_READY, &readiness.nodes);
        set_check(status, MACHINES_READY, &readiness.machines);
        connected_status(status, &settled.off);
        rollout_status(status, &rollout);
        ca_rotation::write_status(status, &rotated);
    })
    .await?;
    let next = match rollout {
        // The next phase begins at once.
        _ if matches!(rotated, Step::Moved { to: Some(_), .. }) => Duration::ZERO,
        _ if replacing_next.is_some() => LEAVE_POLL,
        Rollout::Progress { .. } => UPGRADE_POLL,
        _ if rotated.under_way() => LEAVE_POLL,
        _ if !leaving.settled() => LEAVE_POLL,
        _ if ready => ctx.resync,
        _ => NODE_RETRY,
    };
    Ok(Action::Requeue(next.min(ctx.resync)))
}

/// Whether the tenant has cloud instances: machines in the store, or
/// instances in the last projection of its state.
async fn has_cloud_instances(store: &dyn Store, tenant: &str, view: &View) -> Result<bool, ReconcileError> {
    let cloud = |kind: Option<&str>| matches!(kind, Some("oci" | "openstack"));
    if view.values().any(|machine| cloud(machine.spec.provider_type.as_deref())) {
        return Ok(true);
    }
    let projected = store.projection(Some(tenant.to_string())).await?.unwrap_or_default();
    Ok(projected.iter().any(|item| {
        item.kind == "Machine"
            && matches!(item.tf_type.as_str(), "oci_core_instance" | "openstack_compute_instance_v2")
    }))
}

/// The configured control planes that stay in the workspace, whose etcd
/// members must all be there: those that answered once, off or not.
fn staying_control_planes<'a>(plan: &WorkspacePlan, view: &'a View) -> Vec<&'a Machine> {
    view.live()
        .filter(|machine| planned(plan, &machine.metadata.name).is_some_and(|m| m.role == Role::ControlPlane))
        .filter(|machine| machine.spec.connected || machine.status.stage == STAGE_OFF)
        .collect()
}

/// The machines that stopped answering, named in `MachinesConnected`.
fn connected_status(status: &mut cms_model::TenantStatus, off: &[String]) {
    match off.is_empty() {
        true => {
            set_condition(status, MACHINES_CONNECTED, true, "Answering", "every configured machine answers")
        }
        false => set_condition(
            status,
            MACHINES_CONNECTED,
            false,
            "Off",
            &format!("machines off (not answering the node API): {}", listed(off)),
        ),
    }
}

/// Sets a condition from a check.
fn set_check(status: &mut cms_model::TenantStatus, kind: &str, check: &Check) {
    set_condition(status, kind, check.ok, &check.reason, &check.message);
}

/// The rollout in the tenant's status: the procedure's condition while it
/// runs or is paused; each procedure's condition says done once nothing
/// rolls.
fn rollout_status(status: &mut cms_model::TenantStatus, rollout: &Rollout) {
    match rollout {
        Rollout::Progress { condition, message } => {
            set_condition(status, condition, true, "InProgress", message)
        }
        Rollout::Paused { condition, reason } => set_condition(status, condition, false, "Paused", reason),
        Rollout::Idle => {
            for (condition, done) in rollout::CONDITIONS {
                if status.conditions.iter().any(|existing| existing.kind == condition) {
                    set_condition(status, condition, false, "Done", done);
                }
            }
        }
    }
}

/// The infrastructure: apply (replacing deleted machines), record the
/// projection, and bring the machines in the store in line with it. The
/// phase says `provisioning` while the tenant was never ready, else
/// `updating`; the pass's last status write says where it ends.
async fn provision(
    tenant: &Tenant,
    plan: &WorkspacePlan,
    view: &mut View,
    (replacing, ready_once): (&BTreeSet<String>, bool),
    ctx: &Context,
) -> Result<(), ReconcileError> {
    let name = tenant.metadata.name.as_str();
    let store = ctx.store.as_ref();
    status::update(store, name, |status| {
        status.phase = if ready_once { Phase::Updating } else { Phase::Provisioning };
        if !status.ready {
            status.message = Some(APPLYING.to_string());
        }
        status.state_lock = state_lock::record(ctx, "apply");
    })
    .await?;
    let replace: Vec<String> = replacing.iter().filter_map(|id| plan.address(id)).collect();
    let applied = ctx.tofu.apply(plan, &replace).await;
    crate::tool_runs::record_tool_run(ctx, name, cms_model::ToolCommand::Apply).await;
    let cleared = state_lock::clear(ctx, name).await;
    let applied = applied?;
    cleared?;
    let projected = project(name, &applied.resources);
    store.set_projection(name.to_string(), projected.clone()).await?;
    if plan.network.load_balancer {
        let endpoint = endpoint_address(&applied.resources).ok_or_else(|| {
            ReconcileError::Invalid("the load balancer of the control-plane endpoint has no address".into())
        })?;
        let endpoint = match endpoint.parse::<std::net::IpAddr>() {
            Ok(std::net::IpAddr::V6(ip)) => format!("https://[{ip}]:{KUBERNETES_API_PORT}"),
            _ => format!("https://{endpoint}:{KUBERNETES_API_PORT}"),
        };
        match tenant.metadata.annotations.get(MADE_ENDPOINT_ANNOTATION) {
            None => {
                tracing::info!(tenant = name, %endpoint, "made the control-plane endpoint");
                rollout::set_annotation(ctx, name, MADE_ENDPOINT_ANNOTATION, Some(endpoint)).await?;
            }
            // The machines' configs name the endpoint: it never moves.
            Some(made) if *made != endpoint => {
                return Err(ReconcileError::Invalid(format!(
                    "the load balancer of the control-plane endpoint {made} now has the address {endpoint}: \
                     the machines' configs name {made}; restore the load balancer's address"
                )));
            }
            Some(_) => {}
        }
    }
    outdated::record(ctx, name, &plan.outdated(&applied.resources)).await?;

    // Machines: removals newest first, then updates and creations. The
    // configured hosts no machine holds any more are remembered.
    let configured = machines::configured_hosts(tenant, view);
    let mut held = BTreeSet::new();
    let in_state: BTreeSet<String> =
        projected.iter().filter(|item| item.kind == "Machine").map(|item| item.name.clone()).collect();
    for id in newest_first(view.keys().filter(|id| !in_state.contains(*id)).cloned()) {
        machines::remove(store, name, &view[&id]).await?;
        view.remove(&id);
    }
    for item in projected.iter().filter(|item| item.kind == "Machine") {
        let Some(machine_plan) = planned(plan, &item.name) else { continue };
        let desired = machines::desired(machine_plan, item, "provisioning");
        held.extend(desired.0.management_address.clone());
        let written = match view.get(&item.name) {
            Some(current) if current.metadata.deletion_timestamp.is_none() => {
                machines::upsert(store, name, Some(current), desired, &configured).await?
            }
            current => {
                let id = (item.name.as_str(), current.is_some());
                machines::create(store, name, id, desired, &configured).await?
            }
        };
        view.put(written);
    }
    let unheld = machines::unheld(&configured, &held);
    rollout::set_annotation(ctx, name, machines::CONFIGURED_HOSTS_ANNOTATION, unheld).await?;

    let count = in_state.len();
    status::update(store, name, |status| {
        status.last_applied_at = Some(Utc::now());
        set_condition(status, PROVISIONED, true, "Applied", &format!("{count} machines provisioned"));
        crate::drift::after_apply(status);
    })
    .await
}

/// Records the inputs hash of a good apply in the tenant's
/// [`APPLIED_ANNOTATION`]. The store keeps it, so every replica and every
/// restart sees it. Should the spec have changed meanwhile, its inputs hash
/// differs from the one recorded, and the next reconcile applies it.
async fn record_applied(ctx: &Context, tenant: &str, hash: &str) -> Result<(), ReconcileError> {
    rollout::set_annotation(ctx, tenant, APPLIED_ANNOTATION, Some(hash.to_string())).await
}

/// Deletion: destroy, then clear the finalizers; the last one removes the
/// tenant with its node groups, machines and config patches, and its
/// secrets, and emits `DELETED`. A failed destroy keeps the finalizers.
async fn cleanup(
    tenant: &str,
    deleting_since: Option<chrono::DateTime<Utc>>,
    ctx: &Context,
) -> Result<Action, ReconcileError> {
    let store = ctx.store.as_ref();
    status::update(store, tenant, |status| {
        status.phase = Phase::Deleting;
        status.ready = false;
    })
    .await?;
    let waiting = teardown::reset_hosts(tenant, deleting_since, ctx).await?;
    if !waiting.is_empty() {
        let message = blocker::one_line(
            &format!("waiting for hosts to reset: {}", listed(&waiting)),
            blocker::MESSAGE_LIMIT,
        );
        status::update(store, tenant, |status| status.message = Some(message.clone())).await?;
        return Ok(Action::Requeue(LEAVE_POLL));
    }
    status::update(store, tenant, |status| status.state_lock = state_lock::record(ctx, "destroy")).await?;
    let destroyed = ctx.tofu.destroy(tenant).await;
    crate::tool_runs::record_tool_run(ctx, tenant, cms_model::ToolCommand::Destroy).await;
    state_lock::clear(ctx, tenant).await?;
    if let Err(err) = destroyed {
        let message = format!("destroy failed: {err}");
        status::update(store, tenant, |status| {
            status.message = Some(blocker::tool_failure(&message));
            set_condition(status, PROVISIONED, true, "DestroyFailed", &message);
        })
        .await?;
        return Err(err.into());
    }
    store.set_projection(tenant.to_string(), Vec::new()).await?;
    let key = Key::tenant(tenant);
    for finalizer in [FINALIZER_MACHINES, FINALIZER_SECRETS] {
        if store.get(&key).is_none() {
            break;
        }
        store.remove_finalizer(key.clone(), finalizer.to_string()).await?;
    }
    Ok(Action::AwaitChange)
}

//! Kubernetes upgrades, as `talosctl upgrade-k8s` rolls them: first the
//! control-plane components (API server, controller manager, scheduler,
//! kube-proxy) one control plane at a time, each done when the API answers
//! `/readyz` and the machine's Node is Ready; then the kubelets, machine
//! by machine (workers within their group's `maxParallelism`), each done
//! when its Node reports the new kubelet version and is Ready.
//!
//! The version the whole cluster runs is the tenant's
//! [`KUBERNETES_VERSION_ANNOTATION`]; a `kubernetesVersion` that differs
//! starts an upgrade ([`KubernetesRollout`]). While it rolls, each machine's
//! config names the versions its own steps reached
//! ([`MACHINE_KUBERNETES_ANNOTATION`], `<components> <kubelet>`; a machine
//! without it is where the cluster was), so that the node work never moves
//! a machine ahead of its turn. When every machine is done, the tenant's
//! annotation takes the new version. The API refuses a step of more than
//! one minor version (`cms-tenancy`).

use std::time::Duration;

use async_trait::async_trait;
use cms_model::{Machine, MachineStatus, Role, Tenant};
use cms_tenancy::{KubernetesVersions, NodeRef};
use cms_tofu::MachinePlan;

use super::talos::same;
use super::{Checked, Goal, Prepared, Procedure, set_annotation};
use crate::cluster::node_of;
use crate::settle::{CONFIG_HASH_ANNOTATION, fingerprint};
use crate::{Context, ReconcileError};

pub use cms_tenancy::KUBERNETES_VERSION_ANNOTATION;
/// On a machine, while an upgrade rolls: the versions its config names,
/// `<components> <kubelet>`.
pub const MACHINE_KUBERNETES_ANNOTATION: &str = "service.io/kubernetes";
/// On a control plane whose components are being upgraded: the intent and
/// when the step began.
pub const KUBERNETES_COMPONENTS_ANNOTATION: &str = "service.io/upgrading-kubernetes-components";
/// On a machine whose kubelet is being upgraded: the intent and when the
/// step began.
pub const KUBELET_ANNOTATION: &str = "service.io/upgrading-kubelet";
/// The condition of a Kubernetes upgrade.
pub const KUBERNETES_UPGRADING: &str = "KubernetesUpgrading";
/// How long one machine's step may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// Where a tenant's Kubernetes version stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KubernetesRollout {
    /// The version the cluster runs.
    pub(crate) from: String,
    /// The version the spec asks for.
    pub(crate) to: String,
}

impl KubernetesRollout {
    /// The tenant's: from its annotation (the spec's version when it has
    /// none yet) to its spec.
    pub(crate) fn of(tenant: &Tenant) -> KubernetesRollout {
        let to = tenant.spec.kubernetes_version.trim_start_matches('v').to_string();
        let from = tenant
            .metadata
            .annotations
            .get(KUBERNETES_VERSION_ANNOTATION)
            .map(|version| version.trim_start_matches('v').to_string())
            .unwrap_or_else(|| to.clone());
        KubernetesRollout { from, to }
    }

    /// Whether an upgrade rolls.
    pub(crate) fn active(&self) -> bool {
        !same(&self.from, &self.to)
    }

    /// The versions a machine's config names: while an upgrade rolls, those
    /// its steps reached; else the spec's, as this pass read it (never the
    /// spec a renderer would read later, which may have moved meanwhile).
    pub(crate) fn versions_of(&self, machine: &Machine) -> KubernetesVersions {
        if !self.active() {
            return self.starting();
        }
        let recorded = machine.metadata.annotations.get(MACHINE_KUBERNETES_ANNOTATION);
        let parsed = recorded.and_then(|value| value.split_once(' ')).map(|(components, kubelet)| {
            KubernetesVersions { components: components.to_string(), kubelet: kubelet.to_string() }
        });
        parsed.unwrap_or_else(|| self.starting())
    }

    /// The versions new machines start with: where the cluster is.
    pub(crate) fn starting(&self) -> KubernetesVersions {
        KubernetesVersions { components: self.from.clone(), kubelet: self.from.clone() }
    }
}

/// Records the version of a tenant that has none yet: the one its
/// machines' configs name from the start.
pub(crate) async fn record_version(tenant: &Tenant, ctx: &Context) -> Result<(), ReconcileError> {
    if tenant.metadata.annotations.contains_key(KUBERNETES_VERSION_ANNOTATION) {
        return Ok(());
    }
    let version = tenant.spec.kubernetes_version.trim_start_matches('v').to_string();
    set_annotation(ctx, &tenant.metadata.name, KUBERNETES_VERSION_ANNOTATION, Some(version)).await
}

/// Which half of the upgrade.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Components,
    Kubelets,
}

/// One half of a tenant's Kubernetes upgrade.
pub(crate) struct KubernetesUpgrade {
    part: Part,
    tenant: Tenant,
    rollout: KubernetesRollout,
    ctx: Context,
}

impl KubernetesUpgrade {
    /// The control-plane components, control plane by control plane.
    pub(crate) fn components(
        tenant: &Tenant,
        rollout: &KubernetesRollout,
        ctx: &Context,
    ) -> KubernetesUpgrade {
        KubernetesUpgrade {
            part: Part::Components,
            tenant: tenant.clone(),
            rollout: rollout.clone(),
            ctx: ctx.clone(),
        }
    }

    /// The kubelets, machine by machine.
    pub(crate) fn kubelets(tenant: &Tenant, rollout: &KubernetesRollout, ctx: &Context) -> KubernetesUpgrade {
        KubernetesUpgrade {
            part: Part::Kubelets,
            tenant: tenant.clone(),
            rollout: rollout.clone(),
            ctx: ctx.clone(),
        }
    }

    /// The versions the machine's config names after its step.
    fn next(&self, machine: &Machine) -> Option<KubernetesVersions> {
        if !self.rollout.active() {
            return None;
        }
        let mut versions = self.rollout.versions_of(machine);
        versions.components = self.rollout.to.clone();
        if self.part == Part::Kubelets {
            versions.kubelet = self.rollout.to.clone();
        }
        Some(versions)
    }
}

#[async_trait]
impl Procedure for KubernetesUpgrade {
    fn condition(&self) -> &'static str {
        KUBERNETES_UPGRADING
    }

    fn annotation(&self) -> &'static str {
        match self.part {
            Part::Components => KUBERNETES_COMPONENTS_ANNOTATION,
            Part::Kubelets => KUBELET_ANNOTATION,
        }
    }

    fn stage(&self) -> &'static str {
        match self.part {
            Part::Components => "upgrading-kubernetes-components",
            Part::Kubelets => "upgrading-kubelet",
        }
    }

    fn timeout(&self) -> Duration {
        STEP_TIMEOUT
    }

    fn reboots(&self) -> bool {
        false
    }

    fn goal(&self, machine: &Machine, plan: &MachinePlan) -> Goal {
        if !self.rollout.active() {
            return Goal::None;
        }
        let versions = self.rollout.versions_of(machine);
        let reached = match self.part {
            Part::Components if plan.role != Role::ControlPlane => return Goal::None,
            Part::Components => same(&versions.components, &self.rollout.to),
            Part::Kubelets => same(&versions.kubelet, &self.rollout.to),
        };
        if reached { Goal::Reached } else { Goal::Due(self.rollout.to.clone()) }
    }

    fn progress(&self, done: usize, total: usize) -> String {
        let (from, to) = (&self.rollout.from, &self.rollout.to);
        match self.part {
            Part::Components => format!(
                "Kubernetes {from} to {to}: {done} of {total} control planes run the new API server, controller \
                 manager and scheduler"
            ),
            Part::Kubelets => {
                format!("Kubernetes {from} to {to}: {done} of {total} machines run kubelet {to}")
            }
        }
    }

    async fn prepare(
        &self,
        machine: &Machine,
        plan: &MachinePlan,
        _: &NodeRef,
        _: &str,
    ) -> Result<Prepared, String> {
        let versions = self.next(machine).ok_or("no Kubernetes upgrade rolls")?;
        let renderer = self.ctx.configs.as_ref().ok_or("this server renders no machine configs")?;
        let config = renderer
            .render(self.tenant.metadata.name.clone(), plan.group.clone(), plan.role, Some(versions.clone()))
            .await
            .map_err(|err| format!("rendering the machine config: {err}"))?;
        let intent = format!("{} {} {}", versions.components, versions.kubelet, fingerprint(&config));
        Ok(Prepared { intent, payload: Some(config) })
    }

    async fn start(&self, node: &NodeRef, prepared: &Prepared) -> Result<(), String> {
        let config = prepared.payload.as_deref().unwrap_or_default();
        self.ctx
            .nodes
            .apply_config(node, config, true)
            .await
            .map_err(|err| format!("applying the config: {err}"))
    }

    async fn check(&self, machine: &Machine, _: &NodeRef, intent: &str) -> Checked {
        let mut parts = intent.split(' ');
        let (components, kubelet, hash) = match (parts.next(), parts.next(), parts.next()) {
            (Some(components), Some(kubelet), Some(hash)) => (components, kubelet, hash),
            _ => return Checked::Flying(format!("an unreadable intent {intent:?}")),
        };
        let tenant = self.tenant.metadata.name.as_str();
        if self.part == Part::Components
            && let Err(reason) = self.ctx.kube.readyz(tenant).await
        {
            return Checked::Flying(format!("the Kubernetes API is not ready: {reason}"));
        }
        let nodes = match self.ctx.kube.nodes(tenant).await {
            Ok(nodes) => nodes,
            Err(reason) => return Checked::Flying(format!("listing the Nodes: {reason}")),
        };
        let Some(node) = node_of(machine, &nodes) else {
            return Checked::Flying("it has no Kubernetes Node".into());
        };
        if !node.ready {
            return Checked::Flying(format!("its Node {} is NotReady: {}", node.name, node.reason));
        }
        let mut status = MachineStatus { stage: "ready".into(), ready: true, ..machine.status.clone() };
        if self.part == Part::Kubelets {
            match &node.kubelet_version {
                Some(running) if same(running, kubelet) => status.kubernetes_version = Some(running.clone()),
                Some(running) => {
                    return Checked::Flying(format!("its Node {} runs kubelet {running}", node.name));
                }
                None => return Checked::Flying(format!("its Node {} reports no kubelet version", node.name)),
            }
        }
        let annotations = vec![
            (MACHINE_KUBERNETES_ANNOTATION, Some(format!("{components} {kubelet}"))),
            (CONFIG_HASH_ANNOTATION, Some(hash.to_string())),
        ];
        Checked::Done { annotations, status }
    }

    async fn finished(&self) -> Result<(), ReconcileError> {
        if self.part == Part::Kubelets && self.rollout.active() {
            let name = self.tenant.metadata.name.as_str();
            tracing::info!(tenant = name, version = %self.rollout.to, "every machine runs the new Kubernetes version");
            set_annotation(&self.ctx, name, KUBERNETES_VERSION_ANNOTATION, Some(self.rollout.to.clone()))
                .await?;
        }
        Ok(())
    }
}

//! Config changes that need a reboot. The node work applies every config
//! without a reboot; a change Talos takes only with one is refused, and the
//! machine is marked [`REBOOT_PENDING_ANNOTATION`]. Such machines are due
//! here: the step applies the current config in `REBOOT` mode, and is done
//! when the node answers after a new boot (its `SystemStat` boot time
//! moved) and its Kubernetes Node is Ready again.

use std::time::Duration;

use async_trait::async_trait;
use cms_model::{Machine, MachineStatus, Tenant};
use cms_tenancy::NodeRef;
use cms_tofu::MachinePlan;

use super::kubernetes::KubernetesRollout;
use super::{Checked, Goal, Prepared, Procedure};
use crate::Context;
use crate::cluster::node_of;
use crate::settle::{CONFIG_HASH_ANNOTATION, REBOOT_PENDING_ANNOTATION, fingerprint};

/// On a machine rebooting for its config: the config's fingerprint, the
/// boot time before, and when the step began.
pub const REBOOTING_ANNOTATION: &str = "service.io/rebooting-for";
/// The condition of the reboots for config changes.
pub const REBOOTING: &str = "Rebooting";
/// How long a machine may take to come back from its reboot.
const REBOOT_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// The reboots of one tenant's machines for their configs.
pub(crate) struct Reboot {
    tenant: Tenant,
    kubernetes: KubernetesRollout,
    ctx: Context,
}

impl Reboot {
    pub(crate) fn new(tenant: &Tenant, kubernetes: &KubernetesRollout, ctx: &Context) -> Reboot {
        Reboot { tenant: tenant.clone(), kubernetes: kubernetes.clone(), ctx: ctx.clone() }
    }
}

#[async_trait]
impl Procedure for Reboot {
    fn condition(&self) -> &'static str {
        REBOOTING
    }

    fn annotation(&self) -> &'static str {
        REBOOTING_ANNOTATION
    }

    fn stage(&self) -> &'static str {
        "rebooting"
    }

    fn timeout(&self) -> Duration {
        REBOOT_TIMEOUT
    }

    fn reboots(&self) -> bool {
        true
    }

    fn goal(&self, machine: &Machine, _: &MachinePlan) -> Goal {
        match machine.metadata.annotations.get(REBOOT_PENDING_ANNOTATION) {
            Some(hash) => Goal::Due(hash.clone()),
            None => Goal::Reached,
        }
    }

    fn progress(&self, done: usize, total: usize) -> String {
        format!("{done} of {total} machines run their config; a config change needs a reboot")
    }

    async fn prepare(
        &self,
        machine: &Machine,
        plan: &MachinePlan,
        node: &NodeRef,
        _: &str,
    ) -> Result<Prepared, String> {
        let renderer = self.ctx.configs.as_ref().ok_or("this server renders no machine configs")?;
        let versions = Some(self.kubernetes.versions_of(machine));
        let config = renderer
            .render(self.tenant.metadata.name.clone(), plan.group.clone(), plan.role, versions)
            .await
            .map_err(|err| format!("rendering the machine config: {err}"))?;
        let booted =
            self.ctx.nodes.boot_time(node).await.map_err(|err| format!("asking its boot time: {err}"))?;
        Ok(Prepared { intent: format!("{} {booted}", fingerprint(&config)), payload: Some(config) })
    }

    async fn start(&self, node: &NodeRef, prepared: &Prepared) -> Result<(), String> {
        let config = prepared.payload.as_deref().unwrap_or_default();
        self.ctx
            .nodes
            .apply_config_reboot(node, config)
            .await
            .map_err(|err| format!("applying the config with a reboot: {err}"))
    }

    async fn check(&self, machine: &Machine, node: &NodeRef, intent: &str) -> Checked {
        let (hash, before) = intent.split_once(' ').unwrap_or((intent, ""));
        match self.ctx.nodes.boot_time(node).await {
            Ok(booted) if booted.to_string() == before => {
                return Checked::Flying("it has not rebooted yet".into());
            }
            Ok(_) => {}
            Err(reason) => return Checked::Flying(reason.to_string()),
        }
        let tenant = self.tenant.metadata.name.as_str();
        match self.ctx.kube.nodes(tenant).await {
            Ok(nodes) => match node_of(machine, &nodes) {
                Some(node) if node.ready => {}
                Some(node) => {
                    return Checked::Flying(format!("its Node {} is NotReady: {}", node.name, node.reason));
                }
                None => return Checked::Flying("it has no Kubernetes Node".into()),
            },
            Err(reason) => return Checked::Flying(format!("listing the Nodes: {reason}")),
        }
        let annotations =
            vec![(CONFIG_HASH_ANNOTATION, Some(hash.to_string())), (REBOOT_PENDING_ANNOTATION, None)];
        let status = MachineStatus { stage: "ready".into(), ready: true, ..machine.status.clone() };
        Checked::Done { annotations, status }
    }
}

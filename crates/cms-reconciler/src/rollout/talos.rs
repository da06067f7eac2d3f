//! Talos upgrades, in place through the node API's `Upgrade`: a machine
//! whose Talos version differs from its group's (or else the tenant's)
//! `talosVersion` is due, and done when it answers `Version` with the new
//! tag. The installer image is the group's or the tenant's choice
//! (`installerImage`, or an Image Factory `schematic`), so that a node
//! keeps its system extensions.

use std::time::Duration;

use async_trait::async_trait;
use cms_model::{Machine, MachineStatus, Tenant};
use cms_tenancy::NodeRef;
use cms_tofu::MachinePlan;

use super::{Checked, Goal, Prepared, Procedure};
use crate::Context;
use crate::status::UPGRADING;

/// On a machine being upgraded: the version and when the upgrade began.
pub const UPGRADING_ANNOTATION: &str = "service.io/upgrading-to";
/// How long an upgraded machine may take to answer with its new version.
pub const UPGRADE_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// The rolling Talos upgrade of one tenant.
pub(crate) struct TalosUpgrade {
    tenant: Tenant,
    ctx: Context,
}

impl TalosUpgrade {
    pub(crate) fn new(tenant: &Tenant, ctx: &Context) -> TalosUpgrade {
        TalosUpgrade { tenant: tenant.clone(), ctx: ctx.clone() }
    }

    /// The Talos version a machine of `group` should run, if the spec says.
    fn desired(&self, group: &str) -> Option<String> {
        let group = self.group(group);
        group.and_then(|group| group.talos_version.clone()).or_else(|| self.tenant.spec.talos_version.clone())
    }

    fn group(&self, name: &str) -> Option<&cms_model::NodeGroupSpec> {
        let groups = self.tenant.spec.node_groups.as_deref().unwrap_or_default();
        groups.iter().find(|candidate| candidate.name == name)
    }
}

/// Whether two versions are the same, with or without a leading `v`.
pub(crate) fn same(a: &str, b: &str) -> bool {
    a.trim_start_matches('v') == b.trim_start_matches('v')
}

#[async_trait]
impl Procedure for TalosUpgrade {
    fn condition(&self) -> &'static str {
        UPGRADING
    }

    fn annotation(&self) -> &'static str {
        UPGRADING_ANNOTATION
    }

    fn stage(&self) -> &'static str {
        "upgrading"
    }

    fn timeout(&self) -> Duration {
        UPGRADE_TIMEOUT
    }

    fn reboots(&self) -> bool {
        true
    }

    fn goal(&self, machine: &Machine, plan: &MachinePlan) -> Goal {
        let Some(want) = self.desired(&plan.group) else { return Goal::None };
        match &machine.status.talos_version {
            Some(running) if same(running, &want) => Goal::Reached,
            Some(_) => Goal::Due(want),
            // Not answered yet: the node work brings it up first.
            None => Goal::None,
        }
    }

    fn progress(&self, done: usize, total: usize) -> String {
        format!("{done} of {total} machines at the desired Talos version")
    }

    async fn prepare(
        &self,
        _: &Machine,
        plan: &MachinePlan,
        _: &NodeRef,
        target: &str,
    ) -> Result<Prepared, String> {
        let image = cms_model::installer_image(&self.tenant.spec, self.group(&plan.group), target);
        Ok(Prepared { intent: target.to_string(), payload: Some(image) })
    }

    async fn start(&self, node: &NodeRef, prepared: &Prepared) -> Result<(), String> {
        let image = prepared.payload.as_deref().unwrap_or_default();
        self.ctx.nodes.upgrade(node, image).await.map_err(|err| format!("Upgrade with {image}: {err}"))
    }

    async fn check(&self, machine: &Machine, node: &NodeRef, intent: &str) -> Checked {
        match self.ctx.nodes.version(node).await {
            Ok(running) if same(&running, intent) => {
                let status = MachineStatus {
                    stage: "ready".into(),
                    ready: true,
                    talos_version: Some(running),
                    ..machine.status.clone()
                };
                Checked::Done { annotations: Vec::new(), status }
            }
            Ok(running) => Checked::Flying(format!("it runs {running}")),
            Err(reason) => Checked::Flying(reason.to_string()),
        }
    }
}

//! Where a tenant's rolling procedures stand, read from its stored
//! machines and annotations: the Talos upgrade (`n of m` machines at their
//! desired version), the Kubernetes upgrade (`n of m` machines whose
//! kubelet runs the spec's version), the machines waiting for a reboot,
//! and the machines in a rolling step of any procedure.
//!
//! The annotations are the reconciler's (`cms_reconciler::rollout`); a
//! machine in a step carries its procedure's annotation,
//! `<intent> <started at>`, whose intent says what the step goes to.

use chrono::{DateTime, Utc};
use cms_model::{Machine, NodeGroup, Tenant};

/// On a machine being upgraded: `<version> <started at>`
/// (`cms_reconciler::UPGRADING_ANNOTATION`).
pub(crate) const UPGRADING: &str = "service.io/upgrading-to";
/// On a machine rebooting for its config: `<fingerprint> <boot time>
/// <started at>` (`cms_reconciler::REBOOTING_ANNOTATION`).
pub(crate) const REBOOTING: &str = "service.io/rebooting-for";
/// On a machine whose config change waits for a reboot: the config's
/// fingerprint (`cms_reconciler::REBOOT_PENDING_ANNOTATION`).
pub(crate) const REBOOT_PENDING: &str = "service.io/reboot-pending";
/// On a control plane whose Kubernetes components are being upgraded:
/// `<components> <kubelet> <fingerprint> <started at>`
/// (`cms_reconciler::KUBERNETES_COMPONENTS_ANNOTATION`).
pub(crate) const COMPONENTS: &str = "service.io/upgrading-kubernetes-components";
/// On a machine whose kubelet is being upgraded, as [`COMPONENTS`]
/// (`cms_reconciler::KUBELET_ANNOTATION`).
pub(crate) const KUBELET: &str = "service.io/upgrading-kubelet";
/// On a tenant: the Kubernetes version its cluster runs; a spec that asks
/// for another means an upgrade rolls
/// (`cms_reconciler::KUBERNETES_VERSION_ANNOTATION`).
pub(crate) const KUBERNETES_VERSION: &str = "service.io/kubernetes-version";

/// A rolling step a machine can be in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// A Talos upgrade, to a version.
    Talos,
    /// A reboot that applies its config, by fingerprint.
    Reboot,
    /// A control plane's Kubernetes components, to a version.
    Components,
    /// A kubelet, to a version.
    Kubelet,
}

impl Step {
    /// Every step, in the order the procedures roll.
    const ALL: [Step; 4] = [Step::Talos, Step::Reboot, Step::Components, Step::Kubelet];

    /// The machine annotation of a step in flight.
    fn annotation(self) -> &'static str {
        match self {
            Step::Talos => UPGRADING,
            Step::Reboot => REBOOTING,
            Step::Components => COMPONENTS,
            Step::Kubelet => KUBELET,
        }
    }

    /// The step's name in the page's `data-step`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Step::Talos => "talos",
            Step::Reboot => "reboot",
            Step::Components => "kubernetes-components",
            Step::Kubelet => "kubelet",
        }
    }

    /// What the step changes, in words.
    pub(crate) fn what(self) -> &'static str {
        match self {
            Step::Talos => "Talos",
            Step::Reboot => "reboot",
            Step::Components => "Kubernetes components",
            Step::Kubelet => "kubelet",
        }
    }

    /// What the step goes to, read from its intent (the annotation's value
    /// without the time it began).
    fn target(self, intent: &str) -> String {
        let mut words = intent.split(' ');
        let word = match self {
            Step::Talos | Step::Reboot | Step::Components => words.next(),
            Step::Kubelet => words.nth(1),
        };
        word.unwrap_or(intent).to_string()
    }
}

/// A machine in a rolling step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InFlight {
    pub(crate) machine: String,
    pub(crate) step: Step,
    /// The version it goes to, or for a reboot the config's fingerprint.
    pub(crate) target: String,
    /// When the step began, when the annotation says.
    pub(crate) since: Option<DateTime<Utc>>,
}

/// Where the tenant's Kubernetes version stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Kubernetes {
    /// The version the spec asks for.
    pub(crate) version: String,
    /// The version the cluster runs, while an upgrade from it rolls.
    pub(crate) from: Option<String>,
    /// Machines whose kubelet runs [`Kubernetes::version`], as their Node
    /// reports.
    pub(crate) done: usize,
    /// Machines counted.
    pub(crate) total: usize,
}

/// Where a tenant's rolling procedures stand, as its stored machines show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Progress {
    /// Machines that run their desired Talos version.
    pub(crate) done: usize,
    /// Machines that have a desired Talos version.
    pub(crate) total: usize,
    /// The Kubernetes version.
    pub(crate) kubernetes: Kubernetes,
    /// Machines in a rolling step, by machine then step.
    pub(crate) in_flight: Vec<InFlight>,
    /// Machines whose config change waits for a reboot not yet begun.
    pub(crate) reboot_pending: Vec<String>,
}

/// The progress of `tenant`'s machines (those not being deleted). A
/// machine's desired Talos version is its node group's `talosVersion` (the
/// resource's, else the inline group's), else the tenant's, else
/// `default_talos`.
pub(crate) fn progress(
    tenant: &Tenant,
    groups: &[NodeGroup],
    machines: &[Machine],
    default_talos: &str,
) -> Progress {
    let version = tenant.spec.kubernetes_version.clone();
    let from = tenant
        .metadata
        .annotations
        .get(KUBERNETES_VERSION)
        .filter(|running| !same(running, &version))
        .cloned();
    let mut progress = Progress {
        done: 0,
        total: 0,
        kubernetes: Kubernetes { version, from, done: 0, total: 0 },
        in_flight: Vec::new(),
        reboot_pending: Vec::new(),
    };
    for machine in machines.iter().filter(|machine| machine.metadata.deletion_timestamp.is_none()) {
        let annotations = &machine.metadata.annotations;
        let name = &machine.metadata.name;
        let want = desired(tenant, groups, machine.spec.node_group.as_deref()).unwrap_or(default_talos);
        progress.total += 1;
        let upgrading = annotations.contains_key(UPGRADING);
        if !upgrading && machine.status.talos_version.as_deref().is_some_and(|running| same(running, want)) {
            progress.done += 1;
        }
        progress.kubernetes.total += 1;
        let kubelet = machine.status.kubernetes_version.as_deref();
        if kubelet.is_some_and(|running| same(running, &progress.kubernetes.version)) {
            progress.kubernetes.done += 1;
        }
        for step in Step::ALL {
            let Some(value) = annotations.get(step.annotation()) else { continue };
            let (intent, since) = value.rsplit_once(' ').unwrap_or((value.as_str(), ""));
            let since = DateTime::parse_from_rfc3339(since).ok().map(|time| time.with_timezone(&Utc));
            progress.in_flight.push(InFlight {
                machine: name.clone(),
                step,
                target: step.target(intent),
                since,
            });
        }
        if annotations.contains_key(REBOOT_PENDING) && !annotations.contains_key(REBOOTING) {
            progress.reboot_pending.push(name.clone());
        }
    }
    progress
}

fn desired<'a>(tenant: &'a Tenant, groups: &'a [NodeGroup], group: Option<&str>) -> Option<&'a str> {
    let group = group?;
    let resource = groups.iter().find(|candidate| candidate.metadata.name == group);
    let inline = tenant.spec.node_groups.iter().flatten().find(|candidate| candidate.name == group);
    resource
        .and_then(|found| found.spec.talos_version.as_deref())
        .or_else(|| inline.and_then(|found| found.talos_version.as_deref()))
        .or(tenant.spec.talos_version.as_deref())
}

/// Whether two versions are the same, with or without a leading `v`.
fn same(a: &str, b: &str) -> bool {
    a.trim_start_matches('v') == b.trim_start_matches('v')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_step_reads_its_target_from_its_intent() {
        assert_eq!(Step::Talos.target("1.14.1"), "1.14.1");
        assert_eq!(Step::Reboot.target("0123456789abcdef01234567 1764050400"), "0123456789abcdef01234567");
        assert_eq!(Step::Components.target("1.32.0 1.31.0 0123abcd"), "1.32.0");
        assert_eq!(Step::Kubelet.target("1.32.0 1.32.0 0123abcd"), "1.32.0");
        assert_eq!(Step::Kubelet.target("unreadable"), "unreadable");
    }

    #[test]
    fn versions_compare_without_the_leading_v() {
        assert!(same("v1.32.0", "1.32.0"));
        assert!(!same("1.31.0", "1.32.0"));
    }
}

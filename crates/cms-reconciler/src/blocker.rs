//! The tenant's headline. `status.message` of a tenant that is not ready
//! names the first thing that keeps it from being ready, on one line an
//! operator can act on; a ready tenant has none. Each pass gathers what
//! blocks the tenant, each under its [`Gate`], and the first gate in a
//! fixed order is the message: a failed pass (the provisioning tool's
//! failure, in `Provisioned`), a paused rollout,
//! machines that stopped answering, machines that cannot be reached, do not
//! answer as the tenant's node or did not take their config, machines
//! leaving, a rollout in progress, machines still starting, etcd's
//! bootstrap, etcd, the Kubernetes API, and the Nodes.
//!
//! Every message the reconciler writes is one line and bounded: the
//! tenant's at [`MESSAGE_LIMIT`] characters, a condition's at
//! [`CONDITION_LIMIT`] (the provisioning tool's redacted output in
//! `Provisioned` at [`TOOL_OUTPUT_LIMIT`]), a machine's at
//! [`MACHINE_MESSAGE_LIMIT`]. A list names its first [`NAMED`] offenders
//! and counts the rest.

use std::collections::BTreeMap;

use crate::bootstrap::Bootstrap;
use crate::cluster::{Check, Observed};
use crate::leaving::Leaving;
use crate::rollout::Rollout;

/// The most characters of a tenant's `status.message`.
pub const MESSAGE_LIMIT: usize = 240;
/// The most characters of a condition's message the reconciler writes.
pub const CONDITION_LIMIT: usize = 320;
/// The most characters of the `Provisioned` condition's message, which
/// carries the tool's redacted output (`cms-tofu` keeps its last 2 KiB).
pub const TOOL_OUTPUT_LIMIT: usize = 2200;
/// The most characters of a machine's `status.message`.
pub const MACHINE_MESSAGE_LIMIT: usize = 480;
/// How many offenders a list names; the rest are counted.
pub const NAMED: usize = 3;
/// The most characters of one offender's cause in a condition's list.
const CAUSE_LIMIT: usize = 80;

/// What keeps a tenant from being ready, in the order the headline looks
/// at them: the first present is the tenant's message. A pass that fails
/// (the provisioning tool, or anything else) says so instead, with
/// [`tool_failure`]: nothing else was looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Gate {
    /// A rolling procedure paused (`Upgrading`, `Rebooting`,
    /// `KubernetesUpgrading` with the reason `Paused`).
    RolloutPaused,
    /// Machines that answered once stopped (`MachinesConnected`).
    MachinesOff,
    /// Machines whose hosts cannot be reached, do not answer as the
    /// tenant's node, or did not take their config (`MachinesReady`).
    Machines,
    /// Machines on their way out.
    Leaving,
    /// A rolling procedure in progress.
    Rollout,
    /// Machines that took their config and have not answered yet.
    MachinesStarting,
    /// etcd is not bootstrapped yet (`Bootstrapped`).
    Bootstrap,
    /// etcd is not healthy (`EtcdHealthy`).
    Etcd,
    /// The Kubernetes API is not ready (`KubernetesAPIReady`).
    KubernetesApi,
    /// Nodes missing or not Ready (`NodesReady`).
    Nodes,
}

/// Why a machine is not ready, most urgent first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Fault {
    /// It answered once and stopped.
    Off,
    /// The host at its address does not answer as the tenant's node.
    Unrecognized,
    /// Its host cannot be reached: no connection, or no answer in time.
    Unreachable,
    /// Its config could not be rendered, or the node refused it.
    Config,
    /// It has no address yet, or took its config and has not answered.
    Starting,
    /// Talos answers; its Kubernetes Node is missing or not Ready.
    Kubernetes,
}

impl Fault {
    /// The `MachinesReady` reason when this is the worst fault.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Fault::Off => "Off",
            Fault::Unrecognized => "Unrecognized",
            Fault::Unreachable => "Unreachable",
            Fault::Config => "ConfigFailed",
            Fault::Starting => "Starting",
            Fault::Kubernetes => "NodeNotReady",
        }
    }

    /// What the machines with this fault are, after "N of M machines".
    fn phrase(self) -> &'static str {
        match self {
            Fault::Off => "off, not answering the node API",
            Fault::Unrecognized => "awaiting a confirmed replacement",
            Fault::Unreachable => "unreachable",
            Fault::Config => "without their config",
            Fault::Starting => "starting, not answering yet",
            Fault::Kubernetes => "without a Ready Kubernetes Node",
        }
    }

    fn gate(self) -> Gate {
        match self {
            Fault::Off => Gate::MachinesOff,
            Fault::Unrecognized | Fault::Unreachable | Fault::Config => Gate::Machines,
            Fault::Starting => Gate::MachinesStarting,
            Fault::Kubernetes => Gate::Nodes,
        }
    }

    /// What an operator can do about it.
    fn hint(self) -> Option<&'static str> {
        match self {
            Fault::Off | Fault::Unreachable => {
                Some("check that the hosts are powered on and reachable from the service")
            }
            Fault::Unrecognized => Some("if a host was replaced, delete its machine to confirm it"),
            Fault::Config => Some("see each machine's message"),
            Fault::Starting | Fault::Kubernetes => None,
        }
    }
}

/// One machine that is not ready, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Trouble {
    pub(crate) machine: String,
    pub(crate) fault: Fault,
    /// The short cause, such as `could not connect to 10.0.0.1:50000: connection refused`.
    pub(crate) cause: String,
}

/// What blocks a tenant, by gate.
#[derive(Debug, Default)]
pub(crate) struct Blockers(BTreeMap<Gate, String>);

impl Blockers {
    /// Records what blocks at `gate`; the first text recorded for a gate stays.
    pub(crate) fn add(&mut self, gate: Gate, text: impl Into<String>) {
        self.0.entry(gate).or_insert_with(|| text.into());
    }

    /// The tenant's message: the first gate's text, on one bounded line.
    pub(crate) fn headline(&self) -> Option<String> {
        self.0.values().next().map(|text| one_line(text, MESSAGE_LIMIT))
    }
}

/// What one pass found, as the headline reads it.
pub(crate) struct Pass<'a> {
    pub(crate) rollout: &'a Rollout,
    pub(crate) bootstrap: &'a Bootstrap,
    pub(crate) observed: &'a Observed,
    /// The machines' blockers (`readiness.rs`).
    pub(crate) machines: &'a [(Gate, String)],
    pub(crate) leaving: &'a Leaving,
}

/// The message of a tenant that is not ready after a pass: its first
/// blocker, or what it still waits for.
pub(crate) fn headline(pass: &Pass<'_>) -> String {
    let mut blockers = Blockers::default();
    match pass.rollout {
        Rollout::Paused { reason, .. } => blockers.add(
            Gate::RolloutPaused,
            with_hint(
                &format!("the rollout is paused: {reason}"),
                Some("fix the cause, then resume the rollout"),
            ),
        ),
        Rollout::Progress { message, .. } => blockers.add(Gate::Rollout, format!("rolling out: {message}")),
        Rollout::Idle => {}
    }
    for (gate, text) in pass.machines {
        blockers.add(*gate, text.clone());
    }
    if !pass.leaving.settled() {
        blockers.add(Gate::Leaving, format!("machines leaving: {}", listed(&pass.leaving.waiting)));
    }
    match pass.bootstrap {
        Bootstrap::Waiting(why) => {
            blockers.add(Gate::Bootstrap, format!("etcd is not bootstrapped yet: {why}"))
        }
        Bootstrap::Done(_) => {
            if !pass.observed.etcd.ok {
                blockers.add(Gate::Etcd, format!("etcd is not healthy: {}", pass.observed.etcd.message));
            }
            if !pass.observed.api.ok {
                blockers.add(Gate::KubernetesApi, pass.observed.api.message.clone());
            }
        }
    }
    blockers.headline().unwrap_or_else(|| "not ready yet".to_string())
}

/// The message of a tenant whose pass failed with `message` (the
/// `Provisioned` condition's): an OpenTofu diagnostic is shortened to its
/// title, the output staying in the condition.
pub(crate) fn tool_failure(message: &str) -> String {
    let retrying = message.starts_with("retrying: ");
    let title = message.split_once("Error: ").map(|(_, rest)| {
        let end = rest.find(['│', '╵', '╷']).unwrap_or(rest.len());
        rest[..end].trim()
    });
    let text = match title {
        Some(title) if !title.is_empty() => format!(
            "{}the provisioning tool failed: {title}; its output is in the Provisioned condition",
            if retrying { "retrying: " } else { "" }
        ),
        _ => message.to_string(),
    };
    one_line(&text, MESSAGE_LIMIT)
}

/// The `MachinesReady` condition, from the machines that are not ready,
/// and the blockers they make: the condition names the machines with the
/// worst fault (the first [`NAMED`], each with its cause) and counts the
/// rest; each fault's blocker names its first machine.
pub(crate) fn machines(ready: usize, total: usize, troubles: &[Trouble]) -> (Check, Vec<(Gate, String)>) {
    let summary = format!("{ready} of {total} machines ready");
    let mut troubles = troubles.to_vec();
    troubles.sort_by(|a, b| (a.fault, &a.machine).cmp(&(b.fault, &b.machine)));
    let Some(worst) = troubles.first().map(|trouble| trouble.fault) else {
        return (Check::pass("Ready", summary), Vec::new());
    };
    let named: Vec<String> = troubles
        .iter()
        .filter(|trouble| trouble.fault == worst)
        .map(|trouble| format!("{} ({})", trouble.machine, one_line(&trouble.cause, CAUSE_LIMIT)))
        .collect();
    let mut message = format!("{summary}; {} {}: {}", named.len(), worst.phrase(), listed(&named));
    let rest = troubles.len() - named.len();
    if rest > 0 {
        message.push_str(&format!("; {rest} more not ready"));
    }
    let mut blockers = Vec::new();
    let mut faults: Vec<Fault> = troubles.iter().map(|trouble| trouble.fault).collect();
    faults.dedup();
    for fault in faults {
        let group: Vec<&Trouble> = troubles.iter().filter(|trouble| trouble.fault == fault).collect();
        let more = match group.len() {
            1 => String::new(),
            count => format!(" (and {} more)", count - 1),
        };
        let first = group[0];
        let text = format!(
            "{} of {total} machines {}: {}: {}{more}",
            group.len(),
            fault.phrase(),
            first.machine,
            one_line(&first.cause, CAUSE_LIMIT)
        );
        blockers.push((fault.gate(), with_hint(&text, fault.hint())));
    }
    (Check::fail(worst.reason(), message), blockers)
}

/// `text; hint`, on one line of at most [`MESSAGE_LIMIT`] characters: the
/// text is cut, never the hint.
pub(crate) fn with_hint(text: &str, hint: Option<&str>) -> String {
    match hint {
        Some(hint) => {
            let room = MESSAGE_LIMIT.saturating_sub(hint.chars().count() + 2);
            format!("{}; {hint}", one_line(text, room))
        }
        None => one_line(text, MESSAGE_LIMIT),
    }
}

/// `a, b, c and 2 more`: the first [`NAMED`] items, and how many more.
pub(crate) fn listed<T: AsRef<str>>(items: &[T]) -> String {
    let shown: Vec<&str> = items.iter().take(NAMED).map(AsRef::as_ref).collect();
    match items.len() - shown.len() {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

/// `text` on one line of at most `limit` characters: each run of
/// whitespace and control characters (line breaks included) becomes one
/// space, and a longer text is cut, ending with `...`.
pub(crate) fn one_line(text: &str, limit: usize) -> String {
    let words: Vec<&str> =
        text.split(|c: char| c.is_whitespace() || c.is_control()).filter(|word| !word.is_empty()).collect();
    let line = words.join(" ");
    if line.chars().count() <= limit {
        return line;
    }
    let cut: String = line.chars().take(limit.saturating_sub(3)).collect();
    format!("{}...", cut.trim_end())
}

#[cfg(test)]
mod tests;

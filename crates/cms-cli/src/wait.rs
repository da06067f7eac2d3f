//! `cms wait tenant/NAME --for=CONDITION`: follows the watch stream until the
//! tenant meets the condition, printing each change of its state on standard
//! error, or fails with exit code 7 when the timeout passes.

use std::sync::mpsc::RecvTimeoutError;
use std::time::Instant;

use anyhow::{Result, anyhow};
use cms_model::Tenant;

use crate::cli::WaitArgs;
use crate::client::Client;
use crate::failure::{ApiError, TimeoutError, usage};
use crate::output::out;
use crate::sse::{Item, watch_tenants};

/// What to wait for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Condition {
    /// `status.ready` is true.
    Ready,
    /// The tenant no longer exists.
    Delete,
    /// `status.phase` has this value.
    Phase(String),
    /// The condition of this type has this status (default `True`).
    Status { kind: String, status: String },
}

impl Condition {
    pub(crate) fn parse(text: &str) -> Result<Condition> {
        let condition = match text.split_once('=') {
            None if text == "ready" => Condition::Ready,
            None if text == "delete" => Condition::Delete,
            Some(("phase", phase)) if !phase.is_empty() => Condition::Phase(phase.to_string()),
            Some(("condition", rest)) if !rest.is_empty() => match rest.split_once('=') {
                Some((kind, status)) => Condition::Status { kind: kind.into(), status: status.into() },
                None => Condition::Status { kind: rest.into(), status: "True".into() },
            },
            _ => {
                return Err(usage(format!(
                    "--for={text}: expected ready, delete, phase=PHASE or condition=TYPE[=STATUS]"
                )));
            }
        };
        Ok(condition)
    }

    fn describe(&self) -> String {
        match self {
            Condition::Ready => "to be ready".into(),
            Condition::Delete => "to be deleted".into(),
            Condition::Phase(phase) => format!("to reach phase {phase}"),
            Condition::Status { kind, status } => format!("for condition {kind}={status}"),
        }
    }

    /// Whether the tenant, or its absence, meets the condition.
    pub(crate) fn met(&self, tenant: Option<&Tenant>) -> bool {
        let Some(tenant) = tenant else { return *self == Condition::Delete };
        match self {
            Condition::Ready => tenant.status.ready,
            Condition::Delete => false,
            Condition::Phase(phase) => phase_name(tenant) == *phase,
            Condition::Status { kind, status } => {
                tenant.status.conditions.iter().any(|c| c.kind == *kind && c.status == *status)
            }
        }
    }
}

fn phase_name(tenant: &Tenant) -> String {
    serde_json::to_value(tenant.status.phase)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// A one-line summary of a tenant's state, for progress lines.
pub(crate) fn summary(tenant: Option<&Tenant>) -> String {
    let Some(tenant) = tenant else { return "deleted".into() };
    let mut parts = vec![format!("phase {}", phase_name(tenant))];
    parts.push(if tenant.status.ready { "ready" } else { "not ready" }.into());
    if tenant.metadata.deletion_timestamp.is_some() {
        parts.push("deleting".into());
    }
    for condition in &tenant.status.conditions {
        parts.push(format!("{}={}", condition.kind, condition.status));
    }
    if let Some(message) = tenant.status.message.as_deref().filter(|m| !m.is_empty()) {
        parts.push(format!("({message})"));
    }
    parts.join(", ")
}

/// `cms wait`.
pub(crate) fn wait(client: &Client, args: &WaitArgs) -> Result<()> {
    let name = match args.target.split_once('/') {
        Some(("tenant" | "tenants", name)) if !name.is_empty() => name,
        _ => return Err(usage(format!("{}: expected tenant/NAME", args.target))),
    };
    let condition = Condition::parse(&args.condition)?;
    let target = format!("tenant/{name}");
    let started = Instant::now();
    let deadline = started + args.timeout;
    let receiver = watch_tenants(client, Some(name), None);
    let mut current: Option<Tenant> = None;
    let mut synced = false;
    let mut shown = String::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let item = match receiver.recv_timeout(left) {
            Ok(item) => item,
            Err(RecvTimeoutError::Timeout) => {
                return Err(TimeoutError(format!(
                    "timed out after {} waiting for {target} {}; last seen: {}",
                    humantime::format_duration(args.timeout),
                    condition.describe(),
                    summary(current.as_ref())
                ))
                .into());
            }
            Err(RecvTimeoutError::Disconnected) => return Err(anyhow!("the watch of {target} ended")),
        };
        match item {
            Item::Event(event) if event.object.metadata.name == name => {
                current = (event.kind != "DELETED").then_some(event.object);
            }
            Item::Event(_) => continue,
            Item::Synced => synced = true,
            Item::Failed(err) => return Err(err),
        }
        if !synced {
            continue;
        }
        if current.is_none() && condition != Condition::Delete {
            return Err(ApiError {
                status: 404,
                code: "NotFound".into(),
                message: format!("{target} does not exist (or was deleted while waiting)"),
            }
            .into());
        }
        let state = summary(current.as_ref());
        if state != shown {
            eprintln!("{target}: {state} ({}s)", started.elapsed().as_secs());
            shown = state;
        }
        if condition.met(current.as_ref()) {
            return out(&format!("{target} condition met\n"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_parse() {
        assert_eq!(Condition::parse("ready").unwrap(), Condition::Ready);
        assert_eq!(Condition::parse("phase=active").unwrap(), Condition::Phase("active".into()));
        assert_eq!(
            Condition::parse("condition=ConfigPatchesResolved").unwrap(),
            Condition::Status { kind: "ConfigPatchesResolved".into(), status: "True".into() }
        );
        assert!(Condition::parse("soon").is_err());
        assert!(Condition::parse("phase=").is_err());
    }

    #[test]
    fn deletion_is_met_by_absence_only() {
        let tenant = Tenant::default();
        assert!(Condition::Delete.met(None));
        assert!(!Condition::Delete.met(Some(&tenant)));
        assert!(!Condition::Ready.met(None));
        assert!(Condition::Phase("pending".into()).met(Some(&tenant)));
    }
}

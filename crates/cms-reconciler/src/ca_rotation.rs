//! The rotation of a tenant's CAs, carried on (`docs/ca-rotation.md`).
//! The sealed bundle holds where it stands; each phase changes what the
//! machines' configs carry, and `settle.rs` sends those one machine at a
//! time (control planes first) while a rotation is under way. A pass in
//! which every machine runs the config rendered for it moves the rotation
//! to its next phase, a compare-and-swap of the sealed bundle, so a restart
//! or another replica carries on from the phase the bundle names and each
//! machine's config hash says whether it took that phase's config: none is
//! skipped, and none is sent a config it runs already.
//!
//! A machine that does not take its config (off, refusing, failing) holds
//! the rotation in its phase: [`CA_ROTATION`] says `Paused` with the
//! reason, and the next pass tries again; nothing moves on without it.

use chrono::Utc;
use cms_model::{CaRotationStatus, TenantStatus};
use cms_tenancy::{Rotation, RotationPhase, TenancyError, authority_name, phase_name};

use crate::blocker::listed;
use crate::settle::Settled;
use crate::status::set_condition;
use crate::{Context, ReconcileError};

/// The condition of a rotation of the tenant's CAs: `True` while it goes
/// (with its phase), `False` when it is paused (with the reason) or done.
pub const CA_ROTATION: &str = "CARotation";

/// What a pass did with the rotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// None is under way.
    Idle,
    /// It moved to a phase, or ended (`None`).
    Moved { rotation: Rotation, to: Option<RotationPhase> },
    /// It waits in its phase for these machines to take their config;
    /// `reason` when one of them failed to.
    Waiting { rotation: Rotation, behind: Vec<String>, reason: Option<String> },
}

impl Step {
    /// Whether a rotation goes on after this pass.
    pub(crate) fn under_way(&self) -> bool {
        !matches!(self, Step::Idle | Step::Moved { to: None, .. })
    }
}

/// The rotation under way, read before the configs are rendered.
pub(crate) async fn read(tenant: &str, ctx: &Context) -> Result<Option<Rotation>, ReconcileError> {
    let Some(rotations) = &ctx.rotations else { return Ok(None) };
    match rotations.rotation(tenant).await {
        Ok(rotation) => Ok(rotation),
        // A tenant being deleted may have lost its secrets.
        Err(TenancyError::NoSecrets(_)) => Ok(None),
        Err(source) => Err(ReconcileError::Secrets(source)),
    }
}

/// Moves `rotation` on when every machine runs the config rendered for it
/// in this pass (`settled.behind` is empty) and the tenant is ready with
/// them (`unready` says why it is not: a machine leaving or off, the
/// Kubernetes API or etcd not answering, a rollout going or paused).
pub(crate) async fn advance(
    tenant: &str,
    rotation: Option<Rotation>,
    settled: &Settled,
    unready: Option<&str>,
    ctx: &Context,
) -> Result<Step, ReconcileError> {
    let (Some(rotation), Some(rotations)) = (rotation, &ctx.rotations) else { return Ok(Step::Idle) };
    if !settled.behind.is_empty() {
        let reason = settled.behind.iter().find_map(|machine| {
            settled.problem(machine).map(|problem| format!("{machine}: {}", problem.cause))
        });
        return Ok(Step::Waiting { rotation, behind: settled.behind.clone(), reason });
    }
    if let Some(unready) = unready {
        let reason = Some(format!("the tenant is not ready: {unready}"));
        return Ok(Step::Waiting { rotation, behind: Vec::new(), reason });
    }
    match rotations.advance(tenant, rotation.phase).await {
        Ok(to) => Ok(Step::Moved { rotation, to }),
        // Moved by another writer meanwhile: the next pass reads it.
        Err(TenancyError::Conflict(reason)) => {
            tracing::info!(tenant, %reason, "the CA rotation moved meanwhile");
            Ok(Step::Waiting { rotation, behind: Vec::new(), reason: None })
        }
        Err(source) => Err(ReconcileError::Secrets(source)),
    }
}

/// The rotation in the tenant's status: `status.caRotation` and
/// [`CA_ROTATION`]. A pass with no rotation leaves the last one's record,
/// but for one recorded at `dropping`: its end, whose status write was
/// lost (the bundle moved on, the status did not), is recorded then.
pub(crate) fn write_status(status: &mut TenantStatus, step: &Step) {
    let (rotation, phase) = match step {
        Step::Idle => {
            if let Some(recorded) =
                status.ca_rotation.as_mut().filter(|recorded| recorded.phase == "dropping")
            {
                recorded.phase = phase_name(None).to_string();
                recorded.since = Utc::now();
                recorded.message = None;
                set_condition(status, CA_ROTATION, false, "Done", "the CAs were rotated");
            }
            return;
        }
        Step::Moved { rotation, to } => (rotation, *to),
        Step::Waiting { rotation, .. } => (rotation, Some(rotation.phase)),
    };
    let authorities: Vec<String> =
        rotation.authorities.iter().map(|authority| authority_name(*authority).to_string()).collect();
    let named =
        format!("the {} CA{}", authorities.join(" and "), if authorities.len() > 1 { "s" } else { "" });
    let phase = phase_name(phase);
    let since = match &status.ca_rotation {
        Some(recorded) if recorded.phase == phase && recorded.authorities == authorities => recorded.since,
        _ => Utc::now(),
    };
    let message = match step {
        Step::Waiting { behind, reason: Some(reason), .. } if !behind.is_empty() => {
            Some(format!("paused: {reason}; waiting for {} to take the phase's config", listed(behind)))
        }
        Step::Waiting { reason: Some(reason), .. } => Some(format!("paused: {reason}")),
        Step::Waiting { behind, reason: None, .. } if !behind.is_empty() => {
            Some(format!("waiting for {} to take the phase's config", listed(behind)))
        }
        _ => None,
    };
    match (step, &message) {
        (Step::Moved { to: None, .. }, _) => {
            set_condition(status, CA_ROTATION, false, "Done", &format!("{named} rotated"))
        }
        (Step::Waiting { reason: Some(_), .. }, Some(message)) => set_condition(
            status,
            CA_ROTATION,
            false,
            "Paused",
            &format!("rotating {named}, {phase}: {message}"),
        ),
        (_, message) => {
            let progress = match message {
                Some(message) => format!("rotating {named}, {phase}: {message}"),
                None => format!("rotating {named}, {phase}"),
            };
            set_condition(status, CA_ROTATION, true, "InProgress", &progress)
        }
    }
    status.ca_rotation = Some(CaRotationStatus { authorities, phase: phase.to_string(), since, message });
}

#[cfg(test)]
mod tests {
    use super::*;
    use cms_tenancy::Authority;

    fn rotation(phase: RotationPhase) -> Rotation {
        Rotation { authorities: vec![Authority::Os, Authority::Kubernetes], phase }
    }

    #[test]
    fn the_status_follows_each_step_and_keeps_since_within_a_phase() {
        let mut status = TenantStatus::default();
        write_status(&mut status, &Step::Idle);
        assert_eq!(status.ca_rotation, None);
        let moved =
            Step::Moved { rotation: rotation(RotationPhase::Generated), to: Some(RotationPhase::Accepting) };
        write_status(&mut status, &moved);
        let recorded = status.ca_rotation.clone().unwrap();
        assert_eq!((recorded.phase.as_str(), recorded.authorities.len()), ("accepting", 2));
        let condition = status.conditions.iter().find(|c| c.kind == CA_ROTATION).unwrap();
        assert_eq!((condition.status.as_str(), condition.reason.as_str()), ("True", "InProgress"));
        assert!(condition.message.contains("the os and kubernetes CAs, accepting"), "{}", condition.message);

        let waiting = Step::Waiting {
            rotation: rotation(RotationPhase::Accepting),
            behind: vec!["workers-0".into()],
            reason: Some("workers-0: connection refused".into()),
        };
        write_status(&mut status, &waiting);
        let paused = status.ca_rotation.clone().unwrap();
        assert_eq!(paused.since, recorded.since, "the same phase keeps its start");
        assert!(paused.message.unwrap().contains("workers-0: connection refused"));
        let condition = status.conditions.iter().find(|c| c.kind == CA_ROTATION).unwrap();
        assert_eq!((condition.status.as_str(), condition.reason.as_str()), ("False", "Paused"));

        write_status(&mut status, &Step::Moved { rotation: rotation(RotationPhase::Dropping), to: None });
        let done = status.ca_rotation.clone().unwrap();
        assert_eq!((done.phase.as_str(), done.message), ("done", None));
        let condition = status.conditions.iter().find(|c| c.kind == CA_ROTATION).unwrap();
        assert_eq!((condition.status.as_str(), condition.reason.as_str()), ("False", "Done"));
        write_status(&mut status, &Step::Idle);
        assert_eq!(status.ca_rotation.clone().unwrap().phase, "done", "the last rotation's record stays");

        // The end's status write was lost: the bundle has no rotation, the
        // status says `dropping`; the next pass records the end.
        write_status(
            &mut status,
            &Step::Moved { rotation: rotation(RotationPhase::Swapping), to: Some(RotationPhase::Dropping) },
        );
        write_status(&mut status, &Step::Idle);
        assert_eq!(status.ca_rotation.clone().unwrap().phase, "done");
        let condition = status.conditions.iter().find(|c| c.kind == CA_ROTATION).unwrap();
        assert_eq!(condition.reason, "Done");
        // One just asked for, not yet read by a pass, is left alone.
        status.ca_rotation.as_mut().unwrap().phase = "generated".into();
        write_status(&mut status, &Step::Idle);
        assert_eq!(status.ca_rotation.unwrap().phase, "generated");
    }
}

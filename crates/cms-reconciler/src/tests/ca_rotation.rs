//! A rotation of the tenant's CAs carried on by the reconciler: each
//! phase's configs go out one machine at a time, control planes first, and
//! the rotation moves on only once every machine runs its phase's config.
//! A machine that does not answer holds it, paused with the reason.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use cms_tenancy::{Authority, CaRotations, Rotation, RotationPhase, TenancyError, phase_name};

use super::hosts::{Hosts, converged, spec};
use super::{condition, fixture_with, renderer, tenant};
use crate::{CA_ROTATION, reconcile};

/// A rotation kept in memory whose phase shows in every machine config, as
/// the CAs a real bundle's configs carry do (the same in `generated` as
/// before, in `switched` as in `accepting`, and once done as in
/// `dropping`).
struct Rotations {
    phase: Mutex<Option<RotationPhase>>,
    extra: Arc<Mutex<String>>,
    advanced: Mutex<Vec<&'static str>>,
}

impl Rotations {
    fn configs_carry(phase: Option<RotationPhase>) -> String {
        match phase {
            None => "cas: dropping\n".into(),
            Some(RotationPhase::Generated) => String::new(),
            Some(RotationPhase::Accepting | RotationPhase::Switched) => "cas: accepting\n".into(),
            Some(phase) => format!("cas: {}\n", phase_name(Some(phase))),
        }
    }
}

#[async_trait]
impl CaRotations for Rotations {
    async fn rotation(&self, _: &str) -> Result<Option<Rotation>, TenancyError> {
        let phase = *self.phase.lock().unwrap();
        Ok(phase.map(|phase| Rotation { authorities: vec![Authority::Os], phase }))
    }

    async fn begin(&self, _: &str, _: &[Authority]) -> Result<Rotation, TenancyError> {
        unreachable!("the API begins rotations")
    }

    async fn advance(&self, _: &str, from: RotationPhase) -> Result<Option<RotationPhase>, TenancyError> {
        let mut phase = self.phase.lock().unwrap();
        assert_eq!(*phase, Some(from), "moved on from the phase it is at");
        *phase = from.next();
        *self.extra.lock().unwrap() = Rotations::configs_carry(*phase);
        self.advanced.lock().unwrap().push(phase_name(*phase));
        Ok(*phase)
    }
}

#[tokio::test]
async fn each_phase_reaches_every_machine_in_turn_and_a_silent_machine_holds_it() {
    let hosts = Arc::new(Hosts::default());
    let extra = Arc::new(Mutex::new(String::new()));
    let mut f = fixture_with(hosts.clone(), renderer(extra.clone())).await;
    hosts.link(&f);
    converged(&f, spec(3, 1, 1, "1.31.1")).await;
    let rotations = Arc::new(Rotations {
        phase: Mutex::new(Some(RotationPhase::Generated)),
        extra: extra.clone(),
        advanced: Mutex::default(),
    });
    f.ctx.rotations = Some(rotations.clone());
    let store = f.store.as_ref();
    let sent_before = hosts.applied.lock().unwrap().len();

    // `generated` changes no config: the first pass moves on.
    reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(*rotations.advanced.lock().unwrap(), ["accepting"]);
    // The worker stops answering: the control planes take the accepting
    // config, and the rotation waits for the worker, saying why.
    hosts.off.lock().unwrap().insert("workers-0".into());
    for _ in 0..3 {
        reconcile("acme", &f.ctx).await.unwrap();
    }
    assert_eq!(*rotations.advanced.lock().unwrap(), ["accepting"]);
    let status = tenant(store, "acme").status;
    let paused = condition(&status, CA_ROTATION);
    assert_eq!((paused.status.as_str(), paused.reason.as_str()), ("False", "Paused"));
    assert!(paused.message.contains("workers-0"), "{}", paused.message);
    let recorded = status.ca_rotation.clone().unwrap();
    assert_eq!(
        (recorded.phase.as_str(), recorded.authorities.clone()),
        ("accepting", vec!["os".to_string()])
    );
    assert!(recorded.message.unwrap().contains("workers-0"));

    // Back: the rotation goes to its end, a phase a pass.
    hosts.off.lock().unwrap().clear();
    for _ in 0..8 {
        reconcile("acme", &f.ctx).await.unwrap();
    }
    assert_eq!(
        *rotations.advanced.lock().unwrap(),
        ["accepting", "switched", "swapping", "dropping", "done"]
    );
    let status = tenant(store, "acme").status;
    assert_eq!(status.ca_rotation.clone().unwrap().phase, "done");
    let done = condition(&status, CA_ROTATION);
    assert_eq!((done.status.as_str(), done.reason.as_str()), ("False", "Done"));
    assert!(status.ready, "the tenant stays ready");

    // Each machine took each phase's config once, node by node, control
    // planes first, and every machine one phase before any the next.
    let applied = hosts.applied.lock().unwrap()[sent_before..].to_vec();
    let sent: Vec<(String, String)> = applied
        .iter()
        .map(|applied| {
            let cas = applied.config.lines().find(|line| line.starts_with("cas: ")).unwrap_or("cas: none");
            (applied.machine.clone(), cas.trim_start_matches("cas: ").to_string())
        })
        .collect();
    let order = ["cp-0", "cp-1", "cp-2", "workers-0"];
    let mut expected: Vec<(String, String)> = Vec::new();
    for phase in ["accepting", "swapping", "dropping"] {
        expected.extend(order.iter().map(|machine| (machine.to_string(), phase.to_string())));
    }
    assert_eq!(sent, expected);
}

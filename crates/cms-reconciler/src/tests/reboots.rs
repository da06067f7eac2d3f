//! Config changes that need a reboot: every node refuses the change in
//! `NO_REBOOT` mode, each machine is marked `reboot-pending`, and the
//! rollout reboots them one at a time, control planes first with the etcd
//! leader last (after it handed over), then the workers; a machine is done
//! once its boot time moved and its Node is Ready. One that does not come
//! back pauses the rollout.

use std::sync::{Arc, Mutex};

use cms_model::{Machine, Phase};
use cms_store::Store;

use super::hosts::{FIRST_BOOT, Hosts, converged, machine, spec};
use super::{Fixture, condition, fixture_with, machines, renderer, tenant};
use crate::settle::fingerprint;
use crate::{CONFIG_HASH_ANNOTATION, REBOOT_PENDING_ANNOTATION, REBOOTING, REBOOTING_ANNOTATION, reconcile};

/// The change every machine needs a reboot for.
const CHANGE: &str = "machine:\n  install:\n    disk: /dev/nvme0n1\n";

/// The machines whose reboot is in flight.
fn rebooting(store: &dyn Store) -> Vec<Machine> {
    let all = machines(store, "acme");
    all.into_iter().filter(|m| m.metadata.annotations.contains_key(REBOOTING_ANNOTATION)).collect()
}

fn ids(machines: &[Machine]) -> Vec<&str> {
    machines.iter().map(|m| m.metadata.name.as_str()).collect()
}

/// A converged tenant of 3 control planes (cp-1 leads etcd) and 2 workers,
/// whose config then changes in a way every node takes only with a reboot.
async fn changed() -> (Fixture, Arc<Hosts>) {
    let hosts = Arc::new(Hosts::default());
    let extra = Arc::new(Mutex::new(String::new()));
    let f = fixture_with(hosts.clone(), renderer(extra.clone())).await;
    hosts.link(&f);
    *f.etcd.leader.lock().unwrap() = Some("cp-1".into());
    converged(&f, spec(3, 2, 1, "1.31.1")).await;
    assert!(hosts.log.lock().unwrap().iter().all(|call| call.starts_with("maintenance ")));
    hosts.reboot_required.store(true, std::sync::atomic::Ordering::SeqCst);
    *extra.lock().unwrap() = CHANGE.into();
    (f, hosts)
}

/// The config a machine of `role` renders after the change.
fn changed_config(role: &str) -> String {
    format!("machine:\n  type: {role}\n{CHANGE}")
}

#[tokio::test]
async fn reboots_for_a_config_roll_one_machine_at_a_time_the_etcd_leader_last() {
    let (f, hosts) = changed().await;
    let store = f.store.as_ref();

    // The first pass: every node refuses the change without a reboot, so
    // every machine is marked, and the first control plane that does not
    // lead starts.
    reconcile("acme", &f.ctx).await.unwrap();
    let mut refused: Vec<String> =
        hosts.log.lock().unwrap().iter().filter(|c| c.starts_with("reboot-required")).cloned().collect();
    refused.sort();
    let every = ["cp-0", "cp-1", "cp-2", "workers-0", "workers-1"];
    assert_eq!(refused, every.map(|id| format!("reboot-required {id}")));
    for m in machines(store, "acme") {
        let role = if m.metadata.name.starts_with("cp") { "controlplane" } else { "worker" };
        let pending = m.metadata.annotations.get(REBOOT_PENDING_ANNOTATION);
        assert_eq!(pending, Some(&fingerprint(&changed_config(role))), "{}", m.metadata.name);
        assert_ne!(m.metadata.annotations.get(CONFIG_HASH_ANNOTATION), pending, "not taken yet");
    }
    assert_eq!(*f.etcd.changes.lock().unwrap(), ["reboot cp-0"]);
    let cp0 = machine(store, "cp-0");
    assert_eq!(cp0.status.stage, "rebooting");
    assert!(!cp0.status.ready);
    let intent = &cp0.metadata.annotations[REBOOTING_ANNOTATION];
    let expected = format!("{} {FIRST_BOOT} ", fingerprint(&changed_config("controlplane")));
    assert!(intent.starts_with(&expected), "the config and the boot time before: {intent}");
    let status = tenant(store, "acme").status;
    let progress = condition(&status, REBOOTING);
    assert_eq!((progress.status.as_str(), progress.reason.as_str()), ("True", "InProgress"));
    assert!(progress.message.contains("0 of 5 machines run their config"), "{progress:?}");
    assert!(progress.message.contains("rebooting cp-0"), "{progress:?}");
    assert_eq!(status.phase, Phase::Updating);
    assert!(!status.ready);

    // Its boot time has not moved yet: still in flight, nothing else starts.
    reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(ids(&rebooting(store)), ["cp-0"]);
    assert_eq!(machine(store, "cp-0").status.stage, "rebooting");
    // It booted again, but its Node is not Ready yet.
    f.kube.not_ready.lock().unwrap().insert("node-cp-0".into());
    reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(ids(&rebooting(store)), ["cp-0"]);
    assert_eq!(*f.etcd.changes.lock().unwrap(), ["reboot cp-0"]);
    // Ready: done, and the next control plane that does not lead starts.
    f.kube.not_ready.lock().unwrap().clear();
    reconcile("acme", &f.ctx).await.unwrap();
    let cp0 = machine(store, "cp-0");
    assert_eq!(
        cp0.metadata.annotations.get(CONFIG_HASH_ANNOTATION),
        Some(&fingerprint(&changed_config("controlplane")))
    );
    assert!(!cp0.metadata.annotations.contains_key(REBOOT_PENDING_ANNOTATION));
    assert!(!cp0.metadata.annotations.contains_key(REBOOTING_ANNOTATION));
    assert_eq!((cp0.status.stage.as_str(), cp0.status.ready), ("ready", true));
    assert_eq!(ids(&rebooting(store)), ["cp-2"]);
    assert!(condition(&tenant(store, "acme").status, REBOOTING).message.contains("1 of 5 machines"));

    // The rest, never two machines at once (the hosts assert it too).
    let mut passes = 0;
    loop {
        passes += 1;
        assert!(passes < 40, "the reboots do not finish: {:?}", f.etcd.changes.lock().unwrap());
        reconcile("acme", &f.ctx).await.unwrap();
        let flying = rebooting(store);
        assert!(flying.len() <= 1, "{:?}", ids(&flying));
        for m in &flying {
            assert_eq!(m.status.stage, "rebooting");
        }
        let status = tenant(store, "acme").status;
        if flying.is_empty() {
            assert!(status.ready, "{status:?}");
            break;
        }
        assert_eq!(condition(&status, REBOOTING).status, "True");
    }
    assert_eq!(
        *f.etcd.changes.lock().unwrap(),
        ["reboot cp-0", "reboot cp-2", "forfeit cp-1", "reboot cp-1", "reboot workers-0", "reboot workers-1"],
        "control planes first, the leader last after it handed over, then the workers"
    );
    let reboots: Vec<String> =
        hosts.log.lock().unwrap().iter().filter(|c| c.starts_with("reboot ")).cloned().collect();
    assert_eq!(reboots.len(), 5, "each machine rebooted once: {reboots:?}");

    // Every machine runs the new config, as its fingerprint says.
    for m in machines(store, "acme") {
        let address = m.spec.management_address.clone().unwrap();
        let running = hosts.config(&address).unwrap();
        assert!(running.ends_with(CHANGE), "{}: {running}", m.metadata.name);
        assert_eq!(m.metadata.annotations.get(CONFIG_HASH_ANNOTATION), Some(&fingerprint(&running)));
        assert!(!m.metadata.annotations.contains_key(REBOOT_PENDING_ANNOTATION), "{}", m.metadata.name);
        assert!(!m.metadata.annotations.contains_key(REBOOTING_ANNOTATION), "{}", m.metadata.name);
        assert_eq!((m.status.stage.as_str(), m.status.ready), ("ready", true), "{}", m.metadata.name);
    }
    let status = tenant(store, "acme").status;
    let done = condition(&status, REBOOTING);
    assert_eq!((done.status.as_str(), done.reason.as_str()), ("False", "Done"));
    assert_eq!(done.message, "every machine runs its config");
    assert_eq!(status.phase, Phase::Active);

    // Nothing more to do: no call reaches a host.
    let calls = hosts.log.lock().unwrap().len();
    reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(hosts.log.lock().unwrap().len(), calls);
}

#[tokio::test]
async fn a_machine_that_does_not_come_back_pauses_the_reboots() {
    let (f, hosts) = changed().await;
    let store = f.store.as_ref();
    hosts.stuck.lock().unwrap().insert("cp-0".into());
    for _ in 0..3 {
        reconcile("acme", &f.ctx).await.unwrap();
    }
    assert_eq!(ids(&rebooting(store)), ["cp-0"], "waits for its boot time to move");
    assert!(!tenant(store, "acme").metadata.annotations.contains_key(crate::PAUSED_ANNOTATION));

    // Past the reboot timeout (15 minutes).
    super::hosts::backdate(store, "cp-0", REBOOTING_ANNOTATION, chrono::Duration::minutes(16)).await;
    reconcile("acme", &f.ctx).await.unwrap();
    let paused = tenant(store, "acme");
    assert!(paused.metadata.annotations[crate::PAUSED_ANNOTATION].ends_with(&format!(" {REBOOTING}")));
    let condition = condition(&paused.status, REBOOTING);
    assert_eq!((condition.status.as_str(), condition.reason.as_str()), ("False", "Paused"));
    assert!(condition.message.contains("machine cp-0 did not finish its step (rebooting, "), "{condition:?}");
    assert!(condition.message.contains("it has not rebooted yet"), "{condition:?}");
    let message = paused.status.message.clone().unwrap_or_default();
    assert_eq!(
        message,
        format!("the rollout is paused: {}; fix the cause, then resume the rollout", condition.message)
    );
    assert_eq!(paused.status.phase, Phase::Updating);

    // Paused: nothing else reboots.
    for _ in 0..3 {
        reconcile("acme", &f.ctx).await.unwrap();
    }
    assert_eq!(*f.etcd.changes.lock().unwrap(), ["reboot cp-0"]);
    // Its step is given up: due again, for a resume to start anew.
    let given_up = machine(store, "cp-0");
    assert!(!given_up.metadata.annotations.contains_key(REBOOTING_ANNOTATION));
    assert!(given_up.metadata.annotations.contains_key(crate::REBOOT_PENDING_ANNOTATION));
    assert_eq!(super::condition(&tenant(store, "acme").status, REBOOTING).reason, "Paused");

    // An operator fixes the host and resumes: the step starts anew.
    let address = machine(store, "cp-0").spec.management_address.unwrap();
    hosts.fix("cp-0", &address);
    crate::rollout::set_annotation(&f.ctx, "acme", crate::PAUSED_ANNOTATION, None).await.unwrap();
    reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(*f.etcd.changes.lock().unwrap(), ["reboot cp-0", "reboot cp-0"]);
    assert_eq!(ids(&rebooting(store)), ["cp-0"]);
}

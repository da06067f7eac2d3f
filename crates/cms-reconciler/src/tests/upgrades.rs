//! Rolling Talos upgrades and the one bootstrap, against [`Upgradable`]
//! nodes: control planes one at a time, then workers in batches; a failed
//! upgrade pauses the rollout until its annotation goes, and one that does
//! not finish in time pauses it until the spec changes again.

use super::*;

/// Nodes that run a version each and emulate an upgrade: the node is down
/// for one `Version` call after `Upgrade`, then runs the new version. It
/// checks that no control plane goes down while another is down.
#[derive(Default)]
pub(super) struct Upgradable {
    pub(super) versions: Mutex<std::collections::HashMap<String, String>>,
    pub(super) down: Mutex<std::collections::HashSet<String>>,
    pub(super) upgrades: Mutex<Vec<String>>,
    pub(super) fail: Mutex<Option<String>>,
    /// A machine that takes its `Upgrade` but keeps its version.
    pub(super) stuck: Mutex<Option<String>>,
    pub(super) bootstraps: Mutex<Vec<String>>,
}

#[async_trait]
impl NodeClient for Upgradable {
    // etcd is the fixture's (`fakes::Etcd`), in front of this.
    async fn etcd_members(&self, _: &NodeRef) -> Result<Vec<cms_tenancy::EtcdMember>, NodeError> {
        Err(refused("not asked here"))
    }

    async fn etcd_status(&self, _: &NodeRef) -> Result<cms_tenancy::EtcdMemberStatus, NodeError> {
        Err(refused("not asked here"))
    }

    async fn etcd_leave(&self, _: &NodeRef) -> Result<(), NodeError> {
        Err(refused("not asked here"))
    }

    async fn etcd_remove_member(&self, _: &NodeRef, _: u64) -> Result<(), NodeError> {
        Err(refused("not asked here"))
    }

    async fn reset(&self, _: &NodeRef, _: bool) -> Result<(), NodeError> {
        Err(refused("not asked here"))
    }

    async fn etcd_snapshot(&self, _: &NodeRef) -> Result<cms_tenancy::SnapshotChunks, NodeError> {
        Err(refused("not asked here"))
    }

    async fn etcd_forfeit_leadership(&self, _: &NodeRef) -> Result<Option<String>, NodeError> {
        Err(refused("not asked here"))
    }

    async fn etcd_recover(&self, _: &NodeRef, _: cms_tenancy::UploadStream) -> Result<(), NodeError> {
        Err(refused("not asked here"))
    }

    async fn bootstrap_recover(&self, _: &NodeRef, _: bool) -> Result<(), NodeError> {
        Err(refused("not asked here"))
    }

    async fn apply_config(
        &self,
        _node: &cms_tenancy::NodeRef,
        _config: &str,
        _configured: bool,
    ) -> Result<(), NodeError> {
        Ok(())
    }

    async fn version(&self, node: &cms_tenancy::NodeRef) -> Result<String, NodeError> {
        if self.down.lock().unwrap().remove(&node.machine) {
            return Err(refused("rebooting"));
        }
        Ok(self.versions.lock().unwrap().get(&node.machine).cloned().unwrap_or_else(|| "1.14.0".into()))
    }

    async fn bootstrap(&self, node: &cms_tenancy::NodeRef) -> Result<Bootstrapped, NodeError> {
        let mut calls = self.bootstraps.lock().unwrap();
        calls.push(node.machine.clone());
        Ok(if calls.len() == 1 { Bootstrapped::Now } else { Bootstrapped::Already })
    }

    async fn apply_config_reboot(&self, _: &cms_tenancy::NodeRef, _: &str) -> Result<(), NodeError> {
        Err(refused("not asked here"))
    }

    async fn boot_time(&self, _: &cms_tenancy::NodeRef) -> Result<u64, NodeError> {
        Err(refused("not asked here"))
    }

    async fn upgrade(&self, node: &cms_tenancy::NodeRef, image: &str) -> Result<(), NodeError> {
        let version = image.rsplit_once(":v").map_or(image, |(_, version)| version);
        self.upgrades.lock().unwrap().push(node.machine.clone());
        if self.fail.lock().unwrap().as_deref() == Some(node.machine.as_str()) {
            return Err(refused("the disk is full"));
        }
        if self.stuck.lock().unwrap().as_deref() == Some(node.machine.as_str()) {
            return Ok(());
        }
        let mut down = self.down.lock().unwrap();
        if node.machine.starts_with("cp") {
            assert!(!down.iter().any(|other| other.starts_with("cp")), "two control planes down: {down:?}");
        }
        down.insert(node.machine.clone());
        self.versions.lock().unwrap().insert(node.machine.clone(), version.to_string());
        Ok(())
    }
}

pub(super) async fn upgradable_tenant(f: &Fixture, version: &str) {
    let mut spec = json!({"kubernetesVersion": "1.31.1", "talosVersion": version, "nodeGroups": [
        {"name": "cp", "role": "controlplane", "count": 3, "providerClass": "metal:bare", "providerConfig": {"hosts": hosts(3, 0)}, "configPatches": []},
        {"name": "workers", "role": "worker", "count": 3, "providerClass": "metal:bare", "providerConfig": {"hosts": hosts(3, 1)}, "configPatches": [], "maxParallelism": 2},
    ]});
    match f.store.get(&Key::tenant("acme")) {
        None => {
            f.store.create(Key::tenant("acme"), Draft { spec, ..Draft::default() }).await.unwrap();
        }
        Some(object) => {
            spec["nodeGroups"] =
                serde_json::to_value(tenant(f.store.as_ref(), "acme").spec.node_groups).unwrap();
            f.store
                .update(Key::tenant("acme"), Draft { spec, ..Draft::default() }, object.resource_version)
                .await
                .unwrap();
        }
    }
}

#[tokio::test]
async fn talos_upgrades_roll_control_planes_one_at_a_time_then_workers_in_batches() {
    let nodes = Arc::new(Upgradable::default());
    let f = fixture(nodes.clone()).await;
    upgradable_tenant(&f, "1.14.0").await;
    reconcile("acme", &f.ctx).await.unwrap();
    assert!(tenant(f.store.as_ref(), "acme").status.ready);

    upgradable_tenant(&f, "1.14.1").await;
    let mut passes = 0;
    loop {
        passes += 1;
        assert!(passes < 40, "the rollout does not finish: {:?}", nodes.upgrades.lock().unwrap());
        let action = reconcile("acme", &f.ctx).await.unwrap();
        let status = tenant(f.store.as_ref(), "acme").status;
        if action == Action::Requeue(crate::rollout::UPGRADE_POLL) {
            assert_eq!(status.phase, Phase::Updating);
            continue;
        }
        assert!(status.ready && status.phase == Phase::Active, "{status:?}");
        break;
    }
    let order = nodes.upgrades.lock().unwrap().clone();
    // cp-0 leads etcd (the fake's first member), so it goes last.
    assert_eq!(&order[..3], ["cp-1", "cp-2", "cp-0"]);
    let mut workers = order[3..].to_vec();
    workers.sort();
    assert_eq!(workers, ["workers-0", "workers-1", "workers-2"]);
    assert!(
        machines(f.store.as_ref(), "acme")
            .iter()
            .all(|m| m.status.talos_version.as_deref() == Some("1.14.1"))
    );
}

#[tokio::test]
async fn a_failed_upgrade_pauses_until_the_annotation_goes() {
    let nodes = Arc::new(Upgradable::default());
    *nodes.fail.lock().unwrap() = Some("cp-1".into());
    let f = fixture(nodes.clone()).await;
    upgradable_tenant(&f, "1.14.0").await;
    reconcile("acme", &f.ctx).await.unwrap();
    upgradable_tenant(&f, "1.14.1").await;
    for _ in 0..10 {
        reconcile("acme", &f.ctx).await.unwrap();
    }
    let paused = tenant(f.store.as_ref(), "acme");
    // cp-0 leads etcd, so cp-1 is the first upgraded, and fails.
    assert_eq!(nodes.upgrades.lock().unwrap().clone(), ["cp-1"], "nothing after the failure");
    let message = paused.status.message.clone().unwrap_or_default();
    assert!(message.starts_with("the rollout is paused: machine cp-1 "), "{message}");
    assert!(message.contains("the disk is full"), "{message}");
    assert_eq!(condition(&paused.status, crate::UPGRADING).reason, "Paused");
    assert!(paused.metadata.annotations.contains_key(crate::PAUSED_ANNOTATION));
    // The machine says it too, pass after pass while the rollout is paused.
    let machine_message = |id: &str| {
        let machine = machines(f.store.as_ref(), "acme").into_iter().find(|m| m.metadata.name == id);
        machine.and_then(|m| m.status.message).unwrap_or_default()
    };
    let said = machine_message("cp-1");
    assert!(said.starts_with("the rollout paused at this machine: machine cp-1 "), "{said}");
    assert!(said.contains("the disk is full"), "{said}");
    assert_eq!(machine_message("cp-0"), "", "the others have nothing to say");

    // An operator fixes the node and removes the annotation: it resumes.
    *nodes.fail.lock().unwrap() = None;
    let ctx = &f.ctx;
    crate::rollout::set_annotation(ctx, "acme", crate::PAUSED_ANNOTATION, None).await.unwrap();
    for _ in 0..20 {
        reconcile("acme", &f.ctx).await.unwrap();
    }
    assert!(tenant(f.store.as_ref(), "acme").status.ready);
    assert_eq!(nodes.upgrades.lock().unwrap().len(), 1 + 6);
    assert_eq!(machine_message("cp-1"), "", "resumed and done: the note is gone");
}

#[tokio::test]
async fn an_upgrade_that_does_not_finish_in_time_pauses_until_the_spec_changes_again() {
    let nodes = Arc::new(Upgradable::default());
    *nodes.stuck.lock().unwrap() = Some("cp-1".into());
    let f = fixture(nodes.clone()).await;
    let store = f.store.as_ref();
    upgradable_tenant(&f, "1.14.0").await;
    reconcile("acme", &f.ctx).await.unwrap();
    upgradable_tenant(&f, "1.14.1").await;
    assert_eq!(store.get(&Key::tenant("acme")).unwrap().generation, 2);
    // cp-1 takes its `Upgrade` but keeps answering with its old version.
    for _ in 0..3 {
        let action = reconcile("acme", &f.ctx).await.unwrap();
        assert_eq!(action, Action::Requeue(crate::rollout::UPGRADE_POLL), "still in flight");
    }
    assert_eq!(nodes.upgrades.lock().unwrap().clone(), ["cp-1"]);
    let flying = super::hosts::machine(store, "cp-1");
    assert!(flying.metadata.annotations[crate::UPGRADING_ANNOTATION].starts_with("1.14.1 "));
    assert!(!tenant(store, "acme").metadata.annotations.contains_key(crate::PAUSED_ANNOTATION));

    // Past the upgrade timeout: the rollout pauses at the generation it ran.
    let late = chrono::Duration::from_std(crate::UPGRADE_TIMEOUT).unwrap() + chrono::Duration::minutes(1);
    super::hosts::backdate(store, "cp-1", crate::UPGRADING_ANNOTATION, late).await;
    reconcile("acme", &f.ctx).await.unwrap();
    let paused = tenant(store, "acme");
    let at = paused.metadata.annotations.get(crate::PAUSED_ANNOTATION).cloned();
    assert_eq!(at, Some(format!("2 {}", crate::UPGRADING)), "paused at generation 2");
    let stopped = condition(&paused.status, crate::UPGRADING);
    assert_eq!((stopped.status.as_str(), stopped.reason.as_str()), ("False", "Paused"));
    assert_eq!(
        stopped.message,
        "machine cp-1 did not finish its step (upgrading, 1.14.1) within 900s: it runs 1.14.0"
    );
    let given_up = super::hosts::machine(store, "cp-1");
    assert!(!given_up.metadata.annotations.contains_key(crate::UPGRADING_ANNOTATION), "given up");
    let said = given_up.status.message.unwrap_or_default();
    assert!(said.starts_with("the rollout paused at this machine: machine cp-1 did not finish"), "{said}");

    // The node is fixed, but the rollout stays paused: nothing is upgraded.
    *nodes.stuck.lock().unwrap() = None;
    for _ in 0..3 {
        reconcile("acme", &f.ctx).await.unwrap();
    }
    assert_eq!(nodes.upgrades.lock().unwrap().clone(), ["cp-1"], "nothing moves while paused");
    assert_eq!(condition(&tenant(store, "acme").status, crate::UPGRADING).reason, "Paused");

    // A new spec change (any, here the workers' parallelism), its
    // annotations kept: the rollout resumes and finishes.
    let mut spec = serde_json::to_value(tenant(store, "acme").spec).unwrap();
    spec["nodeGroups"][1]["maxParallelism"] = json!(3);
    super::hosts::respec(store, spec).await;
    assert_eq!(store.get(&Key::tenant("acme")).unwrap().generation, 3);
    for _ in 0..20 {
        reconcile("acme", &f.ctx).await.unwrap();
    }
    let resumed = tenant(store, "acme");
    assert!(resumed.status.ready, "{:?}", resumed.status);
    assert!(!resumed.metadata.annotations.contains_key(crate::PAUSED_ANNOTATION));
    let upgrades = nodes.upgrades.lock().unwrap().clone();
    assert_eq!(upgrades.iter().filter(|m| *m == "cp-1").count(), 2, "cp-1 started anew: {upgrades:?}");
    assert_eq!(upgrades.len(), 1 + 6, "{upgrades:?}");
    assert!(
        machines(store, "acme")
            .iter()
            .all(|m| m.status.talos_version.as_deref() == Some("1.14.1") && m.status.message.is_none())
    );
}

#[tokio::test]
async fn etcd_is_bootstrapped_once_on_the_recorded_control_plane() {
    let nodes = Arc::new(Upgradable::default());
    let f = fixture(nodes.clone()).await;
    upgradable_tenant(&f, "1.14.0").await;
    // A choice recorded before a crash: the call goes to that machine, not
    // to the first control plane.
    crate::rollout::set_annotation(&f.ctx, "acme", crate::BOOTSTRAP_NODE_ANNOTATION, Some("cp-1".into()))
        .await
        .unwrap();
    reconcile("acme", &f.ctx).await.unwrap();
    let status = tenant(f.store.as_ref(), "acme").status;
    assert!(status.ready, "{status:?}");
    assert_eq!(condition(&status, crate::BOOTSTRAPPED).message, "etcd bootstrapped on cp-1");
    for _ in 0..3 {
        reconcile("acme", &f.ctx).await.unwrap();
    }
    assert_eq!(*nodes.bootstraps.lock().unwrap(), ["cp-1"], "one Bootstrap call in all");

    // The outcome lost (a crash after the call): the same machine is asked
    // again, answers that etcd runs, and that counts as done.
    crate::rollout::set_annotation(&f.ctx, "acme", crate::BOOTSTRAPPED_ANNOTATION, None).await.unwrap();
    reconcile("acme", &f.ctx).await.unwrap();
    assert_eq!(*nodes.bootstraps.lock().unwrap(), ["cp-1", "cp-1"], "never another node");
    let annotations = tenant(f.store.as_ref(), "acme").metadata.annotations;
    assert!(annotations[crate::BOOTSTRAPPED_ANNOTATION].starts_with("cp-1 "), "{annotations:?}");
    assert!(tenant(f.store.as_ref(), "acme").status.ready);
}

//! A fake of a tenant's hosts behind the node API, for the rolling
//! procedures, liveness and replacements. Each host (by management
//! address) is in maintenance mode or runs a config of the tenant, and has
//! a boot time. A host in maintenance mode takes its first config only in
//! maintenance mode and answers every call with the tenant's credentials
//! as [`NodeError::Untrusted`] (nothing reaches it); a configured host
//! takes configs (refusing, while told to, a change that needs a reboot),
//! reboots for one, answers `Version` and resets into maintenance mode.
//! Every call that reached a host is in its log; once linked to the
//! fixture, a config a host takes sets the kubelet version of its machine's
//! Node (`kubelet: <version>` in the config).
//!
//! Also the helpers the tests of these files share: the tenant's spec and
//! its changes, and the machines as stored.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use cms_model::{Kind, Machine};
use cms_store::{Draft, Key, Store};
use cms_tenancy::{Bootstrapped, NodeClient, NodeError, NodeRef};
use serde_json::{Value, json};

use super::fakes::Kube;
use super::{Fixture, machines, refused};

/// The boot time every host starts with.
pub(super) const FIRST_BOOT: u64 = 1_000;

/// One host.
#[derive(Debug, Clone)]
struct Host {
    /// The config it runs; `None` in maintenance mode.
    config: Option<String>,
    /// When it last booted.
    booted: u64,
    /// After a reboot for a config: how many more `SystemStat` calls it
    /// answers with the boot time before it.
    reboot: Option<u32>,
}

impl Default for Host {
    fn default() -> Host {
        Host { config: None, booted: FIRST_BOOT, reboot: None }
    }
}

/// A config a host took, and the machine's annotations in the store when
/// it was sent.
#[derive(Debug, Clone)]
pub(super) struct Applied {
    pub(super) machine: String,
    pub(super) config: String,
    pub(super) annotations: BTreeMap<String, String>,
}

/// The tenant's hosts.
#[derive(Default)]
pub(super) struct Hosts {
    hosts: Mutex<BTreeMap<String, Host>>,
    /// A configured host refuses to take a different config without a reboot.
    pub(super) reboot_required: AtomicBool,
    /// Machines whose host never comes back from a reboot: its boot time
    /// does not move.
    pub(super) stuck: Mutex<BTreeSet<String>>,
    /// Machines whose host does not answer at all.
    pub(super) off: Mutex<BTreeSet<String>>,
    /// Every call that reached a host, in order: `maintenance <machine>` (a
    /// config taken in maintenance mode), `apply <machine>` (taken with the
    /// tenant's credentials), `reboot-required <machine>` (refused),
    /// `reboot <machine>`, `reset <machine>`.
    pub(super) log: Mutex<Vec<String>>,
    /// Every config a host took, in order.
    pub(super) applied: Mutex<Vec<Applied>>,
    bootstrapped: AtomicBool,
    linked: OnceLock<(Arc<dyn Store>, Arc<Kube>)>,
}

impl Hosts {
    /// Links the hosts to the fixture's store (to read machines' annotations)
    /// and Kubernetes API (to set kubelet versions).
    pub(super) fn link(&self, f: &Fixture) {
        assert!(self.linked.set((f.store.clone(), f.kube.clone())).is_ok(), "linked once");
    }

    /// The host at `address` is swapped for a blank one, in maintenance mode.
    pub(super) fn swap(&self, address: &str) {
        self.hosts.lock().unwrap().insert(address.to_string(), Host::default());
    }

    /// The config the host at `address` runs.
    /// An operator brings a stuck host back by hand: it boots again.
    pub(super) fn fix(&self, machine: &str, address: &str) {
        self.stuck.lock().unwrap().remove(machine);
        let mut hosts = self.hosts.lock().unwrap();
        let host = hosts.entry(address.to_string()).or_default();
        host.reboot = None;
        host.booted += 1;
    }

    pub(super) fn config(&self, address: &str) -> Option<String> {
        self.hosts.lock().unwrap().get(address).and_then(|host| host.config.clone())
    }

    /// The calls that reached the host of `machine`.
    pub(super) fn calls_to(&self, machine: &str) -> Vec<String> {
        let log = self.log.lock().unwrap();
        log.iter().filter(|call| call.rsplit_once(' ').is_some_and(|(_, m)| m == machine)).cloned().collect()
    }

    fn note(&self, call: &str, node: &NodeRef) {
        self.log.lock().unwrap().push(format!("{call} {}", node.machine));
    }

    fn answers(&self, node: &NodeRef) -> Result<(), NodeError> {
        match self.off.lock().unwrap().contains(&node.machine) {
            true => Err(refused("connection refused")),
            false => Ok(()),
        }
    }

    /// The stored machines of the linked fixture's tenant.
    fn stored(&self, node: &NodeRef) -> Vec<Machine> {
        let Some((store, _)) = self.linked.get() else { return Vec::new() };
        machines(store.as_ref(), &node.tenant)
    }

    /// The host took `config`: its Node's kubelet follows it.
    fn took(&self, node: &NodeRef, config: &str) {
        let annotations = self
            .stored(node)
            .into_iter()
            .find(|machine| machine.metadata.name == node.machine)
            .map(|machine| machine.metadata.annotations)
            .unwrap_or_default();
        let applied = Applied { machine: node.machine.clone(), config: config.to_string(), annotations };
        self.applied.lock().unwrap().push(applied);
        let kubelet = config.lines().find_map(|line| line.trim().strip_prefix("kubelet: "));
        if let (Some((_, kube)), Some(kubelet)) = (self.linked.get(), kubelet) {
            kube.kubelets.lock().unwrap().insert(node.machine.clone(), kubelet.to_string());
        }
    }
}

fn untrusted(node: &NodeRef) -> NodeError {
    NodeError::Untrusted { endpoint: node.management_address.clone() }
}

#[async_trait]
impl NodeClient for Hosts {
    async fn apply_config(&self, node: &NodeRef, config: &str, configured: bool) -> Result<(), NodeError> {
        self.answers(node)?;
        let mut hosts = self.hosts.lock().unwrap();
        let host = hosts.entry(node.management_address.clone()).or_default();
        match &host.config {
            // A host in maintenance mode fails the tenant's CA.
            None if configured => return Err(untrusted(node)),
            None => self.note("maintenance", node),
            Some(running) if running != config && self.reboot_required.load(Ordering::SeqCst) => {
                self.note("reboot-required", node);
                return Err(NodeError::RebootRequired("the install disk changed".into()));
            }
            Some(_) => self.note("apply", node),
        }
        host.config = Some(config.to_string());
        drop(hosts);
        self.took(node, config);
        Ok(())
    }

    async fn apply_config_reboot(&self, node: &NodeRef, config: &str) -> Result<(), NodeError> {
        self.answers(node)?;
        // One machine at a time: no other is marked rebooting, nor is one
        // on its way back.
        let rebooting: Vec<String> = self
            .stored(node)
            .into_iter()
            .filter(|machine| machine.metadata.annotations.contains_key(crate::REBOOTING_ANNOTATION))
            .map(|machine| machine.metadata.name)
            .collect();
        assert_eq!(rebooting, [node.machine.as_str()], "the machines marked rebooting");
        let mut hosts = self.hosts.lock().unwrap();
        let back: Vec<&String> =
            hosts.iter().filter(|(_, host)| host.reboot.is_some()).map(|(at, _)| at).collect();
        assert!(back.is_empty(), "{} reboots while {back:?} have not come back", node.machine);
        let host = hosts.entry(node.management_address.clone()).or_default();
        if host.config.is_none() {
            return Err(untrusted(node));
        }
        self.note("reboot", node);
        host.config = Some(config.to_string());
        host.reboot = Some(1);
        drop(hosts);
        self.took(node, config);
        Ok(())
    }

    async fn boot_time(&self, node: &NodeRef) -> Result<u64, NodeError> {
        self.answers(node)?;
        let stuck = self.stuck.lock().unwrap().contains(&node.machine);
        let mut hosts = self.hosts.lock().unwrap();
        let host = hosts.entry(node.management_address.clone()).or_default();
        if host.config.is_none() {
            return Err(untrusted(node));
        }
        match host.reboot {
            _ if stuck => {}
            Some(0) => {
                host.booted += 1;
                host.reboot = None;
            }
            Some(left) => host.reboot = Some(left - 1),
            None => {}
        }
        Ok(host.booted)
    }

    async fn version(&self, node: &NodeRef) -> Result<String, NodeError> {
        self.answers(node)?;
        let hosts = self.hosts.lock().unwrap();
        match hosts.get(&node.management_address).and_then(|host| host.config.as_ref()) {
            Some(_) => Ok("1.14.0".into()),
            None => Err(untrusted(node)),
        }
    }

    async fn upgrade(&self, _: &NodeRef, _: &str) -> Result<(), NodeError> {
        Err(refused("not asked here"))
    }

    async fn bootstrap(&self, _: &NodeRef) -> Result<Bootstrapped, NodeError> {
        match self.bootstrapped.swap(true, Ordering::SeqCst) {
            false => Ok(Bootstrapped::Now),
            true => Ok(Bootstrapped::Already),
        }
    }

    async fn reset(&self, node: &NodeRef, _graceful: bool) -> Result<(), NodeError> {
        self.answers(node)?;
        let mut hosts = self.hosts.lock().unwrap();
        let host = hosts.entry(node.management_address.clone()).or_default();
        if host.config.is_none() {
            return Err(untrusted(node));
        }
        self.note("reset", node);
        *host = Host { booted: host.booted + 1, ..Host::default() };
        Ok(())
    }

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
}

/// A tenant of `control_planes` control planes (hosts `10.0.0.x`) and
/// `workers` workers (hosts `10.0.1.x`, `parallelism` at a time) on
/// Kubernetes `version`.
pub(super) fn spec(control_planes: u32, workers: u32, parallelism: u32, version: &str) -> Value {
    let hosts = |count: usize, base: u8| -> Vec<Value> {
        (0..count).map(|i| json!({"address": format!("10.0.{base}.{}", i + 1)})).collect()
    };
    json!({"kubernetesVersion": version, "nodeGroups": [
        {"name": "cp", "role": "controlplane", "count": control_planes, "providerClass": "metal:bare",
         "providerConfig": {"hosts": hosts(3, 0)}, "configPatches": []},
        {"name": "workers", "role": "worker", "count": workers, "providerClass": "metal:bare",
         "providerConfig": {"hosts": hosts(3, 1)}, "configPatches": [], "maxParallelism": parallelism},
    ]})
}

/// Creates the tenant `acme` with `spec` and reconciles it once: it is ready.
pub(super) async fn converged(f: &Fixture, spec: Value) {
    f.store.create(Key::tenant("acme"), Draft { spec, ..Draft::default() }).await.unwrap();
    crate::reconcile("acme", &f.ctx).await.unwrap();
    let status = super::tenant(f.store.as_ref(), "acme").status;
    assert!(status.ready, "{status:?}");
}

/// Changes the tenant's spec, keeping the service's annotations.
pub(super) async fn respec(store: &dyn Store, spec: Value) {
    let current = store.get(&Key::tenant("acme")).unwrap();
    let annotations = current.parse::<cms_model::Tenant>().unwrap().metadata.annotations;
    let draft = Draft { spec, annotations, ..Draft::default() };
    store.update(Key::tenant("acme"), draft, current.resource_version).await.unwrap();
}

/// The stored machine `id` of `acme`.
pub(super) fn machine(store: &dyn Store, id: &str) -> Machine {
    let key = Key::child(Kind::Machine, "acme", id);
    store.get(&key).unwrap_or_else(|| panic!("no machine {id}")).parse().unwrap()
}

/// Sets back when the step in the machine's `annotation` (`<intent>
/// <since>`) began by `by`.
pub(super) async fn backdate(store: &dyn Store, id: &str, annotation: &str, by: chrono::Duration) {
    let key = Key::child(Kind::Machine, "acme", id);
    let object = store.get(&key).unwrap();
    let machine: Machine = object.parse().unwrap();
    let mut annotations = machine.metadata.annotations.clone();
    let value = annotations.get_mut(annotation).unwrap();
    let (intent, since) = value.rsplit_once(' ').unwrap();
    let since = chrono::DateTime::parse_from_rfc3339(since).unwrap() - by;
    *value = format!("{intent} {}", since.to_rfc3339());
    let spec = serde_json::to_value(&machine.spec).unwrap();
    let draft = Draft { labels: machine.metadata.labels, annotations, spec, ..Draft::default() };
    store.update(key, draft, object.resource_version).await.unwrap();
}

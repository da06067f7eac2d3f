//! A fake datacenter for tests of the real server on `oci` and `openstack`:
//! the fake providers (`tests/providers/`, Python, installed by
//! `.ci/fake-providers`) that the engine runs build "instances" by writing
//! a cloud record; [`FakeCloud`] reads it and makes them real enough to
//! talk to. Each instance of a tenant registered with [`FakeCloud::tenant`]
//! becomes a fake node (in this process) on its address, port 50000, booted
//! with its user data as its machine config, with the tenant's OS CA; its
//! record gone, the node stops. The tenant's nodes share one etcd, and its
//! Kubernetes API listens on its load balancer's address, port 6443, once
//! that exists, standing in for the control planes behind it.
//!
//! Addresses come from a loopback /24 of its own, `127.<100..=250>.<16..=255>.0/24`:
//! above the third octets of the metal hosts' addresses
//! (`127.<lab>.<net>.<host>`, `net` below 16), and away from `127.0.0.1`,
//! where the other test servers listen.

mod datacenter;
mod record;

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{BuildHasher, Hasher};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use cms_fake_node::{FakeEtcd, FakeKube, FakeNode};
use cms_talos::SecretsBundle;
use serde_json::Value;
use tempfile::TempDir;
use tokio::task::JoinHandle;

pub use record::{CloudEvent, Resource, write as write_record};

use crate::ServerOptions;
use datacenter::{Datacenter, Seen, Site};

/// The environment variable naming the python that runs the fake providers.
const PYTHON_VARIABLE: &str = "CMS_TEST_FAKE_CLOUD_PYTHON";

/// One instance of a tenant as the datacenter saw it, with its node's
/// calls at the time of asking.
#[derive(Debug, Clone)]
pub struct CloudNode {
    pub tenant: String,
    pub machine: String,
    /// The instance id.
    pub instance: String,
    pub ip: IpAddr,
    /// Whether its fake node serves now (its record is there and its
    /// tenant registered).
    pub running: bool,
    calls: Vec<Value>,
}

impl CloudNode {
    fn of(seen: &Seen) -> CloudNode {
        CloudNode {
            tenant: seen.tenant.clone(),
            machine: seen.machine.clone(),
            instance: seen.id.clone(),
            ip: seen.ip,
            running: seen.node.is_some(),
            calls: seen.calls(),
        }
    }

    /// The calls its node got, as JSON (`{seq, atMillis, method, node,
    /// clientCertificate, payload}`).
    pub fn calls(&self) -> Vec<Value> {
        self.calls.clone()
    }

    /// The calls of one method.
    pub fn calls_of(&self, method: &str) -> Vec<Value> {
        self.calls.iter().filter(|call| call["method"] == method).cloned().collect()
    }
}

/// The fake datacenter; everything stops when it is dropped.
#[derive(Debug)]
pub struct FakeCloud {
    dir: TempDir,
    network: String,
    datacenter: Datacenter,
    poller: JoinHandle<()>,
}

impl FakeCloud {
    /// A datacenter with the fake providers' plugin directory (built by
    /// `tests/providers/plugin_dir.py` with `$CMS_TEST_FAKE_CLOUD_PYTHON`,
    /// which must be set), polling its record every 100 ms.
    pub async fn start() -> FakeCloud {
        let python = std::env::var_os(PYTHON_VARIABLE).unwrap_or_else(|| {
            panic!(
                "the fake cloud needs the fake providers: run `bash .ci/fake-providers` and set \
                 {PYTHON_VARIABLE} to the python it prints (`.ci/run` does both)"
            )
        });
        let cloud = FakeCloud::without_providers().await;
        build_plugins(&python, &cloud.plugin_dir(), &cloud.record_dir(), &cloud.network);
        cloud
    }

    /// A datacenter whose record the test writes itself: the plugin
    /// directory stays empty.
    pub async fn without_providers() -> FakeCloud {
        let dir = tempfile::Builder::new().prefix("cms-cloud-").tempdir().expect("a temporary directory");
        for sub in ["record", "plugins"] {
            std::fs::create_dir(dir.path().join(sub)).expect("a directory of the cloud");
        }
        let [second, third] = network();
        let network = format!("127.{second}.{third}.0/24");
        let datacenter = Datacenter::default();
        let poller = tokio::spawn(datacenter.clone().run(dir.path().join("record")));
        FakeCloud { dir, network, datacenter, poller }
    }

    /// The plugin directory, for `CMS_TOFU_PLUGIN_DIR`.
    pub fn plugin_dir(&self) -> PathBuf {
        self.dir.path().join("plugins")
    }

    /// The record the providers keep.
    pub fn record_dir(&self) -> PathBuf {
        self.dir.path().join("record")
    }

    /// The /24 the providers take addresses from, such as `127.120.40.0/24`.
    pub fn network(&self) -> &str {
        &self.network
    }

    /// Server options that provision with this datacenter's providers.
    pub fn options(&self, options: ServerOptions) -> ServerOptions {
        options.env("CMS_TOFU_PLUGIN_DIR", self.plugin_dir().display().to_string())
    }

    /// Makes the instances of tenant `name` boot, with the CAs of its
    /// secrets (as `StoreWriter::bundle` reads them); a tenant registered
    /// already keeps its first bundle.
    pub fn tenant(&self, name: &str, bundle: SecretsBundle) {
        let site = Site { bundle, etcd: FakeEtcd::default(), kube: None };
        self.datacenter.state().sites.entry(name.to_string()).or_insert(site);
    }

    /// Every change of the record so far, in order.
    pub fn events(&self) -> Vec<CloudEvent> {
        record::events(&self.record_dir())
    }

    /// The resources of type `kind` (such as `oci_core_instance`) now, by id.
    pub fn resources(&self, kind: &str) -> Vec<Resource> {
        record::resources(&self.record_dir(), kind)
    }

    /// Every instance of `tenant` seen so far, running or gone, in the
    /// order they appeared.
    pub fn instances(&self, tenant: &str) -> Vec<CloudNode> {
        let state = self.datacenter.state();
        state.seen.iter().filter(|seen| seen.tenant == tenant).map(CloudNode::of).collect()
    }

    /// The running node of `machine` of `tenant`, if there is one (the
    /// newest, while a replacement and its predecessor both run).
    pub fn running(&self, tenant: &str, machine: &str) -> Option<CloudNode> {
        let state = self.datacenter.state();
        let running = state.seen.iter().rev().filter(|seen| seen.node.is_some());
        running.filter(|seen| seen.tenant == tenant && seen.machine == machine).map(CloudNode::of).next()
    }

    /// The running node of `machine` of `tenant`; fails the test if none runs.
    pub fn node(&self, tenant: &str, machine: &str) -> CloudNode {
        self.running(tenant, machine).unwrap_or_else(|| {
            let known: Vec<_> =
                self.instances(tenant).into_iter().map(|node| (node.machine, node.running)).collect();
            panic!(
                "no node of {tenant}'s machine {machine} runs; its instances (machine, running): {known:?}"
            )
        })
    }

    /// Calls `steer` with the running fake node of `machine` of `tenant`,
    /// to change its answers (`set_version`, `set_failure`, ...); fails the
    /// test if none runs. The datacenter waits meanwhile: `steer` must not
    /// ask it anything.
    pub fn with_node<T>(&self, tenant: &str, machine: &str, steer: impl FnOnce(&FakeNode) -> T) -> T {
        let state = self.datacenter.state();
        let mut running =
            state.seen.iter().rev().filter(|seen| seen.tenant == tenant && seen.machine == machine);
        let node = running.find_map(|seen| seen.node.as_ref());
        steer(node.unwrap_or_else(|| panic!("no node of {tenant}'s machine {machine} runs")))
    }

    /// The creates and deletes of `tenant`'s instances, in order, each with
    /// its machine: known by the instance's tags once seen, else (for one
    /// that came and went between two polls) by its name,
    /// `<tenant>-<machine>`.
    pub fn instance_events(&self, tenant: &str) -> Vec<(String, CloudEvent)> {
        let owners: BTreeMap<String, (String, String)> = {
            let state = self.datacenter.state();
            let owner = |seen: &Seen| (seen.id.clone(), (seen.tenant.clone(), seen.machine.clone()));
            state.seen.iter().map(owner).collect()
        };
        let prefix = format!("{tenant}-");
        let machine = |event: &CloudEvent| match owners.get(&event.id) {
            Some((owner, machine)) => (owner == tenant).then(|| machine.clone()),
            None => event.name.as_deref()?.strip_prefix(&prefix).map(str::to_string),
        };
        let events = self
            .events()
            .into_iter()
            .filter(|event| record::is_instance(&event.kind) && event.op != "update");
        events.filter_map(|event| Some((machine(&event)?, event))).collect()
    }

    /// How many times each machine of `tenant` got a new instance after
    /// its first (machines never replaced are absent).
    pub fn instances_replaced(&self, tenant: &str) -> BTreeMap<String, usize> {
        let mut creates: BTreeMap<String, usize> = BTreeMap::new();
        for (machine, event) in self.instance_events(tenant) {
            if event.op == "create" {
                *creates.entry(machine).or_default() += 1;
            }
        }
        creates
            .into_iter()
            .filter(|(_, count)| *count > 1)
            .map(|(machine, count)| (machine, count - 1))
            .collect()
    }

    /// The etcd `tenant`'s nodes share; fails the test if the tenant is not registered.
    pub fn etcd(&self, tenant: &str) -> FakeEtcd {
        let state = self.datacenter.state();
        state
            .sites
            .get(tenant)
            .map(|site| site.etcd.clone())
            .expect("a tenant registered with FakeCloud::tenant")
    }

    /// `tenant`'s Kubernetes API, once its load balancer exists. When the
    /// balancer's address changes (a floating IP associated after the
    /// balancer was seen), a fresh API starts there and the nodes register
    /// again: ask again rather than keep an old one.
    pub fn kube(&self, tenant: &str) -> Option<FakeKube> {
        let state = self.datacenter.state();
        state.sites.get(tenant).and_then(|site| site.kube.as_ref()).map(|(_, kube)| kube.clone())
    }

    /// What keeps an instance from booting or a Kubernetes API from
    /// starting, by instance id or tenant.
    pub fn problems(&self) -> BTreeMap<String, String> {
        self.datacenter.state().problems.clone()
    }
}

impl Drop for FakeCloud {
    fn drop(&mut self) {
        self.poller.abort();
        self.datacenter.state().shut_down();
    }
}

/// The second and third octets of a /24 that no other datacenter of this
/// process has, picked at random so that test processes side by side
/// seldom share one.
fn network() -> [u8; 2] {
    static TAKEN: Mutex<BTreeSet<[u8; 2]>> = Mutex::new(BTreeSet::new());
    loop {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        let random = hasher.finish();
        let picked = [100 + (random % 151) as u8, 16 + ((random >> 16) % 240) as u8];
        if TAKEN.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(picked) {
            return picked;
        }
    }
}

/// Writes the plugin directory with `tests/providers/plugin_dir.py`.
#[allow(clippy::disallowed_methods)] // The providers' installer is a script.
fn build_plugins(python: &std::ffi::OsStr, plugins: &Path, record: &Path, network: &str) {
    let script = crate::repository().join("tests/providers/plugin_dir.py");
    let output = std::process::Command::new(python)
        .arg(&script)
        .arg(plugins)
        .arg("--record")
        .arg(record)
        .args(["--network", network])
        .output()
        .unwrap_or_else(|err| panic!("cannot run {}: {err}", script.display()));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{} failed ({}): {stderr}", script.display(), output.status);
}

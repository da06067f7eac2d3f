//! What the datacenter runs, kept in step with the cloud record: a fake
//! node per instance of a registered tenant, booted with its user data and
//! stopped when its record goes, and each tenant's Kubernetes API on its
//! load balancer's address, moved when that address changes.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use cms_fake_node::{FakeEtcd, FakeKube, FakeKubeOptions, FakeNode, FakeNodeOptions};
use cms_talos::SecretsBundle;
use serde_json::Value;

use crate::cloud::record::{self, Instance, Unbootable};
use crate::cluster::{KUBERNETES_API_PORT, hostname};

/// The node API port of every instance.
const NODE_API_PORT: u16 = 50000;

/// One tenant's part of the datacenter.
pub(crate) struct Site {
    pub(crate) bundle: SecretsBundle,
    pub(crate) etcd: FakeEtcd,
    /// The Kubernetes API and the load balancer address it listens on.
    pub(crate) kube: Option<(IpAddr, FakeKube)>,
}

/// An instance of any tenant, from the poll that first saw it on.
pub(crate) struct Seen {
    pub(crate) tenant: String,
    pub(crate) machine: String,
    pub(crate) id: String,
    pub(crate) ip: IpAddr,
    /// Its fake node while it runs.
    pub(crate) node: Option<FakeNode>,
    /// The calls of a node that stopped, as JSON.
    pub(crate) calls: Vec<Value>,
    /// Whether its record went.
    pub(crate) gone: bool,
}

impl Seen {
    /// Its node's calls as JSON, running or stopped.
    pub(crate) fn calls(&self) -> Vec<Value> {
        match &self.node {
            Some(node) => node.calls().iter().map(|call| call.to_json()).collect(),
            None => self.calls.clone(),
        }
    }
}

/// Everything the datacenter runs.
#[derive(Default)]
pub(crate) struct State {
    pub(crate) sites: BTreeMap<String, Site>,
    pub(crate) seen: Vec<Seen>,
    /// Why an instance could not boot, or a tenant's Kubernetes API could
    /// not start, by instance id or tenant, as last said.
    pub(crate) problems: BTreeMap<String, String>,
}

impl State {
    /// Stops every node and Kubernetes API.
    pub(crate) fn shut_down(&mut self) {
        for seen in &mut self.seen {
            seen.node = None;
        }
        for site in self.sites.values_mut() {
            if let Some((_, kube)) = site.kube.take() {
                kube.stop();
            }
        }
    }

    /// Notes a problem of `what` (an instance id or a tenant), printed
    /// once per change.
    fn problem(&mut self, what: &str, problem: String) {
        if self.problems.get(what) != Some(&problem) {
            eprintln!("fake cloud: {what}: {problem}");
            self.problems.insert(what.to_string(), problem);
        }
    }
}

/// The state, shared by the poller and the test's handle.
#[derive(Clone, Default)]
pub(crate) struct Datacenter(Arc<Mutex<State>>);

impl std::fmt::Debug for Datacenter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state();
        f.debug_struct("Datacenter")
            .field("tenants", &state.sites.keys().collect::<Vec<_>>())
            .field("instances", &state.seen.len())
            .finish_non_exhaustive()
    }
}

/// A node to start: the instance and what it joins.
struct Boot {
    instance: Instance,
    options: FakeNodeOptions,
}

impl Datacenter {
    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Polls the record at `record` until the task is aborted.
    pub(crate) async fn run(self, record: PathBuf) {
        loop {
            self.poll(&record).await;
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }

    /// One step: brings the nodes and the Kubernetes APIs in line with the record.
    pub(crate) async fn poll(&self, record: &std::path::Path) {
        let instances = record::instances(record);
        let balancers = record::balancers(record);
        self.move_kubes(&balancers).await;
        for boot in self.observe(instances) {
            let Boot { instance, options } = boot;
            let started = FakeNode::start(options).await;
            let mut state = self.state();
            let Some(seen) = state.seen.iter_mut().find(|seen| seen.id == instance.id) else { continue };
            match started {
                Ok(node) if !seen.gone => {
                    seen.node = Some(node);
                    state.problems.remove(&instance.id);
                }
                Ok(_) => {}
                Err(err) => state.problem(&instance.id, format!("its node does not start: {err}")),
            }
        }
    }

    /// Notes instances that came and went, stops the nodes of those that
    /// went, and gives the nodes to start.
    fn observe(&self, instances: Vec<Result<Instance, Unbootable>>) -> Vec<Boot> {
        let mut state = self.state();
        let mut present = Vec::new();
        let mut ready = Vec::new();
        for instance in instances {
            match instance {
                Ok(instance) => {
                    present.push(instance.id.clone());
                    ready.push(instance);
                }
                Err((id, why)) => {
                    state.problem(&id, why);
                    present.push(id);
                }
            }
        }
        for seen in state.seen.iter_mut().filter(|seen| !seen.gone && !present.contains(&seen.id)) {
            seen.gone = true;
            if let Some(node) = seen.node.take() {
                seen.calls = node.calls().iter().map(|call| call.to_json()).collect();
            }
        }
        let mut boots = Vec::new();
        for instance in ready {
            if !state.seen.iter().any(|seen| seen.id == instance.id) {
                state.seen.push(Seen {
                    tenant: instance.tenant.clone(),
                    machine: instance.machine.clone(),
                    id: instance.id.clone(),
                    ip: instance.ip,
                    node: None,
                    calls: Vec::new(),
                    gone: false,
                });
            }
            let running = state.seen.iter().any(|seen| seen.id == instance.id && seen.node.is_some());
            let Some(site) = state.sites.get(&instance.tenant) else { continue };
            if running {
                continue;
            }
            let mut options = FakeNodeOptions::new(site.bundle.os_ca().clone())
                .listen(SocketAddr::new(instance.ip, NODE_API_PORT))
                .booted(instance.config.clone())
                .hostname(hostname(&instance.machine))
                .etcd(site.etcd.clone());
            if let Some((_, kube)) = &site.kube {
                options = options.kube(kube.clone());
            }
            boots.push(Boot { instance, options });
        }
        boots
    }

    /// Starts each tenant's Kubernetes API on its load balancer's address
    /// (stopping one on an address that is no longer it), and hands it to
    /// the tenant's running nodes.
    async fn move_kubes(&self, balancers: &BTreeMap<String, IpAddr>) {
        let mut starts = Vec::new();
        {
            let mut state = self.state();
            for (tenant, site) in &mut state.sites {
                let wanted = balancers.get(tenant).copied();
                if site.kube.as_ref().map(|(ip, _)| *ip) == wanted {
                    continue;
                }
                if let Some((_, kube)) = site.kube.take() {
                    kube.stop();
                }
                if let Some(ip) = wanted {
                    let options = FakeKubeOptions::new(site.bundle.kubernetes_ca().clone())
                        .listen(SocketAddr::new(ip, KUBERNETES_API_PORT))
                        .etcd(site.etcd.clone());
                    starts.push((tenant.clone(), ip, options));
                }
            }
        }
        for (tenant, ip, options) in starts {
            let started = FakeKube::start(options).await;
            let mut state = self.state();
            let kube = match started {
                Ok(kube) => kube,
                Err(err) => {
                    state.problem(&tenant, format!("the Kubernetes API on {ip} does not start: {err}"));
                    continue;
                }
            };
            for seen in state.seen.iter().filter(|seen| seen.tenant == tenant) {
                if let Some(node) = &seen.node {
                    node.set_kube(kube.clone());
                }
            }
            if let Some(site) = state.sites.get_mut(&tenant) {
                site.kube = Some((ip, kube));
            }
        }
    }
}

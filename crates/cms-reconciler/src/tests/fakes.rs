//! Fakes of the cluster for unit tests: an etcd over any `NodeClient` mock
//! (its members are the tenant's connected control planes, less those that
//! left), and a Kubernetes API whose Nodes are the tenant's connected
//! machines, each Ready unless a test says otherwise, reporting the kubelet
//! version a test (or a fake node) sets.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use cms_model::{Kind, Machine, Role};
use cms_store::Store;
use cms_tenancy::{
    Bootstrapped, Drain, EtcdMember, EtcdMemberStatus, KubeClient, KubeError, KubeNode, NodeClient,
    NodeError, NodeRef,
};

fn connected(store: &dyn Store, tenant: &str) -> Vec<Machine> {
    store
        .all(Kind::Machine, Some(tenant.to_string()))
        .iter()
        .filter_map(|object| object.parse::<Machine>().ok())
        .filter(|machine| machine.spec.connected)
        .collect()
}

fn ip(machine: &Machine) -> String {
    let address = machine.spec.management_address.clone().unwrap_or_default();
    address.rsplit_once(':').map(|(ip, _)| ip.to_string()).unwrap_or(address)
}

fn member_id(machine: &str) -> u64 {
    machine.bytes().fold(7u64, |id, byte| id.wrapping_mul(31).wrapping_add(byte as u64))
}

/// An etcd in front of `inner`: the other calls go to `inner`.
pub(super) struct Etcd {
    pub(super) inner: Arc<dyn NodeClient>,
    pub(super) store: Arc<dyn Store>,
    /// Machines that left etcd.
    pub(super) left: Mutex<BTreeSet<String>>,
    /// Machines whose member does not answer.
    pub(super) silent: Mutex<BTreeSet<String>>,
    /// Every membership or leadership call, every upgrade and every reboot
    /// for a config, in order: `leave <machine>`, `remove <machine> by
    /// <machine>`, `forfeit <machine>`, `upgrade <machine>`, `reboot
    /// <machine>`.
    pub(super) changes: Mutex<Vec<String>>,
    /// The machine whose member leads; the first member when unset.
    pub(super) leader: Mutex<Option<String>>,
    /// Members name no leader (as during an election).
    pub(super) no_leader: AtomicBool,
    /// The `changes` and every `Reset` a node acknowledged (`reset
    /// <machine>`), in one order.
    pub(super) journal: Mutex<Vec<String>>,
}

impl Etcd {
    pub(super) fn new(inner: Arc<dyn NodeClient>, store: Arc<dyn Store>) -> Etcd {
        Etcd {
            inner,
            store,
            left: Mutex::default(),
            silent: Mutex::default(),
            changes: Mutex::default(),
            leader: Mutex::default(),
            no_leader: AtomicBool::new(false),
            journal: Mutex::default(),
        }
    }

    /// Records a membership or leadership change, an upgrade or a reboot.
    fn change(&self, change: String) {
        self.journal.lock().unwrap().push(change.clone());
        self.changes.lock().unwrap().push(change);
    }

    /// The machine whose member leads.
    fn leading(&self, tenant: &str) -> Option<String> {
        let members = self.members(tenant);
        let chosen = self.leader.lock().unwrap().clone();
        let chosen = chosen.filter(|leader| members.iter().any(|(id, _)| id == leader));
        chosen.or_else(|| members.first().map(|(id, _)| id.clone()))
    }

    fn members(&self, tenant: &str) -> Vec<(String, EtcdMember)> {
        let left = self.left.lock().unwrap();
        connected(self.store.as_ref(), tenant)
            .into_iter()
            .filter(|machine| machine.status.role == Some(Role::ControlPlane))
            .filter(|machine| !left.contains(&machine.metadata.name))
            .map(|machine| {
                let id = machine.metadata.name.clone();
                let member = EtcdMember {
                    id: member_id(&id),
                    hostname: format!("talos-{id}"),
                    peer_urls: vec![format!("https://{}:2380", ip(&machine))],
                    client_urls: vec![format!("https://{}:2379", ip(&machine))],
                    is_learner: false,
                };
                (id, member)
            })
            .collect()
    }

    fn check(&self, node: &NodeRef) -> Result<(), NodeError> {
        if self.silent.lock().unwrap().contains(&node.machine) {
            return Err(super::refused("connection refused"));
        }
        if !self.members(&node.tenant).iter().any(|(id, _)| *id == node.machine) {
            return Err(super::refused("etcd is not running on this node"));
        }
        Ok(())
    }
}

#[async_trait]
impl NodeClient for Etcd {
    async fn apply_config(&self, node: &NodeRef, config: &str, configured: bool) -> Result<(), NodeError> {
        self.inner.apply_config(node, config, configured).await
    }

    async fn version(&self, node: &NodeRef) -> Result<String, NodeError> {
        self.inner.version(node).await
    }

    async fn apply_config_reboot(&self, node: &NodeRef, config: &str) -> Result<(), NodeError> {
        self.change(format!("reboot {}", node.machine));
        self.inner.apply_config_reboot(node, config).await
    }

    async fn boot_time(&self, node: &NodeRef) -> Result<u64, NodeError> {
        self.inner.boot_time(node).await
    }

    async fn upgrade(&self, node: &NodeRef, image: &str) -> Result<(), NodeError> {
        self.change(format!("upgrade {}", node.machine));
        self.inner.upgrade(node, image).await
    }

    async fn bootstrap(&self, node: &NodeRef) -> Result<Bootstrapped, NodeError> {
        self.inner.bootstrap(node).await
    }

    async fn etcd_members(&self, node: &NodeRef) -> Result<Vec<EtcdMember>, NodeError> {
        self.check(node)?;
        Ok(self.members(&node.tenant).into_iter().map(|(_, member)| member).collect())
    }

    async fn etcd_status(&self, node: &NodeRef) -> Result<EtcdMemberStatus, NodeError> {
        self.check(node)?;
        let leader = match self.no_leader.load(Ordering::SeqCst) {
            true => None,
            false => self.leading(&node.tenant),
        };
        Ok(EtcdMemberStatus {
            member_id: member_id(&node.machine),
            leader: leader.map(|machine| member_id(&machine)).unwrap_or_default(),
            protocol_version: "3.5.0".into(),
            db_size: 0,
            raft_index: 0,
            raft_term: 0,
            errors: Vec::new(),
            is_learner: false,
        })
    }

    async fn etcd_snapshot(&self, _: &NodeRef) -> Result<cms_tenancy::SnapshotChunks, NodeError> {
        Err(super::refused("no snapshots from this fake"))
    }

    async fn etcd_recover(&self, _: &NodeRef, _: cms_tenancy::UploadStream) -> Result<(), NodeError> {
        Err(super::refused("no recovery on this fake"))
    }

    async fn bootstrap_recover(&self, _: &NodeRef, _: bool) -> Result<(), NodeError> {
        Err(super::refused("no recovery on this fake"))
    }

    async fn etcd_forfeit_leadership(&self, node: &NodeRef) -> Result<Option<String>, NodeError> {
        self.check(node)?;
        self.change(format!("forfeit {}", node.machine));
        if self.leading(&node.tenant).as_deref() != Some(node.machine.as_str()) {
            return Ok(None);
        }
        let members = self.members(&node.tenant);
        let next =
            members.iter().find(|(id, _)| *id != node.machine).ok_or_else(|| super::refused("one member"))?;
        *self.leader.lock().unwrap() = Some(next.0.clone());
        Ok(Some(next.1.hostname.clone()))
    }

    async fn etcd_leave(&self, node: &NodeRef) -> Result<(), NodeError> {
        self.check(node)?;
        self.change(format!("leave {}", node.machine));
        self.left.lock().unwrap().insert(node.machine.clone());
        Ok(())
    }

    async fn etcd_remove_member(&self, node: &NodeRef, id: u64) -> Result<(), NodeError> {
        self.check(node)?;
        let members = self.members(&node.tenant);
        let (gone, _) = members
            .iter()
            .find(|(_, member)| member.id == id)
            .ok_or_else(|| super::refused("no such member"))?;
        self.change(format!("remove {gone} by {}", node.machine));
        self.left.lock().unwrap().insert(gone.clone());
        Ok(())
    }

    async fn reset(&self, node: &NodeRef, graceful: bool) -> Result<(), NodeError> {
        self.inner.reset(node, graceful).await?;
        self.journal.lock().unwrap().push(format!("reset {}", node.machine));
        Ok(())
    }
}

/// A Kubernetes API over the store: one Node per connected machine.
#[derive(Default)]
pub(super) struct Kube {
    pub(super) store: Option<Arc<dyn Store>>,
    pub(super) down: AtomicBool,
    pub(super) not_ready: Mutex<BTreeSet<String>>,
    /// Pods per Node name, drained one eviction round at a time.
    pub(super) pods: Mutex<BTreeMap<String, Vec<String>>>,
    /// Evictions a PodDisruptionBudget refuses before it allows them.
    pub(super) refusals: Mutex<u32>,
    /// Every change: `cordon <node>`, `evict <pod>`, `delete <node>`.
    pub(super) calls: Mutex<Vec<String>>,
    pub(super) deleted: Mutex<BTreeSet<String>>,
    /// The kubelet version each machine's Node reports, by machine; none
    /// when unset.
    pub(super) kubelets: Mutex<BTreeMap<String, String>>,
}

impl Kube {
    pub(super) fn over(store: Arc<dyn Store>) -> Kube {
        Kube { store: Some(store), ..Kube::default() }
    }

    fn up(&self) -> Result<(), KubeError> {
        match self.down.load(Ordering::SeqCst) {
            true => Err(KubeError::Api("connection refused".into())),
            false => Ok(()),
        }
    }
}

#[async_trait]
impl KubeClient for Kube {
    async fn readyz(&self, _tenant: &str) -> Result<(), KubeError> {
        self.up()
    }

    async fn nodes(&self, tenant: &str) -> Result<Vec<KubeNode>, KubeError> {
        self.up()?;
        let Some(store) = &self.store else { return Ok(Vec::new()) };
        let not_ready = self.not_ready.lock().unwrap();
        let deleted = self.deleted.lock().unwrap();
        let calls = self.calls.lock().unwrap();
        let kubelets = self.kubelets.lock().unwrap();
        Ok(connected(store.as_ref(), tenant)
            .into_iter()
            .map(|machine| (format!("node-{}", machine.metadata.name), machine))
            .filter(|(name, _)| !deleted.contains(name))
            .map(|(name, machine)| KubeNode {
                kubelet_version: kubelets.get(&machine.metadata.name).cloned(),
                ready: !not_ready.contains(&name),
                reason: match not_ready.contains(&name) {
                    true => "KubeletNotReady: container runtime is down".into(),
                    false => String::new(),
                },
                unschedulable: calls.contains(&format!("cordon {name}")),
                addresses: vec![ip(&machine)],
                name,
                ..KubeNode::default()
            })
            .collect())
    }

    async fn cordon(&self, _tenant: &str, node: &str) -> Result<(), KubeError> {
        self.up()?;
        self.calls.lock().unwrap().push(format!("cordon {node}"));
        Ok(())
    }

    async fn evict(&self, _tenant: &str, node: &str) -> Result<Drain, KubeError> {
        self.up()?;
        let mut pods = self.pods.lock().unwrap();
        let on_node = pods.entry(node.to_string()).or_default();
        let mut refusals = self.refusals.lock().unwrap();
        if *refusals > 0 && !on_node.is_empty() {
            *refusals -= 1;
            return Ok(Drain { remaining: on_node.clone(), blocked: on_node.clone() });
        }
        for pod in on_node.drain(..) {
            self.calls.lock().unwrap().push(format!("evict {pod}"));
        }
        Ok(Drain::default())
    }

    async fn delete_node(&self, _tenant: &str, node: &str) -> Result<(), KubeError> {
        self.up()?;
        self.calls.lock().unwrap().push(format!("delete {node}"));
        self.deleted.lock().unwrap().insert(node.to_string());
        Ok(())
    }
}

//! Live clusters on metal with fake nodes and the real engine: rotations
//! of the tenant's CAs (`ca_rotation.rs`), config
//! changes that need a reboot (`reboots.rs`), Kubernetes upgrades
//! (`kubernetes.rs`), liveness and health within one deadline
//! (`liveness.rs`), and replacements: a host that no longer answers as the
//! tenant's node, and a machine replaced through the API
//! (`replacement.rs`).

mod ca_rotation;
mod kubernetes;
mod liveness;
mod reboots;
mod replacement;

use cms_e2e::cluster::{FakeCluster, hostname};
use cms_e2e::nodes::StoreWriter;
use cms_e2e::{Api, Server};
use cms_fake_node::FakeNodeOptions;
use cms_talos::SecretsBundle;
use serde_json::{Value, json};

use crate::provisioning::cluster::fake_hosts;
use crate::provisioning::{CONVERGE, Engine, converged, eventually, metal_tenant};

/// A server with a converged metal tenant on a fake cluster.
pub(crate) struct Live {
    pub(crate) server: Server,
    pub(crate) cluster: FakeCluster,
    pub(crate) bundle: SecretsBundle,
    pub(crate) name: String,
}

impl Live {
    /// `cp` control planes and `workers` workers of tenant `name`, each fake
    /// node adjusted by `options`, converged.
    pub(crate) async fn start(
        engine: &Engine,
        name: &str,
        (cp, workers): (u32, u32),
        options: impl Fn(FakeNodeOptions) -> FakeNodeOptions,
    ) -> Live {
        let server = engine.options().start().await;
        server.api().post("/api/v1/tenants", &metal_tenant(name, cp, workers)).await.expect(201);
        let bundle = StoreWriter::open(server.data_dir()).await.bundle(name).await;
        let cluster = FakeCluster::start(&bundle, &fake_hosts(cp, workers), |_, base| options(base)).await;
        converged(&server.api(), name).await;
        Live { server, cluster, bundle, name: name.to_string() }
    }

    pub(crate) fn api(&self) -> Api {
        self.server.api()
    }

    pub(crate) async fn tenant(&self) -> Value {
        self.api().get(&format!("/api/v1/tenants/{}", self.name)).await.expect(200)
    }

    pub(crate) async fn machines(&self) -> Vec<Value> {
        let list = self.api().get(&format!("/api/v1/tenants/{}/machines", self.name)).await.expect(200);
        list["items"].as_array().cloned().unwrap_or_default()
    }

    pub(crate) async fn machine(&self, id: &str) -> Option<Value> {
        self.machines().await.into_iter().find(|machine| machine["metadata"]["name"] == id)
    }

    /// Changes the tenant's spec with `change`, retrying while the
    /// reconciler writes its annotations in between.
    pub(crate) async fn update(&self, change: impl Fn(&mut Value)) -> Value {
        let path = format!("/api/v1/tenants/{}", self.name);
        for _ in 0..20 {
            let mut tenant = self.api().get(&path).await.expect(200);
            change(&mut tenant);
            let reply = self.api().put(&path, &tenant).await;
            if reply.status != 409 {
                return reply.json();
            }
        }
        panic!("the tenant kept changing under the update");
    }

    /// Makes the etcd member of `machine` lead the cluster's etcd.
    pub(crate) fn lead(&self, machine: &str) {
        let etcd = &self.cluster.etcd;
        let member = etcd.members().into_iter().find(|member| member.hostname == hostname(machine));
        etcd.set_leader(member.unwrap_or_else(|| panic!("{machine} is an etcd member")).id);
    }

    /// Waits until the tenant is ready at its generation and `done` holds.
    pub(crate) async fn settled(&self, what: &str, done: impl Fn(&Value, &[Value]) -> bool) -> Value {
        eventually(what, CONVERGE, || async {
            let tenant = converged(&self.api(), &self.name).await;
            let machines = self.machines().await;
            done(&tenant, &machines).then_some(tenant)
        })
        .await
    }
}

/// The condition `kind` of a tenant.
pub(crate) fn condition(tenant: &Value, kind: &str) -> Option<Value> {
    tenant["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == kind).cloned()
}

/// A call's sequence number across every fake node of the process.
pub(crate) fn seq(call: &Value) -> u64 {
    call["seq"].as_u64().expect("a call sequence number")
}

/// A config patch body.
pub(crate) fn patch(name: &str, patch: Value) -> Value {
    json!({"metadata": {"name": name}, "spec": {"format": "strategic", "patches": [patch]}})
}

//! From machines to a cluster, on metal with fake nodes and the real
//! engine: one bootstrap, etcd membership, Kubernetes readiness (and a
//! real `kubectl` with the downloaded kubeconfig), safe scale-down and the
//! hosts' reset when the tenant goes.

use cms_e2e::cluster::{FakeCluster, Host, hostname};
use cms_e2e::nodes::StoreWriter;
use cms_e2e::{Api, Server};
use cms_fake_node::PodKind;
use cms_talos::SecretsBundle;
use serde_json::{Value, json};

use super::{CONVERGE, Engine, converged, eventually, host_address, machine_ids, metal_tenant};

/// The hosts of [`metal_tenant`]'s first `cp` control planes and `workers` workers.
pub(crate) fn fake_hosts(cp: u32, workers: u32) -> Vec<Host> {
    let cps = (0..cp).map(|i| Host::new(&format!("cp-{i}"), &host_address(1, i + 1), true));
    let ws = (0..workers).map(|i| Host::new(&format!("workers-{i}"), &host_address(2, i + 1), false));
    cps.chain(ws).collect()
}

/// A fake cluster on the hosts of [`metal_tenant`], with the tenant's CAs from `bundle`.
pub(crate) async fn fake_cluster(bundle: &SecretsBundle, cp: u32, workers: u32) -> FakeCluster {
    FakeCluster::start(bundle, &fake_hosts(cp, workers), |_, options| options).await
}

fn condition(tenant: &Value, kind: &str) -> Value {
    let conditions = tenant["status"]["conditions"].as_array().cloned().unwrap_or_default();
    conditions.into_iter().find(|c| c["type"] == kind).unwrap_or(Value::Null)
}

async fn set_count(api: &Api, tenant: &str, group: &str, count: u32) {
    let path = format!("/api/v1/tenants/{tenant}/node-groups/{group}");
    let mut body = api.get(&path).await.expect(200);
    body["spec"]["count"] = json!(count);
    api.put(&path, &body).await.expect(200);
}

/// Runs `kubectl` with `args`; a missing `kubectl` fails the test.
#[allow(clippy::disallowed_methods)] // A real client, run as a process.
fn kubectl(args: &[&str]) -> String {
    let output = std::process::Command::new("kubectl")
        .args(args)
        .output()
        .unwrap_or_else(|err| panic!("kubectl must be installed for this test: {err}"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "kubectl {args:?} failed: {stderr}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A server, its metal tenant `acme` of 3 control planes and 2 workers, and
/// the fake cluster on its hosts.
async fn acme_of_three_and_two(engine: &Engine) -> (Server, FakeCluster) {
    let server = engine.options().start().await;
    server.api().post("/api/v1/tenants", &metal_tenant("acme", 3, 2)).await.expect(201);
    let bundle = StoreWriter::open(server.data_dir()).await.bundle("acme").await;
    let cluster = fake_cluster(&bundle, 3, 2).await;
    (server, cluster)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_control_planes_and_two_workers_become_a_ready_cluster() {
    let engine = Engine::new();
    let (server, cluster) = acme_of_three_and_two(&engine).await;
    let api = server.api();
    cluster.kube.set_api_ready(false);

    // Bootstrapped, etcd healthy with three members; the API not ready yet,
    // and the conditions say so.
    let tenant = eventually("etcd up while the API is not ready", CONVERGE, || async {
        let tenant = api.get("/api/v1/tenants/acme").await.expect(200);
        let etcd = condition(&tenant, "EtcdHealthy");
        (condition(&tenant, "Bootstrapped")["status"] == "True" && etcd["status"] == "True").then_some(tenant)
    })
    .await;
    assert_eq!(tenant["status"]["ready"], false, "{tenant}");
    let api_ready = condition(&tenant, "KubernetesAPIReady");
    assert_eq!(api_ready["status"], "False", "{tenant}");
    assert!(api_ready["message"].as_str().unwrap().contains("/readyz"), "{api_ready}");
    assert_eq!(condition(&tenant, "EtcdHealthy")["message"], "3 of 3 members answer, leader on cp-0");

    cluster.kube.set_api_ready(true);
    let tenant = converged(&api, "acme").await;
    let bootstraps = cluster.calls_of("Bootstrap");
    assert_eq!(bootstraps.len(), 1, "exactly one Bootstrap: {bootstraps:?}");
    assert_eq!(bootstraps[0].0, "cp-0");
    assert_eq!(cluster.etcd.members().len(), 3);
    let members: Vec<&str> = tenant["status"]["etcd"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["machine"].as_str().unwrap())
        .collect();
    assert_eq!(members, ["cp-0", "cp-1", "cp-2"], "{tenant}");
    assert_eq!(condition(&tenant, "NodesReady")["message"], "5 of 5 nodes Ready");
    assert_eq!(condition(&tenant, "KubernetesAPIReady")["status"], "True");
    let workers = api.get("/api/v1/tenants/acme/node-groups/workers").await.expect(200);
    assert_eq!(workers["status"], json!({"replicas": 2, "readyReplicas": 2}));

    // A real client with the downloaded kubeconfig sees the nodes.
    let reply = api.get("/api/v1/tenants/acme/kubeconfig").await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let kubeconfig = reply.body;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("acme-kubeconfig.yaml");
    std::fs::write(&file, kubeconfig).unwrap();
    let listed = kubectl(&["--kubeconfig", file.to_str().unwrap(), "get", "nodes"]);
    for host in fake_hosts(3, 2) {
        let line = listed.lines().find(|line| line.starts_with(&host.hostname()));
        assert!(line.is_some_and(|line| line.contains(" Ready")), "{listed}");
    }

    // A node that goes NotReady makes the tenant not ready, and is named.
    cluster.kube.set_node_ready(&hostname("workers-1"), false);
    let tenant = eventually("the tenant to notice the NotReady node", CONVERGE, || async {
        let tenant = api.get("/api/v1/tenants/acme").await.expect(200);
        (tenant["status"]["ready"] == false).then_some(tenant)
    })
    .await;
    let nodes = condition(&tenant, "NodesReady");
    assert_eq!(nodes["status"], "False", "{tenant}");
    let message = nodes["message"].as_str().unwrap();
    assert!(message.contains("node talos-workers-1 (machine workers-1) is NotReady"), "{message}");
    let machine = api.get("/api/v1/tenants/acme/machines/workers-1").await.expect(200);
    assert_eq!(machine["status"]["ready"], false);
    cluster.kube.set_node_ready(&hostname("workers-1"), true);
    converged(&api, "acme").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_down_leaves_etcd_drains_and_resets_and_deletion_resets_every_host() {
    let engine = Engine::new();
    let (server, cluster) = acme_of_three_and_two(&engine).await;
    let api = server.api();
    converged(&api, "acme").await;

    // Workers 2 → 1: the newest is drained through the eviction API (a
    // disruption budget refuses once), reset, and its Node deleted.
    let node = hostname("workers-1");
    cluster.kube.add_pod("default", "web-1", &node, PodKind::Plain);
    cluster.kube.add_pod("kube-system", "cilium-abc", &node, PodKind::DaemonSet);
    cluster.kube.block_evictions("default", "web-1", 1);
    set_count(&api, "acme", "workers", 1).await;
    eventually("workers-1 to go", CONVERGE, || async {
        (machine_ids(&api, "acme").await == ["cp-0", "cp-1", "cp-2", "workers-0"]).then_some(())
    })
    .await;
    assert_eq!(cluster.kube.evictions(), ["default/web-1"]);
    assert_eq!(cluster.kube.deleted_nodes(), std::slice::from_ref(&node));
    let resets = cluster.node("workers-1").calls_of("Reset");
    assert_eq!(resets.len(), 1, "{resets:?}");
    assert_eq!(resets[0]["payload"]["graceful"], true);
    let requests = cluster.kube.requests();
    let cordon = requests.iter().position(|r| r.method == "PATCH" && r.path.contains(&node));
    let evicted = requests.iter().position(|r| r.path.contains("/web-1/eviction"));
    assert!(cordon < evicted && cordon.is_some(), "cordoned, then drained: {requests:?}");
    assert!(cluster.kube.pods().iter().any(|pod| pod.name == "cilium-abc"), "DaemonSet pods stay");

    // Control planes 3 → 1: each leaves etcd before it is reset, one at a
    // time, and etcd never loses quorum.
    set_count(&api, "acme", "cp", 1).await;
    eventually("two control planes to go", CONVERGE, || async {
        (machine_ids(&api, "acme").await == ["cp-0", "workers-0"]).then_some(())
    })
    .await;
    for machine in ["cp-1", "cp-2"] {
        let node = cluster.node(machine);
        let left = node.calls_of("EtcdLeaveCluster");
        let reset = node.calls_of("Reset");
        assert_eq!((left.len(), reset.len()), (1, 1), "{machine}: {:?}", node.calls());
        assert!(left[0]["seq"].as_u64() < reset[0]["seq"].as_u64(), "{machine} left etcd before its reset");
        assert_eq!(reset[0]["payload"]["graceful"], false);
    }
    let cp2_left = cluster.node("cp-2").calls_of("EtcdLeaveCluster")[0]["seq"].as_u64();
    let cp1_left = cluster.node("cp-1").calls_of("EtcdLeaveCluster")[0]["seq"].as_u64();
    assert!(cp2_left < cp1_left, "the newest leaves first");
    assert!(!cluster.etcd.lost_quorum(), "sizes {:?}", cluster.etcd.sizes());
    assert_eq!(cluster.etcd.members().len(), 1);
    assert_eq!(cluster.etcd.sizes().last(), Some(&1));
    let tenant = converged(&api, "acme").await;
    assert_eq!(tenant["status"]["etcd"]["members"].as_array().unwrap().len(), 1, "{tenant}");

    // Deleting the tenant resets every host that is still in it.
    api.delete("/api/v1/tenants/acme").await.expect(202);
    eventually("the tenant to go", CONVERGE, || async {
        (api.get("/api/v1/tenants/acme").await.status == 404).then_some(())
    })
    .await;
    for machine in ["cp-0", "workers-0"] {
        let resets = cluster.node(machine).calls_of("Reset");
        assert_eq!(resets.len(), 1, "{machine}: {resets:?}");
    }
}

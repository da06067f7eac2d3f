//! `oci` and `openstack` tenants that become clusters, on the real engine
//! with the fake providers (`tests/providers/`) and the fake datacenter
//! (`cms_e2e::cloud`): the endpoint is a load balancer the service makes,
//! a config patch and a Talos upgrade reach the running nodes over the
//! node API and replace no instance, as does a Kubernetes upgrade, a new
//! instance boots its config and joins, the load balancer's backends follow
//! the control planes, and deletion leaves nothing of the tenant.

use std::collections::BTreeSet;

use cms_e2e::cloud::FakeCloud;
use cms_e2e::nodes::StoreWriter;
use cms_e2e::{Api, Server};
use serde_json::{Value, json};

use super::{CONVERGE, Engine, converged, eventually};

/// One cloud's names: provider class, config, and the record's types.
struct Cloud {
    class: &'static str,
    config: Value,
    instance: &'static str,
    backend: &'static str,
    balancer: &'static str,
}

fn oci() -> Cloud {
    Cloud {
        class: "oci:VM.Standard.E4.Flex",
        config: json!({"region": "eu-frankfurt-1", "compartmentOcid": "ocid1.compartment.oc1..c",
            "subnetId": "ocid1.subnet.oc1..s", "ocpus": 2, "memoryGb": 8, "imageId": "ocid1.image.oc1..talos-amd64"}),
        instance: "oci_core_instance",
        backend: "oci_network_load_balancer_backend",
        balancer: "oci_network_load_balancer_network_load_balancer",
    }
}

fn openstack() -> Cloud {
    Cloud {
        class: "openstack:m1.large",
        config: json!({"imageId": "img-talos", "networkId": "net-1", "availabilityZones": ["az-1", "az-2"]}),
        instance: "openstack_compute_instance_v2",
        backend: "openstack_lb_member_v2",
        balancer: "openstack_lb_loadbalancer_v2",
    }
}

fn tenant(name: &str, cloud: &Cloud, cp: u32, workers: u32) -> Value {
    json!({
        "metadata": {"name": name},
        "spec": {"kubernetesVersion": "1.31.1", "talosVersion": "1.14.0", "nodeGroups": [
            {"name": "cp", "role": "controlplane", "count": cp, "providerClass": cloud.class, "providerConfig": cloud.config},
            {"name": "workers", "role": "worker", "count": workers, "providerClass": cloud.class, "providerConfig": cloud.config},
        ]}
    })
}

/// A server provisioning with `cloud`'s fake providers; OCI's provider
/// needs credentials, which the fake accepts whatever they are.
pub(crate) async fn server(engine: &Engine, cloud: &FakeCloud) -> Server {
    cloud
        .options(engine.options())
        .env("OCI_CLI_USER", "ocid1.user.oc1..u")
        .env("OCI_CLI_TENANCY", "ocid1.tenancy.oc1..t")
        .env("OCI_CLI_FINGERPRINT", "00:11")
        .env("OCI_CLI_KEY_CONTENT", "not a key")
        .start()
        .await
}

/// Instances of the tenant created or deleted after the first `created`,
/// by machine: none was replaced when each was created once and never deleted.
fn replaced(cloud: &FakeCloud, tenant: &str) -> usize {
    cloud.instances_replaced(tenant).values().sum()
}

/// Reads `path`, changes it with `change` and writes it back, again while
/// the reconciler's writes in between make it a conflict (409), as a
/// client does.
async fn update(api: &Api, path: &str, change: impl Fn(&mut Value)) {
    for _ in 0..20 {
        let mut body = api.get(path).await.expect(200);
        change(&mut body);
        let reply = api.put(path, &body).await;
        if reply.status != 409 {
            reply.expect(200);
            return;
        }
    }
    panic!("PUT {path} kept conflicting");
}

async fn set_count(api: &Api, tenant: &str, group: &str, count: u32) {
    let path = format!("/api/v1/tenants/{tenant}/node-groups/{group}");
    update(api, &path, |body| body["spec"]["count"] = json!(count)).await;
}

/// Waits until `count` nodes of the tenant took a config holding `text`
/// with `ApplyConfiguration`.
async fn every_node_took(cloud: &FakeCloud, tenant: &str, text: &str, count: usize) {
    eventually(&format!("{count} nodes took a config with {text}"), CONVERGE, || async {
        let applied: BTreeSet<String> = calls(cloud, tenant, "ApplyConfiguration")
            .into_iter()
            .filter(|(_, call)| call["payload"].to_string().contains(text))
            .map(|(machine, _)| machine)
            .collect();
        (applied.len() == count).then_some(())
    })
    .await;
}

/// The tenant's `method` calls on every node, as (machine, call), in order.
fn calls(cloud: &FakeCloud, tenant: &str, method: &str) -> Vec<(String, Value)> {
    let mut calls: Vec<(String, Value)> = cloud
        .instances(tenant)
        .into_iter()
        .flat_map(|node| node.calls_of(method).into_iter().map(move |call| (node.machine.clone(), call)))
        .collect();
    calls.sort_by_key(|(_, call)| call["seq"].as_u64());
    calls
}

async fn lifecycle(cloud_kind: Cloud) {
    let engine = Engine::new();
    let cloud = FakeCloud::start().await;
    let server = server(&engine, &cloud).await;
    let api = server.api();
    api.post("/api/v1/tenants", &tenant("acme", &cloud_kind, 3, 2)).await.expect(201);
    cloud.tenant("acme", StoreWriter::open(server.data_dir()).await.bundle("acme").await);

    // Ready, with the endpoint on the load balancer the service made, one
    // `Bootstrap`, and a backend per control plane on each listener.
    let tenant = converged(&api, "acme").await;
    let balancers = cloud.resources(cloud_kind.balancer);
    assert_eq!(balancers.len(), 1, "{balancers:?}");
    let endpoint = tenant["metadata"]["annotations"]["service.io/control-plane-endpoint"].as_str().unwrap();
    assert!(endpoint.starts_with("https://127.") && endpoint.ends_with(":6443"), "{endpoint}");
    let kubeconfig = api.get("/api/v1/tenants/acme/kubeconfig").await.body;
    assert!(kubeconfig.contains(endpoint), "{kubeconfig}");
    assert_eq!(calls(&cloud, "acme", "Bootstrap").len(), 1);
    assert_eq!(cloud.resources(cloud_kind.backend).len(), 6, "3 control planes on 2 listeners");
    assert_eq!(cloud.resources(cloud_kind.instance).len(), 5);
    assert!(cloud.problems().is_empty(), "{:?}", cloud.problems());

    // A config patch: every node takes it over the node API, and no
    // instance is replaced: not in the tool's plans, not in the cloud's record.
    let applied_before = engine.apply_output().len();
    let patch = json!({"metadata": {"name": "sysctls"}, "spec": {"format": "strategic",
        "patches": [{"machine": {"sysctls": {"net.core.somaxconn": "65535"}}}]}});
    api.post("/api/v1/tenants/acme/configpatches", &patch).await.expect(201);
    update(&api, "/api/v1/tenants/acme", |body| body["spec"]["configPatches"] = json!([{"name": "sysctls"}]))
        .await;
    every_node_took(&cloud, "acme", "somaxconn", 5).await;
    converged(&api, "acme").await;
    assert_eq!(replaced(&cloud, "acme"), 0, "{:?}", cloud.instance_events("acme"));

    // A Talos upgrade rolls over the node API, no instance replaced.
    update(&api, "/api/v1/tenants/acme", |body| body["spec"]["talosVersion"] = json!("1.14.1")).await;
    eventually("every machine at 1.14.1", CONVERGE, || async {
        let machines = api.get("/api/v1/tenants/acme/machines").await.expect(200);
        let all = machines["items"].as_array()?;
        all.iter()
            .all(|m| m["status"]["talosVersion"] == "v1.14.1" || m["status"]["talosVersion"] == "1.14.1")
            .then_some(())
    })
    .await;
    assert_eq!(calls(&cloud, "acme", "Upgrade").len(), 5);
    assert_eq!(replaced(&cloud, "acme"), 0, "{:?}", cloud.instance_events("acme"));

    // A Kubernetes upgrade is a config change: it too reaches every node
    // over the node API, no instance replaced.
    update(&api, "/api/v1/tenants/acme", |body| body["spec"]["kubernetesVersion"] = json!("1.32.0")).await;
    every_node_took(&cloud, "acme", "v1.32.0", 5).await;
    converged(&api, "acme").await;
    assert_eq!(replaced(&cloud, "acme"), 0, "{:?}", cloud.instance_events("acme"));

    let plans = engine.apply_output()[applied_before..].to_string();
    assert!(plans.contains("Apply complete!"), "an apply ran for the config changes: {plans}");
    for line in plans.lines().filter(|line| line.contains(cloud_kind.instance)) {
        assert!(!line.contains("replaced") && !line.contains("destroyed"), "{line}");
    }

    // Scale up: a new instance boots its config and joins; no backend for a worker.
    set_count(&api, "acme", "workers", 3).await;
    eventually("workers-2 is ready", CONVERGE, || async {
        let machine = api.get("/api/v1/tenants/acme/machines/workers-2").await;
        (machine.status == 200 && machine.json()["status"]["ready"] == true).then_some(())
    })
    .await;
    converged(&api, "acme").await;
    assert_eq!(cloud.resources(cloud_kind.instance).len(), 6);
    assert_eq!(cloud.resources(cloud_kind.backend).len(), 6);
    assert_eq!(replaced(&cloud, "acme"), 0, "{:?}", cloud.instance_events("acme"));

    // Scale 3 → 1 control planes: the backends follow, etcd keeps its quorum.
    set_count(&api, "acme", "cp", 1).await;
    eventually("the backends follow", CONVERGE, || async {
        (cloud.resources(cloud_kind.backend).len() == 2).then_some(())
    })
    .await;
    converged(&api, "acme").await;
    assert_eq!(cloud.etcd("acme").members().len(), 1);

    // Delete: the record holds nothing of the tenant.
    let deleted = api.delete("/api/v1/tenants/acme").await;
    assert!(deleted.status < 300, "{}", deleted.body);
    eventually("the tenant is gone", CONVERGE, || async {
        (api.get("/api/v1/tenants/acme").await.status == 404).then_some(())
    })
    .await;
    let left: Vec<String> = std::fs::read_dir(cloud.record_dir().join("resources"))
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|kind| std::fs::read_dir(kind.path()).into_iter().flatten().flatten())
        .map(|entry| entry.path().display().to_string())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oci_tenant_becomes_a_cluster_and_changes_in_place() {
    lifecycle(oci()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openstack_tenant_becomes_a_cluster_and_changes_in_place() {
    lifecycle(openstack()).await;
}

/// Names and shapes at the edges: a node group named `1st` (a name the
/// tool's resources cannot start with), a second region (a provider alias),
/// a fixed shape (no `shape_config`, which OCI refuses for one), and a
/// tenant of 40 machines all apply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_named_1st_a_second_region_a_fixed_shape_and_40_machines_apply() {
    let engine = Engine::new();
    let cloud = FakeCloud::start().await;
    let server = server(&engine, &cloud).await;
    let api = server.api();
    let mut body = tenant("edges", &oci(), 3, 1);
    body["spec"]["nodeGroups"][1] = json!({"name": "1st", "role": "worker", "count": 37,
        "providerClass": "oci:VM.Standard2.1",
        "providerConfig": {"region": "us-ashburn-1", "compartmentOcid": "ocid1.compartment.oc1..c",
            "subnetId": "ocid1.subnet.oc1..w", "imageId": "ocid1.image.oc1..talos-amd64",
            "availabilityDomains": ["AD-1", "AD-2", "AD-3"]}});
    api.post("/api/v1/tenants", &body).await.expect(201);
    super::provisioned(&api, "edges").await;
    let instances = cloud.resources("oci_core_instance");
    assert_eq!(instances.len(), 40);
    let fixed: Vec<&Value> = instances
        .iter()
        .map(|instance| &instance.attributes)
        .filter(|attributes| attributes["shape"] == "VM.Standard2.1")
        .collect();
    assert_eq!(fixed.len(), 37);
    // Spread over the three domains by index. (The fake provider refuses
    // a shape config with a fixed shape, as OCI does: the apply proves none.)
    let domains: BTreeSet<&str> = fixed.iter().filter_map(|a| a["availability_domain"].as_str()).collect();
    assert_eq!(domains, BTreeSet::from(["AD-1", "AD-2", "AD-3"]));
    let machines = super::machine_ids(&api, "edges").await;
    assert!(machines.contains(&"1st-36".to_string()), "{machines:?}");
    // One security group per region.
    assert_eq!(cloud.resources("oci_core_network_security_group").len(), 2);
}

/// A new image replaces no instance at once: the control planes are
/// replaced one at a time, each leaving etcd before its instance goes, and
/// the workers after them; etcd keeps its members and the tenant ends ready
/// with every instance current.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_image_replaces_the_instances_one_at_a_time() {
    let engine = Engine::new();
    let cloud = FakeCloud::start().await;
    let server = server(&engine, &cloud).await;
    let api = server.api();
    api.post("/api/v1/tenants", &tenant("acme", &oci(), 3, 1)).await.expect(201);
    cloud.tenant("acme", StoreWriter::open(server.data_dir()).await.bundle("acme").await);
    converged(&api, "acme").await;

    for group in ["cp", "workers"] {
        let path = format!("/api/v1/tenants/acme/node-groups/{group}");
        let image = json!("ocid1.image.oc1..talos-amd64-next");
        update(&api, &path, |body| body["spec"]["providerConfig"]["imageId"] = image.clone()).await;
    }
    let replaced = eventually("every instance replaced once", CONVERGE, || async {
        let replaced = cloud.instances_replaced("acme");
        (replaced.len() == 4 && replaced.values().all(|count| *count == 1)).then_some(replaced)
    })
    .await;
    let tenant = converged(&api, "acme").await;
    let current =
        tenant["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "InstancesCurrent");
    assert_eq!(current.map(|c| c["status"].clone()), Some(json!("True")), "{tenant}");
    assert_eq!(cloud.etcd("acme").members().len(), 3);
    for instance in cloud.resources("oci_core_instance") {
        assert_eq!(
            instance.attributes["source_details"][0]["source_id"],
            "ocid1.image.oc1..talos-amd64-next"
        );
    }

    // One at a time: each instance's delete comes after the last one's new
    // instance was made; control planes first, each after it left etcd.
    let events = cloud.instance_events("acme");
    let order: Vec<(String, String)> =
        events.iter().skip(4).map(|(machine, event)| (machine.clone(), event.op.clone())).collect();
    let mut expected = Vec::new();
    for machine in ["cp-0", "cp-1", "cp-2", "workers-0"] {
        expected.push((machine.to_string(), "delete".to_string()));
        expected.push((machine.to_string(), "create".to_string()));
    }
    assert_eq!(order, expected, "{replaced:?}");
    for machine in ["cp-0", "cp-1", "cp-2"] {
        let left = calls(&cloud, "acme", "EtcdLeaveCluster");
        assert!(left.iter().any(|(id, _)| id == machine), "{machine} left etcd: {left:?}");
    }
}

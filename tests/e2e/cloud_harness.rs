//! The fake datacenter on its own, with cloud records the test writes as
//! the fake providers would: instances boot as fake nodes with their user
//! data, the tenant's Kubernetes API comes up on its load balancer, and
//! nodes stop when their records go.

use std::net::IpAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine;
use cms_e2e::cloud::{CloudNode, FakeCloud, write_record};
use cms_model::UserRole;
use cms_nodeapi::{BootstrapRequest, NodeApi, NodeCredentials, NodeTarget, TalosNodeClient};
use cms_talos::SecretsBundle;
use serde_json::json;

const CONTROL_PLANE: &str = "version: v1alpha1\nmachine:\n  type: controlplane\n";
const WORKER: &str = "version: v1alpha1\nmachine:\n  type: worker\n";

/// Host `host` of the cloud's /24.
fn address(cloud: &FakeCloud, host: u8) -> String {
    let prefix = cloud.network().strip_suffix("0/24").expect("a /24");
    format!("{prefix}{host}")
}

fn remove(record: &Path, kind: &str, id: &str) {
    std::fs::remove_file(record.join("resources").join(kind).join(format!("{id}.json"))).unwrap();
}

fn event(record: &Path, op: &str, kind: &str, id: &str, name: &str) {
    use std::io::Write;
    let line = json!({"op": op, "type": kind, "id": id, "name": name, "at": 1}).to_string() + "\n";
    let mut file =
        std::fs::OpenOptions::new().create(true).append(true).open(record.join("events.jsonl")).unwrap();
    file.write_all(line.as_bytes()).unwrap();
}

/// An OCI instance of `acme`'s `machine` on `ip`, booted with `config`.
fn oci_instance(cloud: &FakeCloud, id: &str, machine: &str, ip: &str, config: &str) {
    let user_data = base64::engine::general_purpose::STANDARD.encode(config);
    let attributes = json!({
        "private_ip": ip, "display_name": format!("acme-{machine}"), "metadata": {"user_data": user_data},
        "freeform_tags": {"cms-tenant": "acme", "cms-machine": machine},
    });
    write_record(&cloud.record_dir(), "oci_core_instance", id, attributes, Some(&user_data));
    event(&cloud.record_dir(), "create", "oci_core_instance", id, &format!("acme-{machine}"));
}

async fn until<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn target(node: &CloudNode) -> NodeTarget {
    NodeTarget::parse(&format!("{}:50000", node.ip)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_boot_as_nodes_join_the_tenants_cluster_and_stop_with_their_records() {
    let cloud = FakeCloud::without_providers().await;
    let bundle = SecretsBundle::generate("1.14.0").unwrap();
    let (cp_ip, worker_ip, lb_ip) = (address(&cloud, 2), address(&cloud, 3), address(&cloud, 4));
    oci_instance(&cloud, "ocid1.instance.oc1..1", "cp-0", &cp_ip, CONTROL_PLANE);
    let tags = json!({"cms-tenant": "acme", "cms-machine": "workers-0"});
    let attributes = json!({"access_ip_v4": worker_ip, "name": "acme-workers-0", "metadata": tags});
    write_record(&cloud.record_dir(), "openstack_compute_instance_v2", "uuid-1", attributes, Some(WORKER));
    let stranger = json!({"cms-tenant": "other", "cms-machine": "cp-0"});
    let attributes = json!({"private_ip": address(&cloud, 9), "freeform_tags": stranger});
    write_record(&cloud.record_dir(), "oci_core_instance", "ocid1.instance.oc1..9", attributes, Some(""));

    until("the instances to be seen", || (cloud.instances("acme").len() == 2).then_some(())).await;
    assert!(cloud.instances("acme").iter().all(|node| !node.running), "no node before the tenant's CAs");
    cloud.tenant("acme", bundle.clone());
    let cp = until("cp-0 to boot", || cloud.running("acme", "cp-0")).await;
    let worker = until("workers-0 to boot", || cloud.running("acme", "workers-0")).await;
    assert_eq!((cp.ip.to_string(), cp.instance.as_str()), (cp_ip.clone(), "ocid1.instance.oc1..1"));
    assert!(cloud.running("other", "cp-0").is_none(), "an unregistered tenant's instances do not boot");

    // Booted: mTLS with the tenant's OS CA, a control plane that bootstraps.
    let client = TalosNodeClient::new(Duration::from_secs(5));
    let admin = NodeCredentials::for_tenant(&bundle, UserRole::Admin, Duration::from_secs(600)).unwrap();
    assert!(client.version(&target(&worker), &NodeCredentials::maintenance()).await.is_err());
    client.version(&target(&worker), &admin).await.expect("the worker answers");
    client.bootstrap(&target(&cp), &admin, BootstrapRequest::default()).await.expect("the bootstrap");
    let members: Vec<(String, IpAddr)> =
        cloud.etcd("acme").members().into_iter().map(|member| (member.hostname, member.address)).collect();
    assert_eq!(members, [("talos-cp-0".to_string(), cp.ip)]);
    assert_eq!(cloud.node("acme", "cp-0").calls_of("Bootstrap").len(), 1);

    // The load balancer brings the Kubernetes API, with the booted nodes.
    assert!(cloud.kube("acme").is_none());
    let nlb = json!({"ip_addresses": [{"ip_address": lb_ip, "is_public": false}],
                     "freeform_tags": {"cms-tenant": "acme"}});
    write_record(
        &cloud.record_dir(),
        "oci_network_load_balancer_network_load_balancer",
        "ocid1.nlb",
        nlb,
        None,
    );
    let kube = until("the Kubernetes API", || cloud.kube("acme")).await;
    assert_eq!(kube.addr().to_string(), format!("{lb_ip}:6443"));
    let nodes: Vec<(String, bool)> =
        kube.nodes().into_iter().map(|node| (node.name, node.control_plane)).collect();
    assert_eq!(nodes, [("talos-cp-0".to_string(), true), ("talos-workers-0".to_string(), false)]);
    assert!(tokio::net::TcpStream::connect(kube.addr()).await.is_ok(), "it listens");

    // A replacement: the new instance boots beside the old, which then goes.
    let new_ip = address(&cloud, 5);
    oci_instance(&cloud, "ocid1.instance.oc1..2", "cp-0", &new_ip, CONTROL_PLANE);
    until("the new cp-0", || cloud.running("acme", "cp-0").filter(|node| node.ip.to_string() == new_ip))
        .await;
    remove(&cloud.record_dir(), "oci_core_instance", "ocid1.instance.oc1..1");
    event(&cloud.record_dir(), "delete", "oci_core_instance", "ocid1.instance.oc1..1", "acme-cp-0");
    let old = until("the old cp-0 to stop", || {
        cloud
            .instances("acme")
            .into_iter()
            .find(|node| node.instance == "ocid1.instance.oc1..1" && !node.running)
    })
    .await;
    assert_eq!(old.calls_of("Bootstrap").len(), 1, "a stopped node keeps its calls");
    assert!(client.version(&target(&old), &admin).await.is_err(), "a stopped node refuses");
    assert_eq!(cloud.instances_replaced("acme"), [("cp-0".to_string(), 1)].into());
    let ops: Vec<(String, String)> =
        cloud.instance_events("acme").into_iter().map(|(machine, event)| (machine, event.op)).collect();
    let expected = [("cp-0", "create"), ("cp-0", "create"), ("cp-0", "delete")];
    assert_eq!(ops, expected.map(|(machine, op)| (machine.to_string(), op.to_string())));
    assert_eq!(cloud.resources("oci_core_instance").len(), 2, "the new cp-0 and the stranger");

    // The load balancer gone, its API stops; a node that breaks is named.
    remove(&cloud.record_dir(), "oci_network_load_balancer_network_load_balancer", "ocid1.nlb");
    until("the Kubernetes API to stop", || cloud.kube("acme").is_none().then_some(())).await;
    assert!(tokio::net::TcpStream::connect(kube.addr()).await.is_err(), "nothing listens");
    let broken = json!({"private_ip": address(&cloud, 6), "freeform_tags": {"cms-tenant": "acme", "cms-machine": "cp-1"}});
    write_record(&cloud.record_dir(), "oci_core_instance", "ocid1.instance.oc1..3", broken, Some("%%%"));
    let problem =
        until("the broken instance's problem", || cloud.problems().remove("ocid1.instance.oc1..3")).await;
    assert!(problem.contains("base64"), "{problem}");
    drop(cloud);
    assert!(client.version(&target(&worker), &admin).await.is_err(), "everything stops on drop");
}

//! [`TenantKube`] against a fake Kubernetes API over HTTPS, signed in with
//! the tenant's own admin kubeconfig: readiness, Nodes, and the cordon,
//! drain and delete of a node that leaves, as the reconciler makes them,
//! and the newest Events, as support bundles read them.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use cms_fake_node::{FakeKube, FakeKubeOptions, PodKind};
use cms_model::{Tenant, parse_json};
use cms_store::{SqlStore, StoreOptions};
use cms_talos::{Sealer, SealingKey};
use cms_tenancy::{
    Drain, KubeClient, KubeError, KubeEvent, Secrets, SecretsOptions, Tenancy, TenancyError, TenantKube,
};
use tempfile::TempDir;

/// How long a call may take; the fake answers at once.
const TIMEOUT: Duration = Duration::from_secs(5);

/// A tenancy over a fresh store, and the directory that holds it.
async fn tenancy() -> (Arc<Tenancy>, TempDir) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("cms.db").display());
    let store = SqlStore::open(&StoreOptions::new(url)).await.expect("the store opens");
    let sealer = Sealer::new(SealingKey::generate("test").expect("a key"));
    let secrets = Secrets::new(sealer, SecretsOptions { key_pool: 0, ..SecretsOptions::default() });
    (Arc::new(Tenancy::new(store, secrets.expect("secrets"))), dir)
}

fn tenant(endpoint: Option<&str>) -> Tenant {
    let endpoint = endpoint.map(|url| format!(r#","controlPlaneEndpoint":"{url}""#)).unwrap_or_default();
    let json = format!(
        r#"{{"metadata":{{"name":"acme"}},"spec":{{"kubernetesVersion":"1.32.0","talosVersion":"1.9.6"{endpoint}}}}}"#
    );
    parse_json(json.as_bytes()).expect("a tenant")
}

/// Tenant `acme`, whose control-plane endpoint is a fake Kubernetes API
/// with the tenant's own Kubernetes CA, and a client of it.
async fn cluster() -> (TenantKube, FakeKube, TempDir) {
    let (tenancy, dir) = tenancy().await;
    let created = tenancy.create_tenant(tenant(None)).await.expect("created");
    let bundle = tenancy.secrets().open(tenancy.store().as_ref(), "acme").await.expect("the bundle opens");
    let fake = FakeKube::start(FakeKubeOptions::new(bundle.kubernetes_ca().clone())).await.expect("started");
    let mut replacement = tenant(Some(&fake.endpoint()));
    replacement.metadata.resource_version = Some(created.resource_version);
    tenancy.update_tenant(replacement).await.expect("the endpoint is set");
    (TenantKube::new(tenancy, TIMEOUT), fake, dir)
}

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
}

fn api_error<T: std::fmt::Debug>(result: Result<T, KubeError>) -> String {
    match result {
        Err(KubeError::Api(message)) => message,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn readiness_and_nodes_are_read_with_the_tenants_admin_certificate() {
    let (kube, fake, _dir) = cluster().await;
    kube.readyz("acme").await.expect("the API is ready");
    fake.set_api_ready(false);
    let message = api_error(kube.readyz("acme").await);
    assert!(message.starts_with("GET /readyz: 500: [-]"), "{message}");
    fake.set_api_ready(true);
    kube.readyz("acme").await.expect("ready again");

    fake.add_node("cp-1", ip(1), true);
    fake.add_node("w-1", ip(2), false);
    fake.set_node_ready("w-1", false);
    let mut nodes = kube.nodes("acme").await.expect("the nodes");
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    let names: Vec<&str> = nodes.iter().map(|node| node.name.as_str()).collect();
    assert_eq!(names, ["cp-1", "w-1"]);
    assert!(nodes[0].ready, "{:?}", nodes[0]);
    assert_eq!(nodes[0].reason, "");
    assert!(nodes[0].addresses.contains(&"10.0.0.1".to_string()), "{:?}", nodes[0]);
    assert!(!nodes[1].ready);
    assert!(nodes[1].reason.starts_with("KubeletNotReady"), "{:?}", nodes[1]);
    assert!(!nodes[1].unschedulable);

    let requests = fake.requests();
    assert!(requests.iter().all(|request| request.client.as_deref() == Some("admin")), "{requests:?}");
}

#[tokio::test]
async fn a_leaving_node_is_cordoned_drained_around_its_budget_and_deleted() {
    let (kube, fake, _dir) = cluster().await;
    fake.add_node("w-1", ip(2), false);
    fake.add_node("w-2", ip(3), false);
    fake.add_pod("web", "front-1", "w-1", PodKind::Plain);
    fake.add_pod("web", "front-2", "w-1", PodKind::Plain);
    fake.add_pod("web", "front-3", "w-2", PodKind::Plain);
    fake.add_pod("kube-system", "flannel-w1", "w-1", PodKind::DaemonSet);
    fake.add_pod("kube-system", "static-w1", "w-1", PodKind::Mirror);
    fake.block_evictions("web", "front-1", 1);

    kube.cordon("acme", "w-1").await.expect("cordoned");
    kube.cordon("acme", "w-1").await.expect("cordoning twice is no error");
    kube.cordon("acme", "gone").await.expect("a missing node needs no cordon");
    let cordoned: Vec<(String, bool)> =
        fake.nodes().into_iter().map(|node| (node.name, node.unschedulable)).collect();
    assert_eq!(cordoned, [("w-1".to_string(), true), ("w-2".to_string(), false)]);

    let first = kube.evict("acme", "w-1").await.expect("one round");
    let blocked = vec!["web/front-1".to_string()];
    assert_eq!(first, Drain { remaining: blocked.clone(), blocked });
    assert!(!first.done());
    assert_eq!(fake.evictions(), ["web/front-2"]);

    let second = kube.evict("acme", "w-1").await.expect("another round");
    assert_eq!(second, Drain::default());
    assert!(second.done());
    assert_eq!(fake.evictions(), ["web/front-2", "web/front-1"], "DaemonSet and mirror pods stay");
    let mut left: Vec<String> =
        fake.pods().into_iter().map(|pod| format!("{}/{}", pod.namespace, pod.name)).collect();
    left.sort();
    assert_eq!(left, ["kube-system/flannel-w1", "kube-system/static-w1", "web/front-3"]);

    kube.delete_node("acme", "w-1").await.expect("deleted");
    kube.delete_node("acme", "w-1").await.expect("deleting twice is no error");
    assert_eq!(fake.deleted_nodes(), ["w-1"]);
    let names: Vec<String> = fake.nodes().into_iter().map(|node| node.name).collect();
    assert_eq!(names, ["w-2"]);
}

#[tokio::test]
async fn no_endpoint_is_a_client_error_and_a_stopped_api_an_api_error() {
    let (tenancy, _dir) = tenancy().await;
    tenancy.create_tenant(tenant(None)).await.expect("created");
    let kube = TenantKube::new(tenancy, TIMEOUT);
    match kube.readyz("acme").await {
        Err(KubeError::Client(TenancyError::NotReady(message))) => {
            assert!(message.contains("no control-plane endpoint"), "{message}")
        }
        other => panic!("a tenant without an endpoint has no client: {other:?}"),
    }
    match kube.nodes("nobody").await {
        Err(KubeError::Client(TenancyError::NotFound(_))) => {}
        other => panic!("a missing tenant has no client: {other:?}"),
    }

    let (kube, fake, _dir) = cluster().await;
    kube.readyz("acme").await.expect("ready");
    fake.stop();
    let message = api_error(kube.readyz("acme").await);
    assert!(message.starts_with("GET /readyz: "), "{message}");
    assert!(message.contains("Connection refused"), "{message}");
}

#[tokio::test]
async fn the_newest_events_come_first_from_every_page() {
    let (kube, fake, _dir) = cluster().await;
    // Three events each: more than one page of the API's list.
    for i in 0..200u8 {
        fake.add_node(&format!("w-{i}"), ip(i), false);
    }
    fake.add_pod("web", "front-1", "w-7", PodKind::Plain);
    kube.cordon("acme", "w-3").await.expect("cordoned");
    kube.evict("acme", "w-7").await.expect("evicted");
    let pages = fake.requests().iter().filter(|request| request.path.starts_with("/api/v1/events")).count();
    assert_eq!(pages, 0);
    let events = kube.events("acme", 3).await.expect("the events");
    let pages = fake.requests().iter().filter(|request| request.path.starts_with("/api/v1/events")).count();
    assert_eq!(pages, 2, "600 events come in pages of 500");
    let seen: Vec<(&str, &str)> =
        events.iter().map(|event| (event.reason.as_str(), event.object.as_str())).collect();
    assert_eq!(
        seen,
        [("Killing", "Pod/web/front-1"), ("NodeNotSchedulable", "Node/w-3"), ("NodeReady", "Node/w-199")]
    );
    let KubeEvent { namespace, kind, source, count, last_seen, .. } = &events[1];
    assert_eq!(
        (namespace.as_str(), kind.as_str(), source.as_str(), *count),
        ("default", "Normal", "kubelet", 1)
    );
    assert!(last_seen.ends_with('Z'), "{last_seen}");
    assert_eq!(kube.events("acme", 1000).await.expect("all").len(), 602);
}

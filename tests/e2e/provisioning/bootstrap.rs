//! Bootstrap exactly once, across a `kill -9` between the recorded intent
//! and the call, on SQLite and across two replicas on PostgreSQL.

use cms_e2e::cluster::FakeCluster;
use cms_e2e::nodes::{StoreWriter, bundle_at};
use cms_e2e::{Api, Server, ServerOptions};
use cms_fake_node::Method;
use cms_pgtest::PgServer;

use super::cluster::fake_hosts;
use super::{CONVERGE, Engine, converged, eventually, metal_tenant};

/// The sealing key the replicas share: standard base64 of 32 bytes.
const SECRETS_KEY: &str = "KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=";

/// A fake cluster of 3 control planes and 1 worker whose first control
/// plane holds `Bootstrap` calls before they arrive.
async fn holding_cluster(bundle: &cms_talos::SecretsBundle) -> FakeCluster {
    let cluster = FakeCluster::start(bundle, &fake_hosts(3, 1), |_, options| options).await;
    cluster.node("cp-0").node.hold(Some(Method::Bootstrap));
    cluster
}

/// Waits until the server recorded its intent and its `Bootstrap` call is
/// on its way to cp-0, not arrived.
async fn intent_recorded(api: &Api, cluster: &FakeCluster) {
    eventually("a Bootstrap call on its way", CONVERGE, || async {
        (cluster.node("cp-0").node.held() > 0).then_some(())
    })
    .await;
    let tenant = api.get("/api/v1/tenants/acme").await.expect(200);
    assert_eq!(tenant["metadata"]["annotations"]["service.io/bootstrap-node"], "cp-0", "{tenant}");
    assert!(tenant["metadata"]["annotations"].get("service.io/bootstrapped").is_none(), "{tenant}");
}

/// Lets the held call go once its caller is gone: it never arrives.
async fn release(cluster: &FakeCluster) {
    eventually("the killed server's call to be dropped", CONVERGE, || async {
        (cluster.node("cp-0").node.held() == 0).then_some(())
    })
    .await;
    cluster.node("cp-0").node.hold(None);
}

fn assert_one_bootstrap(cluster: &FakeCluster) {
    let bootstraps = cluster.calls_of("Bootstrap");
    assert_eq!(bootstraps.len(), 1, "exactly one Bootstrap: {bootstraps:?}");
    assert_eq!(bootstraps[0].0, "cp-0");
    assert_eq!(cluster.etcd.bootstrapped_by().as_deref(), Some("talos-cp-0"));
    assert_eq!(cluster.etcd.members().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_between_the_intent_and_the_call_still_bootstraps_once() {
    let engine = Engine::new();
    let server = engine.options().start().await;
    let api = server.api();
    api.post("/api/v1/tenants", &metal_tenant("acme", 3, 1)).await.expect(201);
    let bundle = StoreWriter::open(server.data_dir()).await.bundle("acme").await;
    let cluster = holding_cluster(&bundle).await;
    intent_recorded(&api, &cluster).await;

    let stopped = server.kill().await;
    release(&cluster).await;
    let server = stopped.restart().await;
    converged(&server.api(), "acme").await;
    assert_one_bootstrap(&cluster);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_on_postgresql_bootstrap_once_across_a_kill() {
    let engine = Engine::new();
    let url = format!("{}?sslmode=disable", PgServer::shared().database());
    let replica = |options: ServerOptions| {
        options
            .env("CMS_DATABASE_URL", url.as_str())
            .env("CMS_SECRETS_KEY", SECRETS_KEY)
            .env("CMS_SECRETS_KEY_ID", "e2e")
            .env("CMS_LEASE_TTL", "3s")
    };
    let a = replica(engine.options()).start().await;
    let b = replica(engine.options()).start().await;
    a.api().post("/api/v1/tenants", &metal_tenant("acme", 3, 1)).await.expect(201);
    let bundle = bundle_at(&url, "e2e", SECRETS_KEY, "acme").await;
    let cluster = holding_cluster(&bundle).await;
    intent_recorded(&a.api(), &cluster).await;

    // Whichever replica holds the tenant's lease is killed; the other
    // takes the tenant over once the lease lapses.
    let (killed, survivor) = if a_holds(&a, &b) { (a, b) } else { (b, a) };
    let _stopped = killed.kill().await;
    release(&cluster).await;
    converged(&survivor.api(), "acme").await;
    assert_one_bootstrap(&cluster);
}

/// Whether `a`, not `b`, is the replica that works on the tenant: the one
/// whose log shows it configuring the hosts (under the tenant's lease).
fn a_holds(a: &Server, b: &Server) -> bool {
    let marker = "applied the machine config";
    let (in_a, in_b) = (a.output().contains(marker), b.output().contains(marker));
    assert!(in_a != in_b, "exactly one replica configured the hosts: {in_a} {in_b}");
    in_a
}

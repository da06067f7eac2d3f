//! The `cms` client against a server that provisions (the reconciler and
//! the test engine of `provisioning`): `wait --for=ready` until the tenant
//! converges, the machines and projected state it produced, a machine's
//! config, and `wait --for=delete` once the tenant is torn down; `apply`
//! again, which keeps the service's annotations.

use cms_e2e::cli::Cli;
use cms_e2e::cluster::{FakeCluster, Host};
use cms_e2e::nodes::StoreWriter;
use serde_json::Value;

use crate::provisioning::{CONVERGE, Engine, eventually, host_address};

fn tenant(host: &str) -> String {
    format!(
        "kind: Tenant\n\
         metadata: {{name: omega}}\n\
         spec:\n  kubernetesVersion: 1.31.1\n  nodeGroups:\n    \
         - {{name: cp, role: controlplane, count: 1, providerClass: 'metal:bare',\n       \
         providerConfig: {{hosts: [{{address: {host}, providerId: rack9-1}}]}}}}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_ready_and_for_delete_on_a_provisioned_tenant() {
    let engine = Engine::new();
    let server = engine.options().start().await;
    let cli = Cli::new(&server);
    cli.run_with_input(&["login", "-u", "admin", "--password-stdin"], "e2e-admin-password\n").expect(0);
    let host = host_address(9, 1);
    assert_eq!(cli.run_with_input(&["apply", "-f", "-"], &tenant(&host)).ok(), "tenant/omega created\n");
    // The host: a fake node in maintenance mode, which takes its config,
    // bootstraps etcd and registers its Node with the Kubernetes API.
    let bundle = StoreWriter::open(server.data_dir()).await.bundle("omega").await;
    let cluster = FakeCluster::start(&bundle, &[Host::new("cp-0", &host, true)], |_, options| options).await;
    let node = cluster.node("cp-0");

    let timeout = format!("--timeout={}s", CONVERGE.as_secs());
    let ready = cli.run(&["wait", "tenant/omega", "--for=ready", &timeout]);
    assert_eq!(ready.ok(), "tenant/omega condition met\n");
    assert!(ready.stderr.contains("tenant/omega: phase active, ready"), "{ready}");
    let table = cli.run(&["get", "tenants"]);
    assert!(table.ok().contains("\nomega   active   true    1.31.1"), "{table}");

    let machines = cli.run(&["get", "machines", "-t", "omega"]);
    assert!(machines.ok().contains("\ncp-0   cp      controlplane   "), "{machines}");
    assert!(machines.stdout.contains(&format!("{host}:50000")), "{machines}");
    assert!(node.calls().iter().any(|call| call["method"] == "ApplyConfiguration"), "{:?}", node.calls());
    let projected = cli.run(&["get", "projected", "-t", "omega"]);
    assert!(projected.ok().contains("omega    Machine   terraform_data   cp-0"), "{projected}");
    let config = cli.run(&["machine", "config", "cp-0", "-t", "omega", "-f", "-"]);
    let document: Value = serde_saphyr::from_multiple::<Value>(config.ok()).expect("YAML")[0].clone();
    assert_eq!(document["machine"]["type"], "controlplane", "{config}");

    assert_eq!(cli.run(&["delete", "tenant", "omega"]).ok(), "tenant/omega deletion requested\n");
    let gone = cli.run(&["wait", "tenant/omega", "--for=delete", &timeout]);
    assert_eq!(gone.ok(), "tenant/omega condition met\n");
    cli.run(&["get", "tenant", "omega"]).expect(3);
}

/// `cms apply` of a file without the service's annotations, after the
/// tenant was bootstrapped, keeps them: the next pass (for the spec change
/// the file also makes) finds `service.io/bootstrapped` and calls no second
/// `Bootstrap`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applying_a_file_again_keeps_the_service_annotations_and_bootstraps_once() {
    let engine = Engine::new();
    let server = engine.options().start().await;
    let cli = Cli::new(&server);
    cli.run_with_input(&["login", "-u", "admin", "--password-stdin"], "e2e-admin-password\n").expect(0);
    let host = host_address(9, 2);
    assert_eq!(cli.run_with_input(&["apply", "-f", "-"], &tenant(&host)).ok(), "tenant/omega created\n");
    let bundle = StoreWriter::open(server.data_dir()).await.bundle("omega").await;
    let cluster = FakeCluster::start(&bundle, &[Host::new("cp-0", &host, true)], |_, options| options).await;
    let timeout = format!("--timeout={}s", CONVERGE.as_secs());
    cli.run(&["wait", "tenant/omega", "--for=ready", &timeout]).expect(0);
    assert_eq!(cluster.calls_of("Bootstrap").len(), 1);

    let changed = format!("{}  podNetwork: [10.245.0.0/16]\n", tenant(&host));
    assert_eq!(cli.run_with_input(&["apply", "-f", "-"], &changed).ok(), "tenant/omega configured\n");
    let api = server.api();
    let tenant = api.get("/api/v1/tenants/omega").await.expect(200);
    let annotations = &tenant["metadata"]["annotations"];
    assert!(
        annotations["service.io/bootstrapped"].as_str().is_some_and(|v| v.starts_with("cp-0 ")),
        "{tenant}"
    );
    let generation = tenant["metadata"]["generation"].clone();
    eventually("a pass over the changed spec", CONVERGE, || async {
        let tenant = api.get("/api/v1/tenants/omega").await.expect(200);
        (tenant["status"]["observedGeneration"] == generation && tenant["status"]["ready"] == true)
            .then_some(())
    })
    .await;
    assert_eq!(cluster.calls_of("Bootstrap").len(), 1, "no second Bootstrap");
    let tenant = api.get("/api/v1/tenants/omega").await.expect(200);
    assert!(tenant["metadata"]["annotations"]["service.io/bootstrapped"].is_string(), "{tenant}");

    let mut forged = tenant.clone();
    forged["metadata"]["annotations"]["service.io/bootstrapped"] = "cp-9 now".into();
    let refused = api.put("/api/v1/tenants/omega", &forged).await.expect_error(422, "Invalid");
    assert!(refused.contains(r#"metadata.annotations["service.io/bootstrapped"]"#), "{refused}");
}

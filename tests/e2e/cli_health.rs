//! `cms health` against the real server. Reaching real nodes is shown by
//! `health.rs` with fake nodes; here the client shows the server's answers.

use cms_e2e::Server;
use cms_e2e::cli::Cli;
use cms_e2e::fixtures::{TENANTS, tenant};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_of_one_tenant_and_of_all() {
    let server = Server::start().await;
    server.api().post(TENANTS, &tenant("lone")).await.expect(201);
    let cli = Cli::new(&server);
    cli.run_with_input(&["login", "-u", "admin", "--password-stdin"], "e2e-admin-password\n").expect(0);

    let one = cli.run(&["health", "lone"]);
    let lines: Vec<&str> = one.ok().lines().collect();
    assert_eq!(lines[0], "TENANT   REACHABLE   TALOS   MACHINES   PROBED   ERROR", "{one}");
    assert_eq!(lines[1], "lone     false       -       0          -        no reachable machines", "{one}");

    let all: Value = serde_json::from_str(cli.run(&["health", "-o", "json"]).ok()).expect("JSON");
    assert_eq!(all["tenants"][0]["tenant"], "lone");
    assert_eq!(all["tenants"][0]["reachable"], false);
    assert_eq!(cli.run(&["health", "-o", "name"]).ok(), "tenant/lone\n");

    let missing = cli.run(&["health", "nobody"]);
    missing.expect(3);
    assert!(missing.stderr.contains("(NotFound, HTTP 404)"), "{missing}");
}

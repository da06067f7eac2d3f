//! `cms get tenants -w` and `cms wait` against the real server's watch stream.
//!
//! Nothing marks a tenant ready without the reconciler and real machines, so
//! `wait` is shown meeting the conditions this server produces by itself: a
//! config-patch reference resolving, and a timeout (exit 7) with progress.

use std::sync::mpsc::Receiver;
use std::time::Duration;

use cms_e2e::Server;
use cms_e2e::cli::{CLI_TIMEOUT, Cli, stdout_lines, wait_bounded};
use cms_e2e::fixtures::{TENANTS, tenant, tenant_path};
use serde_json::json;

const LINE_WAIT: Duration = Duration::from_secs(20);

fn logged_in(server: &Server) -> Cli {
    let cli = Cli::new(server);
    cli.run_with_input(&["login", "-u", "admin", "--password-stdin"], "e2e-admin-password\n").expect(0);
    cli
}

#[track_caller]
fn next_line(lines: &Receiver<String>) -> String {
    lines.recv_timeout(LINE_WAIT).expect("a line of `cms get tenants -w` in time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_watch_prints_the_table_then_each_change() {
    let server = Server::start().await;
    let api = server.api();
    api.post(TENANTS, &tenant("existing")).await.expect(201);
    let cli = logged_in(&server);

    let mut child = cli.spawn(&["get", "tenants", "-w"]);
    let lines = stdout_lines(&mut child);
    let header = next_line(&lines);
    assert!(header.starts_with("NAME       PHASE     READY"), "{header}");
    assert!(next_line(&lines).starts_with("existing   pending   false   "));

    api.post(TENANTS, &tenant("added")).await.expect(201);
    assert!(next_line(&lines).starts_with("added      pending   false   "), "rows keep the columns");
    let deleted = api.delete(&tenant_path("added")).await.expect(202);
    assert!(deleted["metadata"]["deletionTimestamp"].is_string());
    assert!(next_line(&lines).starts_with("added      deleting  false   "));

    child.kill().expect("the watch is stopped");
    child.wait().expect("the watch exits");

    // -o json prints one event per line.
    let mut child = cli.spawn(&["get", "tenants", "existing", "-w", "-o", "json"]);
    let lines = stdout_lines(&mut child);
    let first: serde_json::Value = serde_json::from_str(&next_line(&lines)).unwrap();
    assert_eq!(first["type"], "ADDED");
    assert_eq!(first["object"]["metadata"]["name"], "existing");
    child.kill().expect("the watch is stopped");
    child.wait().expect("the watch exits");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_follows_the_tenant_until_its_condition_or_the_timeout() {
    let server = Server::start().await;
    let api = server.api();
    let body = json!({"metadata": {"name": "gamma"}, "spec": {
        "kubernetesVersion": "1.31.1", "configPatches": [{"name": "extra"}]}});
    api.post(TENANTS, &body).await.expect(201);
    let cli = logged_in(&server);

    let args = ["wait", "tenant/gamma", "--for=condition=ConfigPatchesResolved", "--timeout=1m"];
    let mut child = cli.spawn(&args);
    // The reference resolves once the patch exists.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let patch = json!({"metadata": {"name": "extra"}, "spec": {"format": "strategic", "patches": [{}]}});
    api.post(&format!("{}/configpatches", tenant_path("gamma")), &patch).await.expect(201);
    let status = wait_bounded(&mut child, CLI_TIMEOUT, &args);
    let mut stdout = String::new();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(stdout, "tenant/gamma condition met\n");
    assert!(
        stderr.contains("tenant/gamma: phase pending, not ready, ConfigPatchesResolved=False"),
        "{stderr}"
    );
    assert!(stderr.contains("ConfigPatchesResolved=True"), "{stderr}");

    // A tenant that never becomes ready: exit 7 after the timeout, with the last state.
    let late = cli.run(&["wait", "tenant/gamma", "--for=ready", "--timeout=2s"]);
    late.expect(7);
    assert!(late.stderr.contains("timed out after 2s waiting for tenant/gamma to be ready"), "{late}");
    assert!(late.stderr.contains("last seen: phase pending, not ready"), "{late}");
    // Missing tenants are not waited for, and deletion is met by absence.
    cli.run(&["wait", "tenant/nobody", "--timeout=5s"]).expect(3);
    cli.run(&["wait", "tenant/nobody", "--for=delete", "--timeout=5s"]).expect(0);
    cli.run(&["wait", "node/x"]).expect(2);
}

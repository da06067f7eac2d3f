//! `cms logs` and `cms dmesg` against the real server, its reconciler and
//! the engine over fake nodes (the setup of `backups.rs`): an editor reads
//! the end of a service's log (`--tail` honoured), follows one and sees a
//! line the node writes after the command started, reads the kernel log;
//! stopping the command ends the node's stream. A viewer is refused, a bad
//! service name is 400, and every read is on the audit log with its service.

use std::collections::BTreeSet;
use std::sync::mpsc::Receiver;
use std::time::Duration;

use cms_e2e::cli::{Cli, stdout_lines};
use serde_json::json;

use crate::backups::converged_tenant;
use crate::provisioning::{Engine, eventually};

const LINE_WAIT: Duration = Duration::from_secs(30);
const MACHINE: &str = "/api/v1/tenants/acme/machines/cp-0";

/// A logged-in client of a new user of `role`.
async fn user(server: &cms_e2e::Server, name: &str, role: &str) -> Cli {
    let password = format!("{name}-password");
    let user = json!({"metadata": {"name": name}, "spec": {"role": role, "password": password}});
    server.api().post("/api/v1/users", &user).await.expect(201);
    let cli = Cli::new(server);
    cli.run_with_input(&["login", "-u", name, "--password-stdin"], &format!("{password}\n")).expect(0);
    cli
}

/// Reads lines until one satisfies `wanted`.
#[track_caller]
fn until(lines: &Receiver<String>, what: &str, wanted: impl Fn(&str) -> bool) -> String {
    loop {
        let line = lines.recv_timeout(LINE_WAIT).unwrap_or_else(|_| panic!("{what} in time"));
        if wanted(&line) {
            return line;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cms_logs_tails_follows_and_is_audited() {
    let engine = Engine::new();
    let server = engine.options().start().await;
    let api = server.api();
    let (_bundle, cluster) = converged_tenant(&server).await;
    let node = &cluster.node("cp-0").node;
    let editor = user(&server, "eddie", "edit").await;

    // `--tail`: the last lines of a log nothing else writes to.
    for line in ["one", "two", "three"] {
        node.log("installer", line);
    }
    let tail =
        editor.run(&["logs", "acme", "cp-0", "--service", "installer", "--tail", "2"]).ok().to_string();
    let ends: Vec<&str> = tail.lines().map(|line| line.rsplit(' ').next().unwrap_or_default()).collect();
    assert_eq!(ends, ["two", "three"], "{tail}");
    // The default service is machined, whose lines carry machined's time stamp.
    let machined = editor.run(&["logs", "acme", "cp-0", "--tail", "10000"]).ok().to_string();
    assert!(machined.contains(" [talos] applied machine configuration (type controlplane)"), "{machined}");

    // `-f`: a line the node writes after the command started arrives.
    let mut child = editor.spawn(&["logs", "acme", "cp-0", "--service", "kubelet", "-f", "--tail", "1"]);
    let output = stdout_lines(&mut child);
    until(&output, "the kubelet's last line", |line| !line.is_empty());
    let node_ready = || async { (node.log_followers() == 1).then_some(()) };
    eventually("the node's followed stream", Duration::from_secs(10), node_ready).await;
    node.log("kubelet", "written after `cms logs -f` started");
    until(&output, "the line written after the start", |line| {
        line.ends_with(" written after `cms logs -f` started")
    });
    child.kill().expect("the command stops");
    child.wait().expect("the command is reaped");
    let closed = || async { (node.log_followers() == 0).then_some(()) };
    eventually("the node's stream to end with its client", Duration::from_secs(30), closed).await;

    // The kernel log: its last lines.
    let kernel = editor.run(&["dmesg", "acme", "cp-0", "--tail", "3"]).ok().to_string();
    assert_eq!(kernel.lines().count(), 3, "{kernel}");
    assert!(kernel.lines().all(|line| line.starts_with("kern:    info: [")), "{kernel}");

    // A bad service name is refused before any node is asked.
    let bad = editor.run(&["logs", "acme", "cp-0", "--service", "Not/A/Service"]);
    bad.expect(1);
    assert!(bad.stderr.contains("(BadRequest, HTTP 400)"), "{bad}");
    let reply = api.get(&format!("{MACHINE}/logs?service=etcd&tail=0")).await;
    reply.expect_error(400, "BadRequest");
    // Viewers may not read logs.
    let viewer = user(&server, "vera", "view").await;
    let refused = viewer.run(&["logs", "acme", "cp-0"]);
    refused.expect(6);
    assert!(refused.stderr.contains("HTTP 403"), "{refused}");
    let refused = viewer.run(&["dmesg", "acme", "cp-0"]);
    refused.expect(6);

    // Every read, with its service.
    let records = api.get("/api/v1/audit?tenant=acme&actor=eddie").await.expect(200);
    let reads: BTreeSet<(String, u64)> = records["items"]
        .as_array()
        .expect("records")
        .iter()
        .filter(|record| record["method"] == "GET" && record["status"] == 200)
        .map(|record| {
            (record["path"].as_str().unwrap_or_default().to_string(), record["status"].as_u64().unwrap())
        })
        .collect();
    let expected: BTreeSet<(String, u64)> = [
        format!("{MACHINE}/logs?service=installer"),
        format!("{MACHINE}/logs?service=machined"),
        format!("{MACHINE}/logs?service=kubelet"),
        format!("{MACHINE}/dmesg?service=kernel"),
    ]
    .into_iter()
    .map(|path| (path, 200))
    .collect();
    assert_eq!(reads, expected);
}

//! Durability: every write the server acknowledged survives `kill -9`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use cms_e2e::fixtures::{TENANTS, resource_version, tenant, tenant_path, total};
use cms_e2e::{Api, Method, Server};
use serde_json::{Value, json};

/// How many clients write at once.
const WRITERS: usize = 4;
/// How many acknowledged writes to wait for before the kill. Each create
/// generates an RSA-4096 key, a few a second on two cores.
const ACKNOWLEDGED_BEFORE_KILL: usize = 40;
/// The most creates one writer attempts.
const ATTEMPTS_PER_WRITER: usize = 2_000;

fn body(writer: usize, index: usize) -> Value {
    let mut body = tenant(&format!("durable-{writer}-{index:04}"));
    body["metadata"]["labels"] = json!({"writer": writer.to_string(), "index": index.to_string()});
    body["spec"]["podNetwork"] = json!([format!("10.{}.{}.0/24", 100 + writer, index % 250)]);
    body
}

/// Creates tenants until the server goes away, returning every body that got a 201.
async fn write_until_killed(
    api: Api,
    writer: usize,
    killed: Arc<AtomicBool>,
    acked: Arc<AtomicUsize>,
) -> Vec<Value> {
    let mut acknowledged = Vec::new();
    for index in 0..ATTEMPTS_PER_WRITER {
        let body = body(writer, index);
        let request = api.request(Method::POST, TENANTS).json(&body);
        match api.try_send(request).await {
            Ok(reply) if reply.status == 201 => {
                acknowledged.push(reply.json());
                acked.fetch_add(1, Ordering::SeqCst);
            }
            Ok(reply) => panic!("a create failed before the kill: {} {}", reply.status, reply.body),
            Err(_) if killed.load(Ordering::SeqCst) => break,
            Err(err) => panic!("a create failed before the kill: {err:?}"),
        }
    }
    acknowledged
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_kill_9() {
    acknowledged_writes_survive_kill_9_on(Server::options()).await;
}

/// The durability check on a server started with `options`: SQLite by
/// default, PostgreSQL in the replicas tests.
pub(crate) async fn acknowledged_writes_survive_kill_9_on(options: cms_e2e::ServerOptions) {
    let server = options.start().await;
    let killed = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicUsize::new(0));
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| tokio::spawn(write_until_killed(server.api(), writer, killed.clone(), acked.clone())))
        .collect();

    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while acked.load(Ordering::SeqCst) < ACKNOWLEDGED_BEFORE_KILL {
        assert!(tokio::time::Instant::now() < deadline, "the server acknowledged too few writes in time");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    killed.store(true, Ordering::SeqCst);
    let stopped = server.kill().await;

    let mut acknowledged = Vec::new();
    for writer in writers {
        let bodies = tokio::time::timeout(Duration::from_secs(60), writer)
            .await
            .expect("writers stop once the server is gone")
            .expect("a writer does not panic");
        assert!(bodies.len() < ATTEMPTS_PER_WRITER, "the kill happened during the load");
        acknowledged.extend(bodies);
    }
    assert!(acknowledged.len() >= ACKNOWLEDGED_BEFORE_KILL);

    let server = stopped.restart().await;
    let api = server.api();
    for expected in &acknowledged {
        let name = expected["metadata"]["name"].as_str().expect("a name");
        let found = api.get(&tenant_path(name)).await.expect(200);
        assert_eq!(found, *expected, "{name} is intact after kill -9");
        let secrets = api.get(&format!("{}/secrets", tenant_path(name))).await;
        assert_eq!(secrets.status, 200, "{name}: its secrets committed with it: {}", secrets.body);
    }
    let list = api.get(&format!("{TENANTS}?limit=1000")).await.expect(200);
    assert!(total(&list) >= acknowledged.len() as u64, "every acknowledged tenant is listed");

    // The restarted server goes on writing where the old one stopped.
    let first = &acknowledged[0];
    let name = first["metadata"]["name"].as_str().expect("a name");
    let mut update = first.clone();
    update["spec"]["kubernetesVersion"] = json!("1.31.2");
    let updated = api.put(&tenant_path(name), &update).await.expect(200);
    assert_eq!(resource_version(&updated), resource_version(first) + 1);
    api.post(TENANTS, &tenant("after-restart")).await.expect(201);
    server.terminate().await;
}

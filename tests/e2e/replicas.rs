//! Several real `cms-server` replicas on one real PostgreSQL (a throwaway
//! server from `cms-pgtest`): a watch on one sees the writes made on
//! another, concurrent PUTs across replicas have one winner, a replica
//! killed mid-reconcile is taken over with no two tool runs overlapping,
//! an outage of the database gives 503s and heals, and acknowledged writes
//! survive `kill -9`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cms_e2e::fixtures::{TENANTS, resource_version, tenant, tenant_path};
use cms_e2e::{Api, Method, Server, ServerOptions, Watch};
use cms_pgtest::PgServer;
use serde_json::json;

use crate::durability::acknowledged_writes_survive_kill_9_on;
use crate::provisioning::{CONVERGE, Engine, eventually, metal_tenant, provisioned};

/// The sealing key every replica shares: standard base64 of 32 bytes.
pub(crate) const SECRETS_KEY: &str = "KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=";

/// A replica of the service on the database at `url`.
pub(crate) fn replica(options: ServerOptions, url: &str) -> ServerOptions {
    options.env("CMS_DATABASE_URL", url).env("CMS_SECRETS_KEY", SECRETS_KEY).env("CMS_SECRETS_KEY_ID", "e2e")
}

/// A fresh database on the shared PostgreSQL server; the test server
/// speaks no TLS, which the tool's `pg` backend otherwise requires.
pub(crate) fn database() -> String {
    format!("{}?sslmode=disable", PgServer::shared().database())
}

/// Two replicas on a fresh database of the shared PostgreSQL server.
async fn pair(options: ServerOptions) -> (Server, Server) {
    let url = database();
    let a = replica(options.clone(), &url).start().await;
    let b = replica(options, &url).start().await;
    (a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_on_one_replica_reaches_a_watch_on_another_in_order() {
    let (a, b) = pair(Server::options()).await;
    let mut watch = Watch::open(&b.api(), "", &[]).await;
    watch.initial_burst(Duration::from_secs(10)).await;
    let names: Vec<String> = (0..5).map(|i| format!("across-{i}")).collect();
    for name in &names {
        a.api().post(TENANTS, &tenant(name)).await.expect(201);
    }
    let mut first = a.api().get(&tenant_path(&names[0])).await.expect(200);
    first["spec"]["kubernetesVersion"] = json!("1.31.2");
    a.api().put(&tenant_path(&names[0]), &first).await.expect(200);

    let mut seen = Vec::new();
    let mut versions = Vec::new();
    while seen.len() < 6 {
        let frame = watch.next_event(Duration::from_secs(30)).await;
        seen.push(format!("{} {}", frame.event_type().unwrap(), frame.name().unwrap()));
        versions.push(frame.object()["metadata"]["resourceVersion"].as_u64().unwrap());
    }
    let mut expected: Vec<String> = names.iter().map(|name| format!("ADDED {name}")).collect();
    expected.push(format!("MODIFIED {}", names[0]));
    assert_eq!(seen, expected, "B's watch shows A's writes, in order and complete");
    assert_eq!(versions.last(), Some(&2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_puts_across_replicas_have_exactly_one_winner() {
    let (a, b) = pair(Server::options()).await;
    let created = a.api().post(TENANTS, &tenant("contested")).await.expect(201);
    assert_eq!(resource_version(&created), 1);
    let apis: Vec<Api> = (0..8).map(|i| if i % 2 == 0 { a.api() } else { b.api() }).collect();
    let puts = apis.into_iter().enumerate().map(|(i, api)| {
        let mut body = created.clone();
        body["spec"]["kubernetesVersion"] = json!(format!("1.31.{}", i + 2));
        tokio::spawn(async move { api.put(&tenant_path("contested"), &body).await.status })
    });
    let mut statuses = Vec::new();
    for put in puts {
        statuses.push(put.await.unwrap());
    }
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 409, 409, 409, 409, 409, 409, 409]);
    let after_a = a.api().get(&tenant_path("contested")).await.expect(200);
    let after_b = eventually("B to see the winner", CONVERGE, || async {
        let seen = b.api().get(&tenant_path("contested")).await.expect(200);
        (resource_version(&seen) == 2).then_some(seen)
    })
    .await;
    assert_eq!(after_a, after_b);
}

/// Nanoseconds since the epoch.
fn now() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos()
}

/// The parent process of `pid`.
fn parent_of(pid: i32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_mid_reconcile_is_taken_over_without_overlapping_runs() {
    let engine = Engine::new();
    engine.set("gate", true);
    let url = database();
    let options = replica(engine.options().env("CMS_LEASE_TTL", "3s"), &url);
    let (a, b) = (options.clone().start().await, options.start().await);
    a.api().post(TENANTS, &metal_tenant("failover", 1, 1)).await.expect(201);

    // A run starts, held by the gate, on whichever replica took the lease
    // (the first asks the tool its `version`, in the workspaces' root).
    let held = eventually("a run to start", CONVERGE, || async { engine.spans().into_iter().next() }).await;
    let runner = parent_of(held.pid).expect("the held run is alive");
    let (victim, survivor) = if runner == a.pid() { (a, b) } else { (b, a) };
    assert_eq!(runner, victim.pid(), "the run belongs to one of the replicas");
    let _stopped = victim.kill().await;
    let killed_at = now();
    engine.set("gate", false);

    let took_over =
        tokio::time::timeout(Duration::from_secs(90), provisioned(&survivor.api(), "failover")).await;
    if took_over.is_err() {
        let tenant = survivor.api().get(&tenant_path("failover")).await.body;
        panic!("the survivor did not finish the work: {tenant}\n{:?}\n{}", engine.spans(), survivor.output());
    }
    // The tool's state lives in the database (the `pg` backend, a schema
    // for the tenant), not in the replica's workspace.
    let workspace = survivor.data_dir().path().join("workspaces/failover");
    assert!(workspace.join("main.tf.json").exists() && !workspace.join("terraform.tfstate").exists());
    // `cms_tofu::state_schema("failover")`: the first 32 hex digits of the
    // SHA-256 of the tenant's name.
    let states = psql(&url, "SELECT count(*) FROM cms_tofu_4d05c36518eb501154e18c5b8eac3e97.states");
    assert_eq!(states.trim(), "1", "one state row in the tenant's schema");
    let runs: Vec<_> = engine.spans().into_iter().filter(|span| span.workspace == "failover").collect();
    assert!(runs.len() >= 2, "{runs:?}");
    // A run the killed replica left unfinished ended with it; every other
    // run ended by itself. No two overlap.
    let mut intervals: Vec<(u128, u128)> = runs
        .iter()
        .map(|span| match span.end {
            Some(end) => (span.start, end),
            None => {
                assert!(span.start < killed_at, "only the killed replica's runs are unfinished: {span:?}");
                (span.start, killed_at)
            }
        })
        .collect();
    intervals.sort_unstable();
    for pair in intervals.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "two runs overlap: {pair:?} in {runs:?}");
    }
    assert!(runs.iter().any(|span| span.verb == "apply" && span.end.is_some() && span.start > killed_at));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_outage_gives_503_and_heals() {
    let postgres = PgServer::start();
    let url = format!("{}?sslmode=disable", postgres.database());
    let server = replica(Server::options(), &url).start().await;
    let api = server.api();
    api.post(TENANTS, &tenant("before")).await.expect(201);
    // Each create's answer, kept apart from the other calls': a create
    // acknowledged with 201 must be there after the outage; one answered
    // 503 may or may not have committed.
    let mut creates: Vec<(String, u16)> = vec![("before".into(), 201)];
    let mut create = async |name: String| {
        let status = api.post(TENANTS, &tenant(&name)).await.status;
        creates.push((name, status));
        status
    };

    postgres.stop();
    let until = tokio::time::Instant::now() + Duration::from_secs(5);
    let mut statuses = Vec::new();
    let mut index = 0;
    while tokio::time::Instant::now() < until {
        index += 1;
        create(format!("during-{index}")).await;
        statuses.push(api.get("/readyz").await.status);
        let read = api.get(&tenant_path("before")).await;
        statuses.push(read.status);
        if read.status == 200 {
            let mut update = read.json();
            update["spec"]["kubernetesVersion"] = json!("1.31.9");
            statuses.push(api.put(&tenant_path("before"), &update).await.status);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    postgres.restart();
    // Creates while the service heals, until one is acknowledged.
    let healing = tokio::time::Instant::now() + CONVERGE;
    for index in 1.. {
        if create(format!("healing-{index}")).await == 201 {
            break;
        }
        assert!(tokio::time::Instant::now() < healing, "a create is acknowledged after the outage");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eventually("readiness after the outage", CONVERGE, || async {
        (api.get("/readyz").await.status == 200).then_some(())
    })
    .await;
    api.post(TENANTS, &tenant("after")).await.expect(201);
    creates.push(("after".into(), 201));
    let list = api.send(api.request(Method::GET, &format!("{TENANTS}?limit=1000"))).await.expect(200);
    let names: Vec<&str> =
        list["items"].as_array().unwrap().iter().filter_map(|t| t["metadata"]["name"].as_str()).collect();
    let lost: Vec<&str> = creates
        .iter()
        .filter(|(name, status)| *status == 201 && !names.contains(&name.as_str()))
        .map(|(name, _)| name.as_str())
        .collect();
    assert!(
        lost.is_empty(),
        "every acknowledged create is there after the outage: lost {lost:?} of {creates:?}"
    );
    let during: Vec<u16> =
        creates.iter().filter(|(name, _)| name.starts_with("during-")).map(|(_, status)| *status).collect();
    assert!(during.contains(&503), "creates during the outage are refused with 503: {creates:?}");
    statuses.extend(creates.iter().map(|(_, status)| *status));
    assert!(
        statuses.iter().all(|status| *status < 500 || *status == 503),
        "no 500 during the outage: {statuses:?}"
    );
    assert!(
        creates.iter().all(|(_, status)| [201, 503].contains(status)),
        "a create is acknowledged or refused: {creates:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_kill_9_on_postgres() {
    let url = database();
    acknowledged_writes_survive_kill_9_on(replica(Server::options(), &url)).await;
}

/// Runs one query with `psql` (next to the server's binaries, else on
/// `PATH`) and returns its unaligned output, trimmed.
#[allow(clippy::disallowed_methods)] // The test reads the database the way an operator would.
pub(crate) fn psql(url: &str, query: &str) -> String {
    let output = std::process::Command::new(cms_pgtest::client_tool("psql"))
        .args(["-At", "-c", query, url])
        .output()
        .expect("psql runs");
    assert!(output.status.success(), "psql: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

//! Tool state locks you can see (`docs/provisioning.md`, State locks): a
//! replica killed while holding a tenant's lock on PostgreSQL, its lock
//! shown in the tenant's status and in the database, released by the other
//! replica past the bound with an audit record, and the next apply going
//! through; and an administrator's release through the API and the CLI,
//! refused while its holder is alive (mid-run), forced or not.

use std::process::{Child, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cms_e2e::cli::Cli;
use cms_e2e::fixtures::{TENANTS, tenant_path};
use cms_e2e::{Api, Server};
use serde_json::{Value, json};

use crate::provisioning::{
    CONVERGE, Engine, eventually, machine_ids, metal_groups, metal_tenant, provisioned,
};
use crate::replicas::{database, psql, replica};

/// What every release by a replica is recorded as.
const ACTOR: &str = "system:state-lock";

fn now() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos()
}

/// The parent process of `pid`.
fn parent_of(pid: i32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

/// A session that takes the tenant's state lock as the tool's `pg`
/// backend does (an advisory lock keyed by the state's row id), named as
/// the runs of `holder` are, and keeps it: a run that outlived its replica,
/// or a connection the database has not yet seen die with its host.
#[allow(clippy::disallowed_methods)] // It stands in for an orphaned tool run.
fn orphaned_run(url: &str, schema: &str, holder: &str) -> Child {
    let tag: String = holder.split_once('/').unwrap().1.chars().take(21).collect();
    let named = format!("{url}&application_name={schema}%20{tag}");
    let lock = format!("SELECT pg_advisory_lock(id) FROM {schema}.states WHERE name = 'default'");
    std::process::Command::new(cms_pgtest::client_tool("psql"))
        .args(["-At", "-c", &lock, "-c", "SELECT pg_sleep(300)", &named])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("psql starts")
}

/// The tenant's `status.stateLock`, if any.
async fn state_lock(api: &Api, name: &str) -> (Value, Value) {
    let tenant = api.get(&tenant_path(name)).await.expect(200);
    (tenant["status"]["stateLock"].clone(), tenant)
}

/// The audit records of `tenant` by `actor`.
async fn audited(api: &Api, tenant: &str, actor: &str) -> Vec<Value> {
    let audit = api.get(&format!("/api/v1/audit?tenant={tenant}&actor={actor}")).await.expect(200);
    audit["items"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_holding_the_state_lock_is_shown_then_released_and_the_next_apply_succeeds() {
    let engine = Engine::new();
    let url = database();
    let options =
        replica(engine.options().env("CMS_LEASE_TTL", "2s").env("CMS_STATE_LOCK_STALE_AFTER", "20s"), &url);
    let (a, b) = (options.clone().start().await, options.start().await);
    a.api().post(TENANTS, &metal_tenant("locked", 1, 1)).await.expect(201);
    provisioned(&a.api(), "locked").await;
    let schema = psql(&url, "SELECT 'cms_tofu_' || left(encode(sha256('locked'::bytea), 'hex'), 32)");

    // A second apply (a worker more) is held by the gate on whichever
    // replica takes it; its record names that replica.
    engine.set("gate", true);
    let runs_before = engine.spans().len();
    let mut tenant = a.api().get(&tenant_path("locked")).await.expect(200);
    tenant["spec"]["nodeGroups"] = metal_groups(1, 2);
    a.api().put(&tenant_path("locked"), &tenant).await.expect(200);
    let held = eventually("the second apply to start", CONVERGE, || async {
        engine.spans().into_iter().nth(runs_before)
    })
    .await;
    let runner = parent_of(held.pid).expect("the held run is alive");
    let (victim, survivor) = if runner == a.pid() { (a, b) } else { (b, a) };
    let api = survivor.api();
    let lock = eventually("the lock's record", CONVERGE, || async {
        let (lock, _) = state_lock(&api, "locked").await;
        (!lock.is_null()).then_some(lock)
    })
    .await;
    let holder = lock["holder"].as_str().unwrap().to_string();
    assert_eq!(holder.split('/').nth(1), Some(victim.pid().to_string().as_str()), "{lock}");
    assert_eq!(lock["operation"], "apply", "{lock}");

    // The run outlives its replica in the database: a session named after
    // the victim holds the state's advisory lock.
    let mut orphan = orphaned_run(&url, &schema, &holder);
    let sessions = format!(
        "SELECT count(*) FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid \
         WHERE l.locktype = 'advisory' AND l.granted AND a.application_name LIKE '{schema} %'"
    );
    eventually("the orphaned session to hold the lock", CONVERGE, || async {
        (psql(&url, &sessions) == "1").then_some(())
    })
    .await;
    let _stopped = victim.kill().await;
    let killed_at = now();
    engine.set("gate", false);

    // The survivor shows the dead holder's lock while it waits out the bound.
    let waiting = eventually("the survivor to show the lock", Duration::from_secs(30), || async {
        let (lock, tenant) = state_lock(&api, "locked").await;
        let message = tenant["status"]["message"].as_str().unwrap_or_default().to_string();
        (lock["holder"] == holder.as_str() && message.contains("waiting for the tool's state lock"))
            .then_some(message)
    })
    .await;
    assert!(waiting.contains(&holder), "{waiting}");

    // Past the bound it releases it: the session ended, the record gone, an
    // audit record naming the holder.
    eventually("the lock to be released", Duration::from_secs(60), || async {
        let (lock, _) = state_lock(&api, "locked").await;
        (lock["holder"] != holder.as_str()).then_some(())
    })
    .await;
    eventually("the orphaned session to end", Duration::from_secs(10), || {
        let ended = orphan.try_wait().unwrap().is_some() && psql(&url, &sessions) == "0";
        async move { ended.then_some(()) }
    })
    .await;
    let records = audited(&api, "locked", ACTOR).await;
    assert_eq!(records.len(), 1, "{records:?}");
    let record = &records[0];
    assert_eq!(record["target"]["kind"], "StateLock", "{record}");
    assert!(record["target"]["name"].as_str().unwrap().starts_with(&format!("{holder} since ")), "{record}");
    assert_eq!(record["path"], "/api/v1/tenants/locked/state-lock", "{record}");

    // The next apply succeeds: the worker is there.
    let tenant = tokio::time::timeout(Duration::from_secs(60), provisioned(&api, "locked")).await;
    assert!(tenant.is_ok(), "no apply after the release\n{}", survivor.output());
    assert_eq!(machine_ids(&api, "locked").await, ["cp-0", "workers-0", "workers-1"]);
    let (lock, _) = state_lock(&api, "locked").await;
    assert!(lock.is_null(), "the survivor's own run ended: {lock}");
    assert!(
        engine
            .spans()
            .iter()
            .any(|span| span.verb == "apply" && span.start > killed_at && span.end.is_some()),
        "{:?}",
        engine.spans()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_releases_a_state_lock_through_the_api() {
    let engine = Engine::new();
    engine.set("gate", true);
    let server = engine.options().env("CMS_STATE_LOCK_STALE_AFTER", "10m").start().await;
    let api = server.api();
    let path = "/api/v1/tenants/held/state-lock";
    // (No lock is 404: shown at the end, once the run ended. Asked now, the
    // answer would race the reconciler's first apply.)
    api.post(TENANTS, &metal_tenant("held", 1, 1)).await.expect(201);
    let lock = eventually("the lock's record", CONVERGE, || async {
        let (lock, _) = state_lock(&api, "held").await;
        (!lock.is_null()).then_some(lock)
    })
    .await;
    assert_eq!(lock["holder"].as_str().unwrap().split('/').nth(1), Some(server.pid().to_string().as_str()));

    // Admins only; a holder that is alive (this server, mid-run) is kept,
    // forced or not: its run must end first.
    let user =
        json!({"metadata": {"name": "lock-editor"}, "spec": {"role": "edit", "password": "lock-editor-pw"}});
    api.post("/api/v1/users", &user).await.expect(201);
    let editor = Api::new(server.addr()).login("lock-editor", "lock-editor-pw").await;
    editor.delete(path).await.expect_error(403, "Forbidden");
    api.delete(&format!("{path}?force=maybe")).await.expect_error(400, "BadRequest");
    let cli = Cli::new(&server);
    cli.run_with_input(&["login", "-u", "admin", "--password-stdin"], "e2e-admin-password\n").expect(0);
    for args in [&["unlock", "held"][..], &["unlock", "held", "--force"]] {
        let refused = cli.run(args);
        refused.expect(4);
        assert!(
            refused.stderr.contains("must end first") && refused.stderr.contains("(Conflict, HTTP 409)"),
            "{refused}"
        );
    }
    let (still, tenant) = state_lock(&api, "held").await;
    assert_eq!(still, lock, "the lock is kept");
    assert!(tenant["metadata"]["annotations"].get("service.io/release-state-lock").is_none(), "{tenant}");

    // The server dies mid-run; the next one (another process: its holder
    // is gone) releases the dead run's lock at once (and then holds the
    // lock for its own run).
    let stopped = server.kill().await;
    let server: Server = stopped.restart().await;
    let api = server.api();
    let old = lock["holder"].clone();
    eventually("the release of the dead holder's lock", CONVERGE, || async {
        let (lock, _) = state_lock(&api, "held").await;
        (lock["holder"] != old).then_some(())
    })
    .await;
    let records = audited(&api, "held", ACTOR).await;
    assert_eq!(records.len(), 1, "{records:?}");
    assert!(records[0]["target"]["name"].as_str().unwrap().starts_with(old.as_str().unwrap()));
    engine.set("gate", false);
    provisioned(&api, "held").await;
    let (lock, _) = state_lock(&api, "held").await;
    assert!(lock.is_null(), "the run ended: {lock}");
    api.delete(path).await.expect_error(404, "NotFound");
    let requests = audited(&api, "held", "admin").await;
    let statuses: Vec<u64> = requests
        .iter()
        .filter(|record| record["route"] == "/api/v1/tenants/{name}/state-lock")
        .map(|record| record["status"].as_u64().unwrap())
        .collect();
    assert_eq!(statuses, [404, 409, 409, 400], "newest first: {requests:?}");
}

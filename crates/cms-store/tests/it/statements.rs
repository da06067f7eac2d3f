//! What a batch costs PostgreSQL in statements, as `pg_stat_statements` on a
//! server of its own counts them: the same handful however many writes and
//! tenants the batch carries.

use cms_model::Kind;
use cms_store::pgtest::PgServer;
use cms_store::{Draft, Key, SqlStore, Store, StoreOptions};
use sea_orm::{ConnectionTrait, Database, DatabaseConnection, DbBackend, Statement};
use serde_json::json;

/// Tenants written at once: one batch of them.
const TENANTS: usize = 48;

fn tenant(version: &str) -> Draft {
    let group = |name: &str| {
        json!({"name": name, "role": "worker", "count": 1, "providerClass": "metal:bare",
               "providerConfig": {"hosts": [{"address": "10.0.0.1"}]}})
    };
    let spec = json!({"kubernetesVersion": version, "nodeGroups": [group("cp"), group("workers")]});
    Draft { spec, ..Draft::default() }
}

/// `(statements run, commits)` since the last reset, leaving out what the
/// listener reads (the event log and the counters, outside any transaction)
/// and these probes.
async fn counts(db: &DatabaseConnection) -> (i64, i64) {
    let row = db
        .query_one_raw(Statement::from_string(
            DbBackend::Postgres,
            "SELECT coalesce(sum(calls) FILTER (WHERE query <> 'COMMIT'), 0)::bigint AS calls, \
             coalesce(sum(calls) FILTER (WHERE query = 'COMMIT'), 0)::bigint AS commits \
             FROM pg_stat_statements \
             WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
             AND query NOT LIKE '%pg_stat%' AND query NOT LIKE 'LISTEN%' \
             AND NOT (query LIKE 'SELECT%' AND (query LIKE '%\"events\"%' OR query LIKE '%\"counters\"%'))",
        ))
        .await
        .expect("pg_stat_statements")
        .expect("a row");
    (row.try_get("", "calls").expect("calls"), row.try_get("", "commits").expect("commits"))
}

#[tokio::test]
async fn a_batch_of_writes_to_many_tenants_runs_a_handful_of_statements() {
    let server = tokio::task::spawn_blocking(|| {
        PgServer::start_with(&["shared_preload_libraries=pg_stat_statements"])
    })
    .await
    .expect("server");
    let url = server.database();
    let db = Database::connect(&url).await.expect("connect");
    db.execute_unprepared("CREATE EXTENSION pg_stat_statements").await.expect("the extension");
    let store = SqlStore::open(&StoreOptions::new(&url)).await.expect("open");
    let names: Vec<String> = (0..TENANTS).map(|i| format!("t{i}")).collect();
    for name in &names {
        store.create(Key::tenant(name), tenant("1.31.0")).await.expect("create");
    }
    db.execute_unprepared("SELECT pg_stat_statements_reset()").await.expect("reset");

    // On this current-thread runtime every PUT is queued before the writer
    // runs: they go in one batch.
    let puts = names.iter().map(|name| store.update(Key::tenant(name), tenant("1.31.1"), 1));
    for put in futures_util::future::join_all(puts).await {
        assert_eq!(put.expect("a PUT").resource_version, 2);
    }
    let (calls, commits) = counts(&db).await;
    assert!(commits >= 1 && (commits as usize) < TENANTS, "the PUTs were batched: {commits} commits");
    // BEGIN, the tenants' locks, one read, one write.
    assert!(calls <= 4 * commits, "{calls} statements in {commits} transactions");

    // Config patches created into one tenant: the same.
    db.execute_unprepared("SELECT pg_stat_statements_reset()").await.expect("reset");
    let creates = (0..TENANTS).map(|i| {
        let draft = Draft { spec: json!({"format": "strategic", "patches": []}), ..Draft::default() };
        store.create(Key::child(Kind::ConfigPatch, "t0", format!("p{i}")), draft)
    });
    for create in futures_util::future::join_all(creates).await {
        create.expect("a create");
    }
    let (calls, commits) = counts(&db).await;
    assert!(commits >= 1 && (commits as usize) < TENANTS, "the creates were batched: {commits} commits");
    assert!(calls <= 4 * commits, "{calls} statements in {commits} transactions");

    // Every write stands, with its events in order.
    let tenants = store.all(Kind::Tenant, None);
    assert!(tenants.iter().all(|t| t.resource_version == 2), "every PUT stands");
    assert_eq!(store.all(Kind::ConfigPatch, Some("t0".into())).len(), TENANTS);
    let fresh = SqlStore::open(&StoreOptions::new(&url)).await.expect("reopen");
    assert_eq!(fresh.revision(), store.revision(), "the log and the rows agree");
    assert_eq!(fresh.all(Kind::NodeGroup, None).len(), 2 * TENANTS);
}

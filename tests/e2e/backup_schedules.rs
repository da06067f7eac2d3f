//! Scheduled etcd backups with the real server, its reconciler and the
//! engine, over fake nodes: a schedule every second takes backups, keeps
//! the newest `retain`, records them in the tenant's status and metrics,
//! and stops when removed; on two replicas sharing PostgreSQL, a scheduled
//! time is backed up once.

use std::time::Duration;

use chrono::{Timelike, Utc};
use cms_e2e::nodes::bundle_at;
use cms_e2e::{Api, Server};
use serde_json::{Value, json};

use crate::backups::converged_tenant;
use crate::metrics::{scrape, value};
use crate::provisioning::cluster::fake_cluster;
use crate::provisioning::{Engine, converged, eventually, metal_tenant};
use crate::replicas::{SECRETS_KEY, database, replica};

/// How often the servers look at the schedules here.
const TICK: &str = "200ms";

/// Sets the tenant's `spec.backups` (removes it with `Value::Null`).
async fn set_schedule(api: &Api, tenant: &str, backups: Value) {
    let path = format!("/api/v1/tenants/{tenant}");
    let mut body = api.get(&path).await.expect(200);
    body["spec"]["backups"] = backups;
    api.put(&path, &body).await.expect(200);
}

async fn status_backups(api: &Api, tenant: &str) -> Value {
    api.get(&format!("/api/v1/tenants/{tenant}")).await.expect(200)["status"]["backups"].clone()
}

async fn scheduled_taken(api: &Api) -> f64 {
    value(&scrape(api).await, "cms_backups_taken_total", &[("trigger", "scheduled")])
}

fn ids(list: &Value) -> Vec<String> {
    list["items"].as_array().unwrap().iter().map(|item| item["id"].as_str().unwrap().to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_takes_backups_keeps_the_newest_and_stops_when_removed() {
    let engine = Engine::new();
    let server = engine.options().env("CMS_BACKUP_SCHEDULE_TICK", TICK).start().await;
    let api = server.api();
    let (_bundle, cluster) = converged_tenant(&server).await;

    // A bad schedule is refused at its field.
    let path = "/api/v1/tenants/acme";
    let mut body = api.get(path).await.expect(200);
    body["spec"]["backups"] = json!({"schedule": "every day", "retain": 2});
    let error = api.put(path, &body).await.expect_error(422, "Invalid");
    assert!(error.contains("spec.backups.schedule"), "{error}");

    set_schedule(&api, "acme", json!({"schedule": "* * * * * *", "retain": 2})).await;
    let first = eventually("a first scheduled backup", Duration::from_secs(30), || async {
        status_backups(&api, "acme").await["lastSuccess"]["id"].as_str().map(str::to_string)
    })
    .await;
    eventually("four scheduled backups", Duration::from_secs(60), || async {
        (scheduled_taken(&api).await >= 4.0).then_some(())
    })
    .await;
    let listed = eventually("the oldest pruned", Duration::from_secs(10), || async {
        let list = api.get("/api/v1/tenants/acme/backups").await.expect(200);
        Some(ids(&list)).filter(|ids| ids.len() == 2 && !ids.contains(&first))
    })
    .await;
    let on_disk = std::fs::read_dir(server.data_dir().path().join("backups/acme"))
        .unwrap()
        .filter(|entry| entry.as_ref().unwrap().file_name().to_string_lossy().ends_with(".etcd"))
        .count();
    assert!(on_disk <= 3, "pruned files are gone: {on_disk}");
    assert!(cluster.calls_of("EtcdSnapshot").len() >= 4);

    let status = status_backups(&api, "acme").await;
    assert!(status["lastScheduled"].is_string() && status["nextRun"].is_string(), "{status}");
    let newest = status["lastSuccess"]["id"].as_str().unwrap();
    assert!(newest >= listed[1].as_str(), "{status} {listed:?}");
    let scrape = scrape(&api).await;
    assert!(value(&scrape, "cms_backup_bytes_total", &[]) > 0.0);
    let age = scrape.samples.iter().find(|sample| {
        sample.metric == "cms_backup_newest_age_seconds" && sample.labels.get("tenant") == Some("acme")
    });
    assert!(age.is_some(), "the newest backup's age is exported");
    // Each scheduled backup is on the audit log, by the scheduler.
    let audit = api.get("/api/v1/audit?actor=system:backup-scheduler").await.expect(200);
    let records = audit["items"].as_array().unwrap();
    assert!(records.len() >= 4, "{audit}");
    assert!(
        records.iter().all(|record| record["target"]["kind"] == "Backup" && record["status"] == 201),
        "{audit}"
    );

    // Without a schedule, nextRun goes and no more backups are taken.
    set_schedule(&api, "acme", Value::Null).await;
    eventually("nextRun cleared", Duration::from_secs(10), || async {
        status_backups(&api, "acme").await["nextRun"].is_null().then_some(())
    })
    .await;
    // A backup claimed just before may still be finishing.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let taken = scheduled_taken(&api).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(scheduled_taken(&api).await, taken, "no backup after the schedule is gone");
}

/// The `.etcd` files of `tenant` in a server's backup directory.
fn backup_files(server: &Server, tenant: &str) -> usize {
    match std::fs::read_dir(server.data_dir().path().join("backups").join(tenant)) {
        Ok(entries) => entries
            .filter(|entry| entry.as_ref().unwrap().file_name().to_string_lossy().ends_with(".etcd"))
            .count(),
        Err(_) => 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_take_a_scheduled_backup_once() {
    let engine = Engine::new();
    let url = database();
    let options = replica(engine.options().env("CMS_BACKUP_SCHEDULE_TICK", TICK), &url);
    let (a, b) = (options.clone().start().await, options.start().await);
    a.api().post("/api/v1/tenants", &metal_tenant("shared", 1, 1)).await.expect(201);
    let bundle = bundle_at(&url, "e2e", SECRETS_KEY, "shared").await;
    let cluster = fake_cluster(&bundle, 1, 1).await;
    converged(&a.api(), "shared").await;

    // One time, six seconds from now: both replicas look at it every 200 ms.
    let at = Utc::now() + chrono::Duration::seconds(6);
    let schedule = format!("{} {} {} * * *", at.second(), at.minute(), at.hour());
    set_schedule(&b.api(), "shared", json!({"schedule": schedule, "retain": 10})).await;
    eventually("the scheduled backup", Duration::from_secs(60), || async {
        status_backups(&a.api(), "shared").await["lastSuccess"]["id"].as_str().map(str::to_string)
    })
    .await;
    // Long enough for a second replica's duplicate to show.
    tokio::time::sleep(Duration::from_secs(3)).await;

    let files = backup_files(&a, "shared") + backup_files(&b, "shared");
    assert_eq!(files, 1, "one backup between the two replicas");
    let taken = scheduled_taken(&a.api()).await + scheduled_taken(&b.api()).await;
    assert_eq!(taken, 1.0);
    assert_eq!(cluster.calls_of("EtcdSnapshot").len(), 1, "{:?}", cluster.calls_of("EtcdSnapshot"));
    let status = status_backups(&b.api(), "shared").await;
    assert_eq!(
        status["lastScheduled"].as_str().map(|time| time.parse::<chrono::DateTime<Utc>>().unwrap()),
        Some(at.with_nanosecond(0).unwrap()),
        "{status}"
    );
}

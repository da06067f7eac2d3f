//! Conformance cases for the audit log.

use chrono::{TimeZone, Utc};
use cms_model::{AuditEntry, AuditOutcome, AuditTarget, Page, UserRole};

use super::{open, open_with};
use crate::audit::{Audit, AuditFilter};
use crate::sql::StoreOptions;

fn entry(actor: &str, tenant: Option<&str>, status: u16) -> AuditEntry {
    AuditEntry {
        time: Utc.with_ymd_and_hms(2030, 1, 2, 3, 4, 5).single().expect("a time"),
        actor: actor.into(),
        actor_role: (actor != "anonymous").then_some(UserRole::Edit),
        actor_token: None,
        actor_source: None,
        actor_issuer: None,
        actor_subject: None,
        method: "POST".into(),
        route: Some("/api/v1/tenants/{tenant}/node-groups".into()),
        path: format!("/api/v1/tenants/{}/node-groups", tenant.unwrap_or("-")),
        target: tenant.map(|t| AuditTarget { kind: "NodeGroup".into(), tenant: Some(t.into()), name: None }),
        status,
        outcome: AuditOutcome::of_status(status),
        request_id: format!("request-of-{actor}"),
    }
}

fn page(limit: usize, offset: usize) -> Page {
    Page { limit, offset }
}

pub async fn audit_records_read_back_newest_first(url: &str) {
    let store = open(url).await;
    let (empty, total) = store.list(Page::default(), AuditFilter::default()).await.expect("empty list");
    assert!(empty.is_empty() && total == 0);
    let mut first = entry("dev", Some("acme"), 201);
    first.actor_token = Some("0123456789abcdef".into());
    let second = AuditEntry { target: None, route: None, ..entry("anonymous", None, 401) };
    let first_id = store.record(first.clone()).await.expect("record");
    let second_id = store.record(second.clone()).await.expect("record");
    assert!(second_id > first_id, "ids grow: {first_id} then {second_id}");
    let (records, total) = store.list(Page::default(), AuditFilter::default()).await.expect("list");
    assert_eq!(total, 2);
    let ids: Vec<_> = records.iter().map(|r| r.id).collect();
    assert_eq!(ids, [second_id, first_id], "newest first");
    assert_eq!((&records[0].entry, &records[1].entry), (&second, &first), "read back as written");
    let reopened = open(url).await;
    assert_eq!(reopened.list(Page::default(), AuditFilter::default()).await.expect("list").1, 2, "durable");
}

pub async fn audit_pages_and_filters(url: &str) {
    let store = open(url).await;
    for i in 0..7 {
        let tenant = if i % 2 == 0 { "acme" } else { "other" };
        store.record(entry(if i < 3 { "dev" } else { "ops" }, Some(tenant), 200)).await.expect("record");
    }
    let (all, total) = store.list(Page::default(), AuditFilter::default()).await.expect("list");
    assert_eq!((all.len(), total), (7, 7));
    let ids: Vec<_> = all.iter().map(|r| r.id).collect();
    let (second_page, total) = store.list(page(3, 3), AuditFilter::default()).await.expect("page");
    assert_eq!(total, 7, "total counts every record");
    assert_eq!(second_page.iter().map(|r| r.id).collect::<Vec<_>>(), ids[3..6]);
    let (past_end, total) = store.list(page(3, 9), AuditFilter::default()).await.expect("past the end");
    assert_eq!((past_end.len(), total), (0, 7));
    let (far, total) =
        store.list(page(3, usize::MAX - 1), AuditFilter::default()).await.expect("far past the end");
    assert_eq!((far.len(), total), (0, 7), "an offset beyond any database's OFFSET is an empty page");
    let by_actor = AuditFilter { actor: Some("dev".into()), tenant: None };
    let (dev, total) = store.list(page(2, 0), by_actor).await.expect("by actor");
    assert_eq!((dev.len(), total), (2, 3));
    assert!(dev.iter().all(|r| r.entry.actor == "dev"));
    let both = AuditFilter { actor: Some("ops".into()), tenant: Some("acme".into()) };
    let (ops_acme, total) = store.list(Page::default(), both).await.expect("by actor and tenant");
    assert_eq!(total, 2, "records 4 and 6");
    assert!(ops_acme.iter().all(|r| r.entry.actor == "ops"
        && r.entry.target.as_ref().and_then(|t| t.tenant.as_deref()) == Some("acme")));
}

pub async fn audit_retention_keeps_the_newest(url: &str) {
    let store = open_with(url, StoreOptions { audit_retention: 3, ..StoreOptions::new(url) }).await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(store.record(entry(&format!("user{i}"), None, 204)).await.expect("record"));
    }
    let (kept, total) = store.list(Page::default(), AuditFilter::default()).await.expect("list");
    assert_eq!(total, 3);
    assert_eq!(kept.iter().map(|r| r.id).collect::<Vec<_>>(), [ids[4], ids[3], ids[2]]);
}

pub async fn audit_records_never_fail_concurrent_writes(url: &str) {
    let store = open(url).await;
    let mut tasks = Vec::new();
    for i in 0..12 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let key = crate::api::Key::tenant(format!("t{i}"));
            let created = crate::api::Store::create(&*store, key, super::tenant_draft("1.31.0", None)).await;
            let recorded = store.record(entry("dev", Some(&format!("t{i}")), 201)).await;
            (created.map(|_| ()), recorded.map(|_| ()))
        }));
    }
    for task in tasks {
        let (created, recorded) = task.await.expect("task");
        assert!(created.is_ok() && recorded.is_ok(), "{created:?} {recorded:?}");
    }
    assert_eq!(store.list(Page::default(), AuditFilter::default()).await.expect("list").1, 12);
}

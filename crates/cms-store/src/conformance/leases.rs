//! Conformance cases for work leases and fenced writes.

use std::time::Duration;

use cms_model::{Kind, Projected};
use serde_json::json;

use super::{open, tenant_draft};
use crate::FINALIZER_MACHINES;
use crate::api::{Deleted, Draft, Key, Store};
use crate::error::StoreError;
use crate::lease::Leases;

const LONG: Duration = Duration::from_secs(60);

fn lost(result: Result<impl std::fmt::Debug, StoreError>) -> bool {
    matches!(result, Err(StoreError::LeaseLost { .. }))
}

pub async fn leases_are_exclusive(url: &str) {
    let store = open(url).await;
    let name = || "tenant/a".to_string();
    let a = store.acquire_lease(name(), "replica-a".into(), LONG).await.expect("acquire");
    let a = a.expect("a free lease is taken");
    assert_eq!((a.name.as_str(), a.holder.as_str(), a.epoch), ("tenant/a", "replica-a", 1));
    assert!(a.expires_at > chrono::Utc::now() + chrono::Duration::seconds(30), "{a:?}");
    assert_eq!(store.acquire_lease(name(), "replica-b".into(), LONG).await.expect("acquire"), None);
    let again = store.acquire_lease(name(), "replica-a".into(), LONG).await.expect("acquire");
    assert_eq!(again.map(|lease| lease.epoch), Some(1), "the holder extends its lease in the same epoch");
    let other = store.acquire_lease("tenant/b".into(), "replica-b".into(), LONG).await.expect("acquire");
    assert_eq!(other.map(|lease| lease.epoch), Some(1), "leases are per name");

    let renewed = store.renew_lease(a.clone(), LONG).await.expect("renew");
    assert_eq!(renewed.epoch, 1);
    store.release_lease(a.clone()).await.expect("release");
    let b = store.acquire_lease(name(), "replica-b".into(), LONG).await.expect("acquire");
    let b = b.expect("a released lease is free");
    assert_eq!(b.epoch, 2, "a new holder, a new epoch");
    assert!(lost(store.renew_lease(a.clone(), LONG).await));
    assert_eq!(store.acquire_lease(name(), "replica-a".into(), LONG).await.expect("acquire"), None);
    store.release_lease(a).await.expect("releasing a lost lease does nothing");
    assert_eq!(store.acquire_lease(name(), "replica-c".into(), LONG).await.expect("acquire"), None);

    store.release_lease(b.clone()).await.expect("release");
    let back = store.acquire_lease(name(), "replica-b".into(), LONG).await.expect("acquire").expect("free");
    assert_eq!(back.epoch, 3, "taking a lease back after a release is a new epoch too");
    assert!(lost(store.renew_lease(b, LONG).await));
    let empty = store.acquire_lease(name(), String::new(), LONG).await;
    assert!(matches!(empty, Err(StoreError::Refused(_))), "{empty:?}");
}

pub async fn leases_expire_and_are_taken_over(url: &str) {
    let store = open(url).await;
    let short = Duration::from_millis(300);
    let a = store.acquire_lease("work".into(), "replica-a".into(), short).await.expect("acquire");
    let a = a.expect("taken");
    assert_eq!(store.acquire_lease("work".into(), "replica-b".into(), LONG).await.expect("acquire"), None);
    tokio::time::sleep(Duration::from_millis(600)).await;
    let b = store.acquire_lease("work".into(), "replica-b".into(), LONG).await.expect("acquire");
    assert_eq!(b.map(|lease| lease.epoch), Some(2), "an expired lease is taken over in a new epoch");
    assert!(lost(store.renew_lease(a, LONG).await), "the old holder cannot renew");

    let c = store.acquire_lease("idle".into(), "replica-c".into(), short).await.expect("acquire");
    let c = c.expect("taken");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let renewed = store.renew_lease(c, LONG).await.expect("an expired lease nobody took is renewed");
    assert_eq!(renewed.epoch, 1);
    assert!(renewed.expires_at > chrono::Utc::now() + chrono::Duration::seconds(30));
}

pub async fn fenced_writes_need_the_lease(url: &str) {
    let store = open(url).await;
    let t = Key::tenant("a");
    store.create(t.clone(), tenant_draft("1.31.0", None)).await.expect("tenant");
    let short = Duration::from_millis(300);
    let a = store.acquire_lease("tenant/a".into(), "replica-a".into(), short).await.expect("acquire");
    let fenced = store.fenced(a.expect("taken"));
    let status = fenced.update_status(t.clone(), json!({"phase": "provisioning"}), None).await;
    assert_eq!(status.expect("a held lease writes").resource_version, 2);
    let m = Key::child(Kind::Machine, "a", "m-1");
    let machine = Draft { spec: json!({"providerType": "metal"}), ..Draft::default() };
    fenced.create(m.clone(), machine.clone()).await.expect("machine");
    let item = Projected {
        tenant: "a".into(),
        kind: "Machine".into(),
        tf_type: "terraform_data".into(),
        name: "m-1".into(),
        spec: json!({}),
    };
    fenced.set_projection("a".into(), vec![item.clone()]).await.expect("projection");

    tokio::time::sleep(Duration::from_millis(600)).await;
    let revision = store.revision();
    let expired = fenced.update_status(t.clone(), json!({"phase": "failed"}), None).await;
    assert!(lost(expired), "an expired lease writes nothing, even before anyone takes it over");
    let b = store.acquire_lease("tenant/a".into(), "replica-b".into(), LONG).await.expect("acquire");
    let owner = store.fenced(b.clone().expect("taken over"));

    assert!(lost(fenced.update_status(t.clone(), json!({"phase": "failed"}), Some(2)).await));
    assert!(lost(fenced.update(t.clone(), tenant_draft("1.32.0", None), 2).await));
    assert!(lost(fenced.create(Key::child(Kind::Machine, "a", "m-2"), machine).await));
    assert!(lost(fenced.delete(m.clone()).await));
    assert!(lost(fenced.remove_finalizer(m.clone(), FINALIZER_MACHINES.into()).await));
    assert!(lost(fenced.set_projection("a".into(), Vec::new()).await));
    assert_eq!(store.revision(), revision, "a stale epoch logs no event");
    assert_eq!(store.get(&t).expect("tenant").resource_version, 2);
    assert!(store.get(&Key::child(Kind::Machine, "a", "m-2")).is_none());
    assert_eq!(store.projection(Some("a".into())).await.expect("read"), Some(vec![item]));
    assert!(fenced.get(&m).is_some(), "reads need no lease");

    assert!(matches!(owner.delete(m.clone()).await.expect("delete"), Deleted::Marked(_)));
    assert!(owner.remove_finalizer(m.clone(), FINALIZER_MACHINES.into()).await.expect("finalizer").is_none());
    owner.update_status(t.clone(), json!({"phase": "active"}), Some(2)).await.expect("the new holder writes");
    store.release_lease(b.expect("held")).await.expect("release");
    assert!(lost(owner.update_status(t, json!({"phase": "failed"}), None).await), "released, fenced out");
}

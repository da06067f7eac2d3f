//! The cap on a tenant's machines, summed inside the write's transaction:
//! concurrent writers cannot both pass it, and a tenant over a lowered cap
//! may still shrink.

use super::{body, group, group_names, open, open_with, tenant_draft};
use crate::api::{Draft, Key, Store};
use crate::error::StoreError;
use crate::sql::StoreOptions;
use cms_model::Kind;

fn group_draft(name: &str, count: u32) -> Draft {
    Draft { spec: group(name, count), ..Draft::default() }
}

fn is_over_the_cap(err: &StoreError, field: &str) -> bool {
    matches!(err, StoreError::Invalid { field: named, message } if named == field && message.contains("over the limit"))
}

pub async fn concurrent_group_creates_share_the_machine_cap(url: &str) {
    let options = StoreOptions { max_machines_per_tenant: 10, ..StoreOptions::new(url) };
    let store = open_with(url, options).await;
    store
        .create(Key::tenant("a"), tenant_draft("1.31.0", Some(vec![group("base", 2)])))
        .await
        .expect("tenant");
    // Each create fits alone (2 + 6 <= 10); any two together do not.
    let attempts = (0..8).map(|i| {
        let store = store.clone();
        tokio::spawn(async move {
            let name = format!("g{i}");
            store.create(Key::child(Kind::NodeGroup, "a", name.clone()), group_draft(&name, 6)).await
        })
    });
    let mut wins = 0;
    for attempt in attempts {
        match attempt.await.expect("task") {
            Ok(_) => wins += 1,
            Err(err) if is_over_the_cap(&err, "spec.count") => {}
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(wins, 1, "one create passes the cap");
    assert_eq!(group_names(&body(store.as_ref(), &Key::tenant("a"))).len(), 2);
}

pub async fn the_machine_cap_refuses_growth_but_not_shrinking(url: &str) {
    let store = open(url).await;
    let t = Key::tenant("a");
    store.create(t.clone(), tenant_draft("1.31.0", Some(vec![group("w", 8)]))).await.expect("tenant");
    drop(store);
    let store = open_with(url, StoreOptions { max_machines_per_tenant: 5, ..StoreOptions::new(url) }).await;
    let w = Key::child(Kind::NodeGroup, "a", "w");
    let err = store.update(w.clone(), group_draft("w", 9), 1).await.expect_err("growing past the cap");
    assert!(is_over_the_cap(&err, "spec.count"), "{err:?}");
    let err = store
        .create(Key::child(Kind::NodeGroup, "a", "x"), group_draft("x", 1))
        .await
        .expect_err("a new group grows the sum");
    assert!(is_over_the_cap(&err, "spec.count"), "{err:?}");
    store.update(w.clone(), group_draft("w", 7), 1).await.expect("shrinking is allowed over the cap");
    let version = store.get(&t).expect("tenant").resource_version;
    let inline = tenant_draft("1.31.0", Some(vec![group("w", 4), group("y", 4)]));
    let err = store.update(t.clone(), inline, version).await.expect_err("inline groups over the cap");
    assert!(is_over_the_cap(&err, "spec.nodeGroups"), "{err:?}");
    let err = store
        .create(Key::tenant("b"), tenant_draft("1.31.0", Some(vec![group("w", 6)])))
        .await
        .expect_err("a new tenant over the cap");
    assert!(is_over_the_cap(&err, "spec.nodeGroups"), "{err:?}");
    assert!(store.get(&Key::tenant("b")).is_none(), "nothing of a refused create is written");
    let fits = tenant_draft("1.31.0", Some(vec![group("w", 2), group("y", 3)]));
    store.update(t, fits, version).await.expect("inline groups within the cap");
}

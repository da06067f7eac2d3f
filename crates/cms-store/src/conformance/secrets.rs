//! Conformance cases for tenants' sealed secrets: written in the tenant's
//! create transaction, read back as written, dropped with the
//! `service.io/secrets` finalizer and with the tenant's cascade.

use cms_model::Kind;
use serde_json::json;

use super::{group, open, tenant_draft};
use crate::api::{Draft, Key, Store};
use crate::error::StoreError;
use crate::{FINALIZER_MACHINES, FINALIZER_SECRETS};

fn sealed(tenant: &str) -> Vec<u8> {
    format!("sealed bundle of {tenant}").into_bytes()
}

fn with_secrets(mut draft: Draft, tenant: &str) -> Draft {
    draft.secrets = Some(sealed(tenant));
    draft
}

pub async fn secrets_are_written_with_the_tenant(url: &str) {
    let store = open(url).await;
    assert_eq!(store.secrets("a".into()).await.expect("read"), None);
    store.create(Key::tenant("a"), with_secrets(tenant_draft("1.31.0", None), "a")).await.expect("a");
    assert_eq!(store.secrets("a".into()).await.expect("read"), Some(sealed("a")));
    store.create(Key::tenant("plain"), tenant_draft("1.31.0", None)).await.expect("no secrets");
    assert_eq!(store.secrets("plain".into()).await.expect("read"), None);

    let again = store.create(Key::tenant("a"), with_secrets(tenant_draft("1.31.0", None), "other")).await;
    assert!(matches!(again, Err(StoreError::AlreadyExists(_))), "{again:?}");
    assert_eq!(
        store.secrets("a".into()).await.expect("read"),
        Some(sealed("a")),
        "a duplicate writes nothing"
    );

    let broken = with_secrets(tenant_draft("1.31.0", Some(vec![json!({"role": "worker"})])), "b");
    let failed = store.create(Key::tenant("b"), broken).await;
    assert!(matches!(failed, Err(StoreError::Refused(_))), "{failed:?}");
    assert!(store.get(&Key::tenant("b")).is_none());
    assert_eq!(store.secrets("b".into()).await.expect("read"), None, "a failed create leaves no secrets");

    let patch = Draft { spec: json!({"format": "strategic", "patches": [{}]}), ..Draft::default() };
    let child = store.create(Key::child(Kind::ConfigPatch, "a", "p"), with_secrets(patch, "p")).await;
    assert!(matches!(child, Err(StoreError::Refused(_))), "only tenants carry secrets: {child:?}");

    let updated = store.update(Key::tenant("a"), with_secrets(tenant_draft("1.31.1", None), "x"), 1).await;
    updated.expect("update");
    assert_eq!(store.secrets("a".into()).await.expect("read"), Some(sealed("a")), "updates keep the secrets");
    let tenant = String::from_utf8_lossy(&store.get(&Key::tenant("a")).expect("a").json).into_owned();
    assert!(!tenant.contains("sealed bundle"), "secrets never show in the resource: {tenant}");
    let reopened = open(url).await;
    assert_eq!(reopened.secrets("a".into()).await.expect("read"), Some(sealed("a")));
}

pub async fn secrets_go_with_their_finalizer(url: &str) {
    let store = open(url).await;
    for name in ["a", "b"] {
        let draft = with_secrets(tenant_draft("1.31.0", Some(vec![group("g", 1)])), name);
        store.create(Key::tenant(name), draft).await.expect("create");
    }
    let a = Key::tenant("a");
    let kept = store.remove_finalizer(a.clone(), FINALIZER_SECRETS.into()).await.expect("not deleting");
    assert!(kept.is_some());
    assert_eq!(store.secrets("a".into()).await.expect("read"), Some(sealed("a")), "no finalizer, no drop");

    store.delete(a.clone()).await.expect("delete");
    assert_eq!(store.secrets("a".into()).await.expect("read"), Some(sealed("a")), "deleting keeps them");
    let left = store.remove_finalizer(a.clone(), FINALIZER_SECRETS.into()).await.expect("secrets");
    assert!(left.is_some(), "the machines finalizer holds the tenant");
    assert_eq!(store.secrets("a".into()).await.expect("read"), None, "dropped with their finalizer");
    assert!(store.remove_finalizer(a.clone(), FINALIZER_MACHINES.into()).await.expect("last").is_none());

    let b = Key::tenant("b");
    store.delete(b.clone()).await.expect("delete");
    store.remove_finalizer(b.clone(), FINALIZER_MACHINES.into()).await.expect("machines");
    assert_eq!(store.secrets("b".into()).await.expect("read"), Some(sealed("b")));
    assert!(store.remove_finalizer(b.clone(), FINALIZER_SECRETS.into()).await.expect("last").is_none());
    assert_eq!(store.secrets("b".into()).await.expect("read"), None, "dropped with the tenant");

    store.create(a.clone(), tenant_draft("1.31.0", None)).await.expect("the name is free again");
    assert_eq!(store.secrets("a".into()).await.expect("read"), None, "a new tenant inherits nothing");
}

pub async fn sealed_blobs_page_and_swap_only_when_unchanged(url: &str) {
    use crate::sealed::Sealed;
    let store = open(url).await;
    for name in ["c", "a", "b", "d"] {
        store.create(Key::tenant(name), with_secrets(tenant_draft("1.31.0", None), name)).await.expect(name);
    }
    let first = store.sealed_secrets(None, 3).await.expect("a page");
    let names: Vec<&str> = first.iter().map(|(tenant, _)| tenant.as_str()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert_eq!(first[0].1, sealed("a"));
    let rest = store.sealed_secrets(Some("c".into()), 3).await.expect("the next page");
    assert_eq!(rest, vec![("d".to_string(), sealed("d"))]);

    let new = b"sealed again".to_vec();
    assert!(store.replace_secrets("a".into(), sealed("a"), new.clone()).await.expect("swap"));
    assert!(
        !store.replace_secrets("a".into(), sealed("a"), b"twice".to_vec()).await.expect("no second swap")
    );
    assert!(!store.replace_secrets("zz".into(), sealed("zz"), new.clone()).await.expect("none"));
    assert_eq!(store.secrets("a".into()).await.expect("read"), Some(new));
    assert_eq!(store.secrets("b".into()).await.expect("read"), Some(sealed("b")), "others untouched");

    assert_eq!(store.setting("active".into()).await.expect("read"), None);
    store.put_setting("active".into(), "k1".into()).await.expect("set");
    store.put_setting("active".into(), "k2".into()).await.expect("set again");
    assert_eq!(store.setting("active".into()).await.expect("read").as_deref(), Some("k2"));
    assert!(store.replace_setting("active".into(), "k2".into(), "k3".into()).await.expect("swap"));
    assert!(!store.replace_setting("active".into(), "k2".into(), "k4".into()).await.expect("stale"));
    assert!(!store.replace_setting("missing".into(), "a".into(), "b".into()).await.expect("absent"));
    assert_eq!(store.setting("active".into()).await.expect("read").as_deref(), Some("k3"));
}

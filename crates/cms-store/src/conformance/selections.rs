//! Conformance cases for lists by label selector: the matches counted and
//! paged, scoped to a tenant, following label changes and a reopen.

use std::collections::BTreeMap;

use cms_model::{Kind, LabelSelector, Page};
use serde_json::json;

use super::{open, tenant_draft};
use crate::api::{Draft, Key, Store};

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(key, value)| (key.to_string(), value.to_string())).collect()
}

/// The names and total of a selection.
fn select(store: &dyn Store, kind: Kind, tenant: Option<&str>, text: &str, page: Page) -> (Vec<String>, u64) {
    let selector = LabelSelector::parse(text).expect("a valid selector");
    let listing = store.select(kind, tenant.map(str::to_string), &selector, page);
    (listing.items.iter().map(|object| object.key.name.clone()).collect(), listing.total)
}

pub async fn selections_count_and_page_the_matches(url: &str) {
    let store = open(url).await;
    let tenants: [(&str, &[(&str, &str)]); 5] = [
        ("t1", &[("team", "a"), ("env", "prod")]),
        ("t2", &[("team", "a"), ("env", "dev")]),
        ("t3", &[("team", "b")]),
        ("t4", &[("team", "c"), ("env", "dev")]),
        ("t5", &[]),
    ];
    for (name, pairs) in tenants {
        let draft = Draft { labels: labels(pairs), ..tenant_draft("1.31.0", None) };
        store.create(Key::tenant(name), draft).await.expect("tenant");
    }
    let all = Page::default();
    let selector = "team in (a,b),env!=prod";
    assert_eq!(
        select(store.as_ref(), Kind::Tenant, None, selector, all),
        (vec!["t2".into(), "t3".into()], 2)
    );
    let second = Page { limit: 1, offset: 1 };
    assert_eq!(select(store.as_ref(), Kind::Tenant, None, selector, second), (vec!["t3".into()], 2));
    assert_eq!(select(store.as_ref(), Kind::Tenant, None, "!team", all), (vec!["t5".into()], 1));
    assert_eq!(select(store.as_ref(), Kind::Tenant, None, "", all).1, 5);

    // Children are selected within their tenant.
    for (tenant, name, team) in [("t1", "p1", "a"), ("t1", "p2", "b"), ("t2", "p1", "a")] {
        let draft = Draft {
            labels: labels(&[("team", team)]),
            spec: json!({"format": "strategic", "patches": [{}]}),
            ..Draft::default()
        };
        store.create(Key::child(Kind::ConfigPatch, tenant, name), draft).await.expect("patch");
    }
    let patches = |tenant| select(store.as_ref(), Kind::ConfigPatch, tenant, "team=a", all);
    assert_eq!(patches(Some("t1")), (vec!["p1".into()], 1));
    assert_eq!(patches(None), (vec!["p1".into(), "p1".into()], 2));

    // A label change moves a tenant in; a reopened store agrees.
    let t1 = store.get(&Key::tenant("t1")).expect("t1");
    let draft = Draft { labels: labels(&[("team", "b")]), ..tenant_draft("1.31.0", None) };
    store.update(Key::tenant("t1"), draft, t1.resource_version).await.expect("relabel");
    let expected = (vec!["t1".to_string(), "t2".to_string(), "t3".to_string()], 3);
    assert_eq!(select(store.as_ref(), Kind::Tenant, None, selector, all), expected);
    let again = open(url).await;
    assert_eq!(select(again.as_ref(), Kind::Tenant, None, selector, all), expected);
}

//! Conformance cases for the `ConfigPatchesResolved` condition, which the
//! writes compute in their own transaction.

use cms_model::Kind;
use cms_model::patch_refs::CONFIG_PATCHES_RESOLVED;
use serde_json::{Value, json};

use super::{body, event_of, group, next_event, open, tenant_draft};
use crate::api::{Draft, EventType, Key, Object, Store, WatchItem};

fn refs(names: &[&str]) -> Value {
    Value::Array(names.iter().map(|name| json!({"name": name})).collect())
}

/// A tenant whose spec refers to `tenant_refs`, with one node group `g`
/// that refers to `group_refs`.
fn draft_with_refs(tenant_refs: &[&str], group_refs: &[&str]) -> Draft {
    let mut draft = tenant_draft("1.31.0", Some(vec![group("g", 1)]));
    draft.spec["configPatches"] = refs(tenant_refs);
    draft.spec["nodeGroups"][0]["configPatches"] = refs(group_refs);
    draft
}

fn patch() -> Draft {
    Draft { spec: json!({"format": "strategic", "patches": [{}]}), ..Draft::default() }
}

/// The condition in a tenant's JSON, if any.
fn condition_in(tenant: &Value) -> Option<Value> {
    let conditions = tenant["status"]["conditions"].as_array()?;
    conditions.iter().find(|c| c["type"] == CONFIG_PATCHES_RESOLVED).cloned()
}

fn condition_of(object: &Object) -> Option<Value> {
    condition_in(&serde_json::from_slice(&object.json).expect("stored JSON"))
}

/// The next event on `watch`: `(type, name, object)`.
async fn next(watch: &mut crate::api::WatchStream) -> (EventType, String, std::sync::Arc<Object>) {
    match next_event(watch).await {
        WatchItem::Event(event) => (event.event_type, event.object.key.name.clone(), event.object),
        WatchItem::Synced(revision) => panic!("unexpected sync at {revision}"),
    }
}

/// (a) One tenant PUT is one tenant event, which already holds the
/// condition the PUT's refs call for.
pub async fn a_tenant_put_is_one_event_with_the_condition(url: &str) {
    let store = open(url).await;
    let t = Key::tenant("a");
    store.create(t.clone(), tenant_draft("1.31.0", Some(vec![group("g", 1)]))).await.expect("create");
    store.create(Key::child(Kind::ConfigPatch, "a", "p"), patch()).await.expect("patch");
    let mark = store.revision();
    let updated = store.update(t.clone(), draft_with_refs(&["p"], &["q"]), 1).await.expect("update");
    assert_eq!(updated.resource_version, 2, "one bump");
    let condition = condition_of(&updated).expect("the answer holds the condition");
    assert_eq!(
        (condition["status"].as_str(), condition["reason"].as_str()),
        (Some("False"), Some("ConfigPatchNotFound"))
    );
    store.create(Key::tenant("z"), tenant_draft("1.31.0", None)).await.expect("marker");
    let mut watch = store.watch(Kind::Tenant, Some(mark)).await.expect("watch");
    let (event_type, name, object) = next(&mut watch).await;
    assert_eq!((event_type, name.as_str()), (EventType::Modified, "a"));
    assert_eq!(condition_of(&object), Some(condition.clone()), "the event holds the condition");
    let message = condition["message"].as_str().unwrap_or_default();
    assert!(message.contains(r#""q" (referenced by node group "g")"#), "{message}");
    assert_eq!(event_of(next_event(&mut watch).await).1, "z", "no second event for the tenant");
}

/// (b) A create answers with the condition; creating the missing patch and
/// deleting it again flip it, each in the patch's own transaction.
pub async fn the_condition_follows_the_patches(url: &str) {
    let store = open(url).await;
    let t = Key::tenant("a");
    let created = store.create(t.clone(), draft_with_refs(&["p"], &[])).await.expect("create");
    assert_eq!(condition_of(&created).expect("set on create")["status"], "False");
    let mark = store.revision();
    let p = Key::child(Kind::ConfigPatch, "a", "p");
    store.create(p.clone(), patch()).await.expect("patch");
    assert_eq!(store.revision(), mark + 2, "the patch's ADDED and one tenant MODIFIED");
    let mut patches = store.watch(Kind::ConfigPatch, Some(mark)).await.expect("watch patches");
    assert_eq!(event_of(next_event(&mut patches).await), (EventType::Added, "p".to_string(), mark + 1));
    let mut tenants = store.watch(Kind::Tenant, Some(mark)).await.expect("watch tenants");
    let (event_type, _, object) = next(&mut tenants).await;
    assert_eq!((event_type, object.resource_version), (EventType::Modified, 2));
    let resolved = condition_of(&object).expect("condition");
    assert_eq!((resolved["status"].as_str(), resolved["reason"].as_str()), (Some("True"), Some("AllFound")));
    assert_eq!(condition_in(&body(store.as_ref(), &t)), Some(resolved.clone()));
    store.delete(p).await.expect("delete patch");
    let (_, _, object) = next(&mut tenants).await;
    let missing = condition_of(&object).expect("condition");
    assert_eq!(missing["status"], "False");
    assert!(missing["message"].as_str().unwrap_or_default().contains(r#""p" (referenced by the tenant)"#));
    assert_eq!(condition_in(&body(store.as_ref(), &t)), Some(missing));
    let g = Key::child(Kind::NodeGroup, "a", "h");
    let mut referring = group("h", 1);
    referring["configPatches"] = refs(&["r"]);
    store.create(g, Draft { spec: referring, ..Draft::default() }).await.expect("group");
    let message = condition_in(&body(store.as_ref(), &t)).expect("condition")["message"].clone();
    assert!(
        message.as_str().unwrap_or_default().contains(r#""r" (referenced by node group "h")"#),
        "{message}"
    );
}

/// (c) A status write that leaves the condition out, or says otherwise,
/// keeps the store's.
pub async fn status_writes_keep_the_condition(url: &str) {
    let store = open(url).await;
    let t = Key::tenant("a");
    store.create(t.clone(), draft_with_refs(&["p"], &[])).await.expect("create");
    store.create(Key::child(Kind::ConfigPatch, "a", "p"), patch()).await.expect("patch");
    let before = condition_in(&body(store.as_ref(), &t)).expect("condition");
    let version = store.get(&t).expect("tenant").resource_version;
    let written = store.update_status(t.clone(), json!({"phase": "active", "ready": true}), Some(version));
    let written = written.await.expect("status");
    assert_eq!(written.resource_version, version + 1, "one bump");
    assert_eq!(condition_of(&written), Some(before.clone()), "kept, transition time and all");
    let forged = json!({"phase": "failed", "conditions": [
        {"type": "Ready", "status": "False", "lastTransitionTime": "2020-01-01T00:00:00Z"},
        {"type": CONFIG_PATCHES_RESOLVED, "status": "False", "reason": "Made", "message": "up",
         "lastTransitionTime": "2020-01-01T00:00:00Z"}]});
    let written = store.update_status(t.clone(), forged, None).await.expect("status");
    let tenant = body(store.as_ref(), &t);
    assert_eq!(tenant["status"]["phase"], "failed");
    assert_eq!(tenant["status"]["conditions"][0]["type"], "Ready", "other conditions are the writer's");
    assert_eq!(condition_in(&tenant), Some(before));
    assert_eq!(condition_of(&written), condition_in(&tenant));
}

/// (d) A tenant that refers to no patch never carries the condition, and
/// its patches' writes leave it alone.
pub async fn tenants_without_refs_never_get_the_condition(url: &str) {
    let store = open(url).await;
    let t = Key::tenant("a");
    let created = store.create(t.clone(), tenant_draft("1.31.0", Some(vec![group("g", 1)]))).await;
    assert_eq!(condition_of(&created.expect("create")), None);
    let mark = store.revision();
    let p = Key::child(Kind::ConfigPatch, "a", "p");
    store.create(p.clone(), patch()).await.expect("patch");
    store.delete(p).await.expect("delete patch");
    assert_eq!(store.revision(), mark + 2, "no tenant events");
    store
        .create(Key::child(Kind::NodeGroup, "a", "h"), Draft { spec: group("h", 1), ..Draft::default() })
        .await
        .expect("group");
    store.update(t.clone(), tenant_draft("1.31.1", None), 2).await.expect("update");
    store.update_status(t.clone(), json!({"phase": "active"}), None).await.expect("status");
    assert_eq!(store.get(&t).expect("tenant").resource_version, 4);
    let tenant = body(store.as_ref(), &t);
    assert_eq!(condition_in(&tenant), None);
    assert!(!String::from_utf8_lossy(&store.get(&t).expect("tenant").json).contains(CONFIG_PATCHES_RESOLVED));
}

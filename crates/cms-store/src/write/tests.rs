//! The write rules on rows in memory: which rows and events each write
//! leaves, and the `ConfigPatchesResolved` condition they keep.

use std::collections::BTreeMap;

use cms_model::patch_refs::CONFIG_PATCHES_RESOLVED;
use serde_json::json;

use super::*;
use crate::entity::object;
use crate::view::{Base, Needs, Overlay};

const NOW: &str = "2026-11-22T00:00:00.000Z";
const LATER: &str = "2026-11-22T00:01:00.000Z";

/// The rows of a store, changed by one write at a time.
#[derive(Default)]
struct Rows(BTreeMap<Key, object::Model>);

impl Rows {
    /// Runs `rule` on a view of the rows at `now` and keeps what it changed;
    /// returns its result and its events as `(type, "Kind/name")`.
    fn run<T>(
        &mut self,
        now: &str,
        rule: impl FnOnce(&mut View<'_>) -> Result<T, StoreError>,
    ) -> (T, Vec<(EventType, String)>, Vec<Arc<Object>>) {
        let batch = Overlay::new();
        let base = Base::whole(self.0.clone());
        let mut view = View::new(&base, &batch, now);
        let out = rule(&mut view).expect("the write");
        let outcome = view.finish().expect("its events");
        for (key, row) in outcome.rows {
            match row {
                Some(row) => self.0.insert(key, row),
                None => self.0.remove(&key),
            };
        }
        let summary = outcome
            .events
            .iter()
            .map(|(event_type, object)| (*event_type, format!("{}/{}", object.key.kind, object.key.name)))
            .collect();
        (out, summary, outcome.events.into_iter().map(|(_, object)| object).collect())
    }

    fn create(&mut self, now: &str, key: &Key, draft: Draft) -> (Arc<Object>, Vec<(EventType, String)>) {
        let (object, events, _) = self.run(now, |view| create(view, key, &draft));
        (object, events)
    }
}

fn refs(names: &[&str]) -> Value {
    Value::Array(names.iter().map(|name| json!({"name": name})).collect())
}

fn tenant(tenant_refs: &[&str], group_refs: &[&str]) -> Draft {
    let spec = json!({"kubernetesVersion": "1.31.0", "configPatches": refs(tenant_refs),
                      "nodeGroups": [{"name": "w", "configPatches": refs(group_refs)}]});
    Draft { spec, ..Draft::default() }
}

fn draft(spec: Value) -> Draft {
    Draft { spec, ..Draft::default() }
}

fn patch(name: &str) -> Key {
    Key::child(Kind::ConfigPatch, "a", name)
}

/// The condition in an object's status, if any.
fn condition(object: &Object) -> Option<Value> {
    let body: Value = serde_json::from_slice(&object.json).expect("JSON");
    let conditions = body["status"]["conditions"].as_array()?.clone();
    conditions.into_iter().find(|c| c["type"] == CONFIG_PATCHES_RESOLVED)
}

fn state(object: &Object) -> (String, String) {
    let condition = condition(object).expect("the condition");
    let text = |field: &str| condition[field].as_str().unwrap_or_default().to_string();
    (text("status"), text("lastTransitionTime"))
}

fn added(kind_name: &str) -> (EventType, String) {
    (EventType::Added, kind_name.to_string())
}

fn modified(kind_name: &str) -> (EventType, String) {
    (EventType::Modified, kind_name.to_string())
}

#[test]
fn a_tenant_starts_with_the_condition_the_store_computes() {
    let mut rows = Rows::default();
    let mut draft = tenant(&["p"], &["q"]);
    let forged = json!({"type": CONFIG_PATCHES_RESOLVED, "status": "True", "reason": "AllFound",
                        "message": "", "lastTransitionTime": "2020-01-01T00:00:00Z"});
    draft.status = Some(json!({"phase": "pending", "conditions": [forged]}));
    let (object, events) = rows.create(NOW, &Key::tenant("a"), draft);
    assert_eq!(events, [added("Tenant/a"), added("NodeGroup/w")]);
    assert_eq!(object.resource_version, 1);
    assert_eq!(state(&object), ("False".into(), "2026-11-22T00:00:00Z".into()));
    let message = condition(&object).expect("condition")["message"].clone();
    assert_eq!(
        message,
        r#"config patches not found: "p" (referenced by the tenant), "q" (referenced by node group "w")"#
    );
}

#[test]
fn patch_writes_move_the_condition_in_their_own_write() {
    let mut rows = Rows::default();
    rows.create(NOW, &Key::tenant("a"), tenant(&["p"], &["q"]));
    let (_, events) = rows.create(LATER, &patch("p"), draft(json!({"patches": []})));
    assert_eq!(events, [added("ConfigPatch/p"), modified("Tenant/a")]);
    let (_, events) = rows.create(LATER, &patch("q"), draft(json!({"patches": []})));
    assert_eq!(events, [added("ConfigPatch/q"), modified("Tenant/a")]);
    let tenant_now = |rows: &mut Rows| rows.run(LATER, |view| view.render(&Key::tenant("a"))).0;
    let resolved = tenant_now(&mut rows);
    assert_eq!(resolved.resource_version, 3);
    assert_eq!(state(&resolved), ("True".into(), "2026-11-22T00:01:00Z".into()));
    let (_, events, _) =
        rows.run(LATER, |view| update(view, &patch("p"), &draft(json!({"patches": [{}]})), 1));
    assert_eq!(events, [modified("ConfigPatch/p")], "a patch's content changes no ref");
    let (_, events, objects) = rows.run(LATER, |view| delete(view, &patch("q")));
    assert_eq!(events, [(EventType::Deleted, "ConfigPatch/q".to_string()), modified("Tenant/a")]);
    assert_eq!(state(&objects[1]).0, "False");
}

#[test]
fn a_tenant_update_is_one_tenant_event_holding_the_condition() {
    let mut rows = Rows::default();
    rows.create(NOW, &Key::tenant("a"), tenant(&[], &[]));
    rows.create(NOW, &patch("p"), draft(json!({})));
    let (answer, events, objects) =
        rows.run(LATER, |view| update(view, &Key::tenant("a"), &tenant(&["p"], &["x"]), 1));
    assert_eq!(events, [modified("NodeGroup/w"), modified("Tenant/a")]);
    assert_eq!(answer.resource_version, 2, "one bump");
    assert_eq!(condition(&objects[1]), condition(&answer));
    assert_eq!(state(&answer).0, "False");
    let (answer, events, _) = rows.run(LATER, |view| update(view, &Key::tenant("a"), &tenant(&[], &[]), 2));
    assert_eq!(events, [modified("NodeGroup/w"), modified("Tenant/a")]);
    assert_eq!(condition(&answer), None, "no refs, no condition");
}

#[test]
fn node_group_writes_move_the_condition() {
    let mut rows = Rows::default();
    rows.create(NOW, &Key::tenant("a"), tenant(&[], &[]));
    let group = Key::child(Kind::NodeGroup, "a", "h");
    let (_, events, objects) = rows
        .run(NOW, |view| create(view, &group, &draft(json!({"name": "h", "configPatches": refs(&["p"])}))));
    assert_eq!(events, [added("NodeGroup/h"), modified("Tenant/a")]);
    assert_eq!(state(&objects[1]).0, "False");
    let (_, events, objects) = rows.run(NOW, |view| delete(view, &group));
    assert_eq!(events, [(EventType::Deleted, "NodeGroup/h".to_string()), modified("Tenant/a")]);
    assert_eq!(condition(&objects[1]), None);
}

#[test]
fn status_writes_keep_the_stored_condition() {
    let mut rows = Rows::default();
    let (created, _) = rows.create(NOW, &Key::tenant("a"), tenant(&["p"], &[]));
    let key = Key::tenant("a");
    let status = json!({"phase": "active", "conditions": [{"type": "Ready", "status": "True",
                        "lastTransitionTime": "2020-01-01T00:00:00Z"}]});
    let (answer, events, _) = rows.run(LATER, |view| update_status(view, &key, &status, None));
    assert_eq!(events, [modified("Tenant/a")]);
    assert_eq!(answer.resource_version, 2);
    assert_eq!(condition(&answer), condition(&created), "kept as it was");
    let body: Value = serde_json::from_slice(&answer.json).expect("JSON");
    assert_eq!(body["status"]["conditions"][0]["type"], "Ready");
    assert_eq!(body["status"]["phase"], "active");
}

#[test]
fn without_refs_nothing_touches_the_tenant() {
    let mut rows = Rows::default();
    let (created, _) = rows.create(NOW, &Key::tenant("a"), tenant(&[], &[]));
    assert_eq!(condition(&created), None);
    let (_, events) = rows.create(NOW, &patch("p"), draft(json!({})));
    assert_eq!(events, [added("ConfigPatch/p")]);
    let machine = Key::child(Kind::Machine, "a", "m");
    let (_, events) = rows.create(NOW, &machine, draft(json!({})));
    assert_eq!(events, [added("Machine/m")]);
    let status = json!({"phase": "active"});
    let (answer, _, _) = rows.run(NOW, |view| update_status(view, &Key::tenant("a"), &status, Some(1)));
    assert!(!String::from_utf8_lossy(&answer.json).contains(CONFIG_PATCHES_RESOLVED));
}

/// The rows a batch reads first for a write on `key`: its tenant, the
/// tenant's node groups, and `key`.
fn read_for(rows: &Rows, key: &Key) -> Base {
    let tenant = key.owner();
    let mut base = Base::default();
    base.add_key(tenant.clone(), rows.0.get(&tenant).cloned());
    let groups = rows.0.iter().filter(|(k, _)| k.kind == Kind::NodeGroup && k.tenant == tenant.name);
    base.add_range(&tenant.name, Kind::NodeGroup, groups.map(|(k, row)| (k.clone(), row.clone())).collect());
    base.add_key(key.clone(), rows.0.get(key).cloned());
    base
}

/// Runs `rule` on `base` and returns what it needed and whether it succeeded.
fn needs_of<T>(base: &Base, rule: impl FnOnce(&mut View<'_>) -> Result<T, StoreError>) -> (Needs, bool) {
    let batch = Overlay::new();
    let mut view = View::new(base, &batch, LATER);
    let ok = rule(&mut view).is_ok();
    (view.take_needs(), ok)
}

/// A tenant `a` with `count` config patches.
fn crowded(tenant_draft: Draft, count: usize) -> Rows {
    let mut rows = Rows::default();
    rows.create(NOW, &Key::tenant("a"), tenant_draft);
    for index in 0..count {
        rows.create(NOW, &patch(&format!("p-{index}")), draft(json!({})));
    }
    rows
}

#[test]
fn a_write_needs_its_row_its_tenant_and_its_node_groups_only() {
    let rows = crowded(tenant(&[], &[]), 500);
    let new = patch("new");
    let (needs, ok) = needs_of(&read_for(&rows, &new), |view| create(view, &new, &draft(json!({}))));
    assert_eq!((needs, ok), (Needs::default(), true), "a create among 500 patches");
    let old = patch("p-7");
    let (needs, ok) =
        needs_of(&read_for(&rows, &old), |view| update(view, &old, &draft(json!({"patches": []})), 1));
    assert_eq!((needs, ok), (Needs::default(), true), "an update");
    let (needs, ok) = needs_of(&read_for(&rows, &old), |view| delete(view, &old));
    assert_eq!((needs, ok), (Needs::default(), true), "a delete");
    let key = Key::tenant("a");
    let (needs, ok) = needs_of(&read_for(&rows, &key), |view| update(view, &key, &tenant(&[], &[]), 1));
    assert_eq!((needs, ok), (Needs::default(), true), "a tenant's update");
}

#[test]
fn refs_need_the_patches_they_name_and_no_other() {
    let rows = crowded(tenant(&["p-1"], &["q"]), 100);
    let new = patch("new");
    let mut base = read_for(&rows, &new);
    let (needs, _) = needs_of(&base, |view| create(view, &new, &draft(json!({}))));
    let wanted = Needs { keys: [patch("p-1"), patch("q")].into(), ranges: Default::default() };
    assert_eq!(needs, wanted);
    base.add_key(patch("p-1"), rows.0.get(&patch("p-1")).cloned());
    base.add_key(patch("q"), None);
    let batch = Overlay::new();
    let mut view = View::new(&base, &batch, LATER);
    create(&mut view, &new, &draft(json!({}))).expect("the create");
    assert!(view.take_needs().is_empty());
    let tenant = view.render(&Key::tenant("a")).expect("the tenant");
    assert_eq!(state(&tenant).0, "False");
    let message = condition(&tenant).expect("the condition")["message"].clone();
    assert_eq!(message, r#"config patches not found: "q" (referenced by node group "w")"#);
}

#[test]
fn removing_a_tenant_needs_every_row_inside_it() {
    let mut rows = crowded(tenant(&[], &[]), 3);
    let key = Key::tenant("a");
    rows.run(NOW, |view| delete(view, &key));
    rows.run(NOW, |view| clear(view, &key, FINALIZER_MACHINES));
    let (needs, _) = needs_of(&read_for(&rows, &key), |view| clear(view, &key, FINALIZER_SECRETS));
    let kinds: Vec<Kind> =
        needs.ranges.iter().filter_map(|(tenant, kind)| (tenant == "a").then_some(*kind)).collect();
    assert_eq!(kinds, [Kind::ConfigPatch, Kind::Machine], "node groups were read already");
}

//! The write rules: every write as a function of the rows of one tenant, as
//! a [`View`] shows them. Pure: [`crate::commit`] hands them to the batch
//! writer of [`crate::batch`], which reads the rows they look at, runs the rules and
//! writes what they changed in one transaction.
//!
//! A write that can change which config patch refs resolve (a tenant's refs,
//! its node groups, its set of config patches) or that replaces a tenant's
//! status ends by recomputing the tenant's `ConfigPatchesResolved` condition
//! ([`crate::refs`]) in the same view.
//!
//! A write of a tenant or a node group is held to the cap on the tenant's
//! machines ([`machines_within`]), summed in the same view, so that two
//! writers at once cannot both pass it.

use std::sync::Arc;

use cms_model::Kind;
use serde_json::Value;

use crate::api::{Deleted, Draft, EventType, Key, Object};
use crate::error::StoreError;
use crate::refs;
use crate::render::{json, map_text};
use crate::rows;
use crate::view::{Side, View};
use crate::{FINALIZER_MACHINES, FINALIZER_SECRETS};

/// Runs `rule`, a write of `key`, and refuses it when it leaves the tenant
/// with more machines (the sum of its node groups' counts) than `max` and
/// more than before: a tenant over a lowered cap may still shrink.
pub(crate) fn machines_within<T>(
    view: &mut View<'_>,
    key: &Key,
    max: u64,
    rule: impl FnOnce(&mut View<'_>) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    if !matches!(key.kind, Kind::Tenant | Kind::NodeGroup) {
        return rule(view);
    }
    let tenant = key.owner().name;
    let before = machines(view, &tenant)?;
    let out = rule(view)?;
    let after = machines(view, &tenant)?;
    if after > max && after > before {
        let field = match key.kind {
            Kind::NodeGroup => "spec.count",
            _ => "spec.nodeGroups",
        };
        let message = format!(
            "tenant {tenant:?} would have {after} machines (the sum of its node groups' counts), \
             over the limit of {max} per tenant"
        );
        return Err(StoreError::Invalid { field: field.to_string(), message });
    }
    Ok(out)
}

/// The sum of the counts of the node groups of `tenant`.
fn machines(view: &View<'_>, tenant: &str) -> Result<u64, StoreError> {
    let mut sum = 0u64;
    for row in view.children(tenant, Some(Kind::NodeGroup)) {
        let spec = json::<Value>(&row.spec)?;
        sum = sum.saturating_add(spec.get("count").and_then(Value::as_u64).unwrap_or(0));
    }
    Ok(sum)
}

/// Creates the object of `key`; a tenant with its inline node groups and
/// sealed secrets.
pub(crate) fn create(view: &mut View<'_>, key: &Key, draft: &Draft) -> Result<Arc<Object>, StoreError> {
    if view.find(key).is_some() {
        return Err(StoreError::AlreadyExists(key.to_string()));
    }
    let (spec, groups) = rows::split_groups(key.kind, draft.spec.clone())?;
    match (key.kind, &draft.secrets) {
        (Kind::Tenant, Some(sealed)) => view.side(Side::Secrets(key.name.clone(), sealed.clone())),
        (Kind::Tenant, None) => {}
        (_, Some(_)) => return Err(StoreError::Refused(format!("{key} cannot carry secrets"))),
        (_, None) => live_owner(view, key)?,
    }
    let mut status = draft.status.clone().unwrap_or_else(|| rows::default_status(key.kind));
    if key.kind == Kind::Tenant {
        // The store computes the condition below; the caller's does not count.
        refs::carry_condition(&mut status, None, key)?;
    }
    let row = rows::new_row(key, &draft.labels, &draft.annotations, &spec, &status, view.now());
    view.insert(key, row)?;
    view.changed(EventType::Added, key.clone());
    for group in groups.unwrap_or_default() {
        let group_key = Key::child(Kind::NodeGroup, &key.name, rows::group_name(&group)?);
        insert_group(view, group_key, &group)?;
    }
    if key.kind == Kind::NodeGroup {
        touch_owner(view, key)?;
    }
    if key.kind != Kind::Machine {
        refs::resolve(view, &key.owner().name)?;
    }
    view.render(key)
}

/// Replaces the spec, labels and annotations of the object of `key` at
/// resource version `expected`; a tenant's `nodeGroups`, when given, replace
/// its node groups.
pub(crate) fn update(
    view: &mut View<'_>,
    key: &Key,
    draft: &Draft,
    expected: u64,
) -> Result<Arc<Object>, StoreError> {
    let row = view.get(key)?;
    if row.resource_version as u64 != expected {
        let current = row.resource_version as u64;
        return Err(StoreError::Conflict { what: key.to_string(), expected, current });
    }
    let deleting = row.deletion_timestamp.is_some();
    let old_spec = json::<Value>(&row.spec)?;
    if key.kind != Kind::Tenant && !deleting {
        live_owner(view, key)?;
    }
    let (spec, groups) = rows::split_groups(key.kind, draft.spec.clone())?;
    // An object being deleted keeps its spec; its labels and annotations
    // may still change, as in Kubernetes (the reconciler records a
    // replaced machine's way out in them).
    if deleting && (old_spec != spec || groups.is_some()) {
        return Err(StoreError::Refused(format!("{key} is being deleted")));
    }
    let plan = match groups {
        Some(groups) => GroupPlan::new(view, &key.name, groups)?,
        None => GroupPlan::default(),
    };
    let changed = old_spec != spec || !plan.is_empty();
    let (labels, annotations) = (map_text(&draft.labels), map_text(&draft.annotations));
    let now = view.now().to_string();
    view.update(key, expected as i64, |row| {
        row.spec = spec.to_string();
        row.labels = labels;
        row.annotations = annotations;
        row.updated_at = now;
        if changed {
            row.generation += 1;
        }
    })?;
    plan.apply(view)?;
    view.changed(EventType::Modified, key.clone());
    if key.kind == Kind::NodeGroup && changed {
        touch_owner(view, key)?;
    }
    if matches!(key.kind, Kind::Tenant | Kind::NodeGroup) {
        refs::resolve(view, &key.owner().name)?;
    }
    view.render(key)
}

/// Replaces the status of the object of `key`, at resource version
/// `expected` when given. A tenant keeps the `ConfigPatchesResolved`
/// condition the store computes, whatever `status` says of it.
pub(crate) fn update_status(
    view: &mut View<'_>,
    key: &Key,
    status: &Value,
    expected: Option<u64>,
) -> Result<Arc<Object>, StoreError> {
    let row = view.get(key)?;
    let expected = match expected {
        Some(expected) => expected as i64,
        None => row.resource_version,
    };
    let status = match key.kind {
        Kind::Tenant => {
            let mut status = status.clone();
            refs::carry_condition(&mut status, Some(&row.status), key)?;
            status.to_string()
        }
        _ => status.to_string(),
    };
    let now = view.now().to_string();
    view.update(key, expected, |row| {
        row.status = status;
        row.updated_at = now;
    })?;
    view.changed(EventType::Modified, key.clone());
    if key.kind == Kind::Tenant {
        refs::resolve(view, &key.name)?;
    }
    view.render(key)
}

/// Deletes the object of `key`: node groups and config patches go at once;
/// tenants and machines are marked, with their finalizers.
pub(crate) fn delete(view: &mut View<'_>, key: &Key) -> Result<Deleted, StoreError> {
    let row = view.get(key)?;
    let finalizers: &[&str] = match key.kind {
        Kind::Tenant => &[FINALIZER_MACHINES, FINALIZER_SECRETS],
        Kind::Machine => &[FINALIZER_MACHINES],
        Kind::NodeGroup | Kind::ConfigPatch => {
            view.remove(key)?;
            if key.kind == Kind::NodeGroup {
                touch_owner(view, key)?;
            }
            refs::resolve(view, &key.tenant)?;
            return Ok(Deleted::Removed);
        }
    };
    if row.deletion_timestamp.is_none() {
        let version = row.resource_version;
        let now = view.now().to_string();
        view.update(key, version, |row| {
            row.deletion_timestamp = Some(now.clone());
            row.finalizers = serde_json::json!(finalizers).to_string();
            row.updated_at = now;
        })?;
        view.changed(EventType::Modified, key.clone());
    }
    Ok(Deleted::Marked(view.render(key)?))
}

/// Clears `finalizer` from the object of `key`; a deleting object left with
/// none is removed, a tenant with everything in it.
pub(crate) fn clear(
    view: &mut View<'_>,
    key: &Key,
    finalizer: &str,
) -> Result<Option<Arc<Object>>, StoreError> {
    let row = view.get(key)?;
    let (version, deleting) = (row.resource_version, row.deletion_timestamp.is_some());
    let mut finalizers: Vec<String> = json(&row.finalizers)?;
    let before = finalizers.len();
    finalizers.retain(|f| f != finalizer);
    if key.kind == Kind::Tenant && finalizer == FINALIZER_SECRETS && finalizers.len() != before {
        view.side(Side::DropSecrets(key.name.clone()));
    }
    if finalizers.is_empty() && deleting {
        let last = view.render(key)?;
        if key.kind == Kind::Tenant {
            for child in view.keys_inside(&key.name, None) {
                view.remove(&child)?;
            }
            view.side(Side::DropProjection(key.name.clone()));
            view.side(Side::DropSecrets(key.name.clone()));
        }
        view.remove_as(key, last);
        return Ok(None);
    }
    if finalizers.len() != before {
        let now = view.now().to_string();
        view.update(key, version, |row| {
            row.finalizers = serde_json::json!(finalizers).to_string();
            row.updated_at = now;
        })?;
        view.changed(EventType::Modified, key.clone());
    }
    Ok(Some(view.render(key)?))
}

/// The tenant that `key` lives in, which must exist and not be deleting.
fn live_owner(view: &View<'_>, key: &Key) -> Result<(), StoreError> {
    let owner = view.get(&key.owner())?;
    if owner.deletion_timestamp.is_some() {
        return Err(StoreError::Refused(format!("tenant {:?} is being deleted", owner.name)));
    }
    Ok(())
}

/// Records that a tenant's spec changed through one of its node groups.
fn touch_owner(view: &mut View<'_>, key: &Key) -> Result<(), StoreError> {
    let owner = key.owner();
    let version = view.get(&owner)?.resource_version;
    let now = view.now().to_string();
    view.update(&owner, version, |row| {
        row.generation += 1;
        row.updated_at = now;
    })?;
    view.changed(EventType::Modified, owner);
    Ok(())
}

fn insert_group(view: &mut View<'_>, key: Key, spec: &Value) -> Result<(), StoreError> {
    let status = rows::default_status(Kind::NodeGroup);
    let row = rows::new_row(&key, &Default::default(), &Default::default(), spec, &status, view.now());
    view.insert(&key, row)?;
    view.changed(EventType::Added, key);
    Ok(())
}

/// How a tenant update changes its set of node groups.
#[derive(Default)]
struct GroupPlan {
    added: Vec<(Key, Value)>,
    changed: Vec<(Key, i64, Value)>,
    removed: Vec<Key>,
}

impl GroupPlan {
    fn new(view: &View<'_>, tenant: &str, wanted: Vec<Value>) -> Result<GroupPlan, StoreError> {
        let mut current = view.children(tenant, Some(Kind::NodeGroup));
        let mut plan = GroupPlan::default();
        for spec in wanted {
            let key = Key::child(Kind::NodeGroup, tenant, rows::group_name(&spec)?);
            match current.iter().position(|row| row.name == key.name) {
                Some(index) => {
                    let row = current.swap_remove(index);
                    // Specs are stored as a value's text, whose keys are in
                    // order: equal text is an equal spec, and spares a parse.
                    let text = spec.to_string();
                    if row.spec != text && json::<Value>(&row.spec)? != spec {
                        plan.changed.push((key, row.resource_version, spec));
                    }
                }
                None => plan.added.push((key, spec)),
            }
        }
        plan.removed =
            current.iter().map(|row| Key::child(Kind::NodeGroup, tenant, row.name.clone())).collect();
        Ok(plan)
    }

    fn is_empty(&self) -> bool {
        self.added.is_empty() && self.changed.is_empty() && self.removed.is_empty()
    }

    fn apply(self, view: &mut View<'_>) -> Result<(), StoreError> {
        for key in self.removed {
            view.remove(&key)?;
        }
        for (key, version, spec) in self.changed {
            let now = view.now().to_string();
            view.update(&key, version, |row| {
                row.spec = spec.to_string();
                row.generation += 1;
                row.updated_at = now;
            })?;
            view.changed(EventType::Modified, key);
        }
        for (key, spec) in self.added {
            insert_group(view, key, &spec)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

//! Config patch refs that name no config patch, shown in the tenant's status
//! as the condition [`CONDITION`].
//!
//! The answer changes with the tenant's refs, its node groups' refs and the
//! set of its config patches, so every write of those recomputes it from the
//! cache: a tenant create starts with it, and the other writes update the
//! tenant's status by compare-and-set when it changed. The condition is
//! `True` when every ref resolves, `False` (reason `ConfigPatchNotFound`)
//! naming each missing patch and who refers to it, and absent when nothing
//! refers to a patch. Rendering a machine config refuses missing refs too.

use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::Utc;
use cms_model::{Condition, Kind, Tenant, TenantSpec, TenantStatus};
use cms_store::{Key, Object, Store, StoreError};

use crate::control_plane::list_all;
use crate::error::ApiError;

/// The type of the condition.
pub(crate) const CONDITION: &str = "ConfigPatchesResolved";

/// How often a status update that lost a race is tried again.
const ATTEMPTS: usize = 3;

/// The names of the tenant's config patches.
pub(crate) fn patch_names(store: &dyn Store, tenant: &str) -> BTreeSet<String> {
    list_all(store, Kind::ConfigPatch, tenant).iter().map(|object| object.key.name.clone()).collect()
}

/// Each ref that names no patch in `available`, as `"name" (referenced by ...)`.
pub(crate) fn missing(spec: &TenantSpec, available: &BTreeSet<String>) -> Vec<String> {
    let tenant = spec.config_patches.iter().map(|r| (&r.name, "the tenant".to_string()));
    let groups = spec.node_groups.iter().flatten().flat_map(|group| {
        group.config_patches.iter().map(move |r| (&r.name, format!("node group {:?}", group.name)))
    });
    tenant
        .chain(groups)
        .filter(|(name, _)| !available.contains(*name))
        .map(|(name, by)| format!("{name:?} (referenced by {by})"))
        .collect()
}

/// Whether anything in the tenant refers to a config patch.
fn has_refs(spec: &TenantSpec) -> bool {
    !spec.config_patches.is_empty() || spec.node_groups.iter().flatten().any(|g| !g.config_patches.is_empty())
}

/// Sets or clears the condition for `spec`; returns whether `status` changed.
pub(crate) fn apply(status: &mut TenantStatus, spec: &TenantSpec, available: &BTreeSet<String>) -> bool {
    let current = status.conditions.iter().position(|c| c.kind == CONDITION);
    if !has_refs(spec) {
        return current.map(|index| status.conditions.remove(index)).is_some();
    }
    let missing = missing(spec, available);
    let (state, reason, message) = match missing.is_empty() {
        true => ("True", "AllFound", "every config patch ref names a config patch".to_string()),
        false => {
            ("False", "ConfigPatchNotFound", format!("config patches not found: {}", missing.join(", ")))
        }
    };
    let mut wanted = Condition {
        kind: CONDITION.to_string(),
        status: state.to_string(),
        reason: reason.to_string(),
        message,
        last_transition_time: Utc::now(),
    };
    match current.map(|index| &mut status.conditions[index]) {
        Some(existing) if existing.status == wanted.status => {
            wanted.last_transition_time = existing.last_transition_time;
            let changed = *existing != wanted;
            *existing = wanted;
            changed
        }
        Some(existing) => {
            *existing = wanted;
            true
        }
        None => {
            status.conditions.push(wanted);
            true
        }
    }
}

/// Recomputes the condition of `tenant` after a write, returning the tenant
/// as it is now. A status write that races another write is retried on the
/// fresh object; the last writer's answer wins, which is the current one.
pub(crate) async fn refresh(store: &dyn Store, tenant: &str) -> Result<Option<Arc<Object>>, ApiError> {
    let key = Key::tenant(tenant);
    for _ in 0..ATTEMPTS {
        let Some(object) = store.get(&key) else { return Ok(None) };
        match settle(store, &object).await? {
            Settled::Unchanged => return Ok(Some(object)),
            Settled::Updated(updated) => return Ok(Some(updated)),
            Settled::Gone => return Ok(None),
            Settled::Raced => continue,
        }
    }
    Ok(store.get(&key))
}

/// Brings the condition up to date after a write of the tenant that left it
/// as `written`, and returns what the writer should be answered: `written`,
/// or the status write made on top of it. Never a later state made by
/// another writer, whose write the answer would then claim.
pub(crate) async fn after_write(store: &dyn Store, written: Arc<Object>) -> Result<Arc<Object>, ApiError> {
    match settle(store, &written).await? {
        Settled::Updated(updated) => Ok(updated),
        Settled::Unchanged | Settled::Gone => Ok(written),
        Settled::Raced => {
            refresh(store, &written.key.name).await?;
            Ok(written)
        }
    }
}

enum Settled {
    Unchanged,
    Updated(Arc<Object>),
    Gone,
    /// Another write came first.
    Raced,
}

/// One attempt at writing the condition on `object`.
async fn settle(store: &dyn Store, object: &Object) -> Result<Settled, ApiError> {
    if !mentions_patches(object) {
        return Ok(Settled::Unchanged);
    }
    let mut parsed: Tenant = object.parse().map_err(|err| ApiError::internal(&err))?;
    if !apply(&mut parsed.status, &parsed.spec, &patch_names(store, &object.key.name)) {
        return Ok(Settled::Unchanged);
    }
    let status = serde_json::to_value(&parsed.status).map_err(|err| ApiError::internal(&err))?;
    match store.update_status(object.key.clone(), status, Some(object.resource_version)).await {
        Ok(updated) => Ok(Settled::Updated(updated)),
        Err(StoreError::Conflict { .. }) => Ok(Settled::Raced),
        Err(StoreError::NotFound(_)) => Ok(Settled::Gone),
        Err(other) => Err(other.into()),
    }
}

/// A cheap test on the stored bytes: a tenant that neither refers to a patch
/// nor carries the condition needs no work.
fn mentions_patches(object: &Object) -> bool {
    let contains = |needle: &[u8]| object.json.windows(needle.len()).any(|window| window == needle);
    contains(br#""configPatches":[{"#) || contains(CONDITION.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cms_model::{ConfigPatchRef, NodeGroupSpec};

    fn spec(tenant_refs: &[&str], group_refs: &[&str]) -> TenantSpec {
        let refs = |names: &[&str]| names.iter().map(|n| ConfigPatchRef { name: n.to_string() }).collect();
        let group =
            NodeGroupSpec { name: "w".into(), config_patches: refs(group_refs), ..Default::default() };
        TenantSpec { config_patches: refs(tenant_refs), node_groups: Some(vec![group]), ..Default::default() }
    }

    fn names(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn the_condition_follows_the_refs() {
        let mut status = TenantStatus::default();
        assert!(!apply(&mut status, &spec(&[], &[]), &names(&[])), "no refs, no condition");
        assert!(status.conditions.is_empty());
        assert!(apply(&mut status, &spec(&["a"], &["b"]), &names(&["a"])));
        let condition = &status.conditions[0];
        assert_eq!((condition.status.as_str(), condition.reason.as_str()), ("False", "ConfigPatchNotFound"));
        assert!(condition.message.contains(r#""b" (referenced by node group "w")"#), "{}", condition.message);
        let since = condition.last_transition_time;
        assert!(!apply(&mut status, &spec(&["a"], &["b"]), &names(&["a"])), "unchanged");
        assert!(apply(&mut status, &spec(&["a", "c"], &["b"]), &names(&["a"])), "a new miss");
        assert_eq!(status.conditions[0].last_transition_time, since, "still False");
        assert!(apply(&mut status, &spec(&["a"], &["b"]), &names(&["a", "b"])));
        assert_eq!(status.conditions[0].status, "True");
        assert!(apply(&mut status, &spec(&[], &[]), &names(&[])), "refs gone, condition gone");
        assert!(status.conditions.is_empty());
    }
}

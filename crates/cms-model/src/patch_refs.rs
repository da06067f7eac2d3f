//! Config patch refs that name no config patch, shown in a tenant's status as
//! the condition [`CONFIG_PATCHES_RESOLVED`].
//!
//! The condition is `True` (reason `AllFound`) when every ref of the tenant
//! and of its node groups names one of its config patches, `False` (reason
//! `ConfigPatchNotFound`) naming each missing patch and who refers to it, and
//! absent when nothing refers to a patch. Pure: the caller says which patches
//! exist and what time it is.

use chrono::{DateTime, Utc};

use crate::tenant::{Condition, TenantSpec, TenantStatus};

/// The type of the condition.
pub const CONFIG_PATCHES_RESOLVED: &str = "ConfigPatchesResolved";

/// Whether the tenant or one of its node groups refers to a config patch.
pub fn has_refs(spec: &TenantSpec) -> bool {
    !spec.config_patches.is_empty() || spec.node_groups.iter().flatten().any(|g| !g.config_patches.is_empty())
}

/// Each ref for which `exists` is false, as `"name" (referenced by ...)`:
/// the tenant's refs first, then its node groups' in their order.
pub fn missing(spec: &TenantSpec, exists: impl Fn(&str) -> bool) -> Vec<String> {
    let tenant = spec.config_patches.iter().map(|r| (&r.name, "the tenant".to_string()));
    let groups = spec.node_groups.iter().flatten().flat_map(|group| {
        group.config_patches.iter().map(move |r| (&r.name, format!("node group {:?}", group.name)))
    });
    tenant
        .chain(groups)
        .filter(|(name, _)| !exists(name))
        .map(|(name, by)| format!("{name:?} (referenced by {by})"))
        .collect()
}

/// Sets, keeps or clears the condition in `status` for `spec`, given which
/// patches exist; returns whether `status` changed. The transition time is
/// `now` when the condition appears or flips, and kept while it stays.
pub fn apply(
    status: &mut TenantStatus,
    spec: &TenantSpec,
    exists: impl Fn(&str) -> bool,
    now: DateTime<Utc>,
) -> bool {
    let current = status.conditions.iter().position(|c| c.kind == CONFIG_PATCHES_RESOLVED);
    if !has_refs(spec) {
        return current.map(|index| status.conditions.remove(index)).is_some();
    }
    let missing = missing(spec, exists);
    let (state, reason, message) = match missing.is_empty() {
        true => ("True", "AllFound", "every config patch ref names a config patch".to_string()),
        false => {
            ("False", "ConfigPatchNotFound", format!("config patches not found: {}", missing.join(", ")))
        }
    };
    let mut wanted = Condition {
        kind: CONFIG_PATCHES_RESOLVED.to_string(),
        status: state.to_string(),
        reason: reason.to_string(),
        message,
        last_transition_time: now,
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::{ConfigPatchRef, NodeGroupSpec};

    fn spec(tenant_refs: &[&str], group_refs: &[&str]) -> TenantSpec {
        let refs = |names: &[&str]| names.iter().map(|n| ConfigPatchRef { name: n.to_string() }).collect();
        let group =
            NodeGroupSpec { name: "w".into(), config_patches: refs(group_refs), ..Default::default() };
        TenantSpec { config_patches: refs(tenant_refs), node_groups: Some(vec![group]), ..Default::default() }
    }

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + seconds, 0).expect("a valid time")
    }

    #[test]
    fn the_condition_follows_the_refs() {
        let mut status = TenantStatus::default();
        let check = |status: &mut TenantStatus, spec: &TenantSpec, names: &[&str], now| {
            let names: BTreeSet<&str> = names.iter().copied().collect();
            apply(status, spec, |name| names.contains(name), now)
        };
        assert!(!check(&mut status, &spec(&[], &[]), &[], at(0)), "no refs, no condition");
        assert!(status.conditions.is_empty());
        assert!(check(&mut status, &spec(&["a"], &["b"]), &["a"], at(1)));
        let condition = &status.conditions[0];
        assert_eq!(condition.kind, CONFIG_PATCHES_RESOLVED);
        assert_eq!((condition.status.as_str(), condition.reason.as_str()), ("False", "ConfigPatchNotFound"));
        assert_eq!(condition.message, r#"config patches not found: "b" (referenced by node group "w")"#);
        assert_eq!(condition.last_transition_time, at(1));
        assert!(!check(&mut status, &spec(&["a"], &["b"]), &["a"], at(2)), "unchanged");
        assert!(check(&mut status, &spec(&["a", "c"], &["b"]), &["a"], at(3)), "a new miss");
        assert_eq!(status.conditions[0].last_transition_time, at(1), "still False");
        assert!(
            status.conditions[0]
                .message
                .starts_with(r#"config patches not found: "c" (referenced by the tenant), "b""#)
        );
        assert!(check(&mut status, &spec(&["a"], &["b"]), &["a", "b"], at(4)));
        assert_eq!(status.conditions[0].status, "True");
        assert_eq!(status.conditions[0].reason, "AllFound");
        assert_eq!(status.conditions[0].last_transition_time, at(4), "flipped");
        assert!(check(&mut status, &spec(&[], &[]), &[], at(5)), "refs gone, condition gone");
        assert!(status.conditions.is_empty());
    }

    #[test]
    fn missing_lists_the_tenant_first_then_the_groups() {
        let missing = missing(&spec(&["x", "y"], &["x"]), |name| name == "y");
        assert_eq!(missing, [r#""x" (referenced by the tenant)"#, r#""x" (referenced by node group "w")"#]);
        assert!(has_refs(&spec(&[], &["x"])));
        assert!(!has_refs(&TenantSpec::default()));
    }
}

//! The one-minor rule of Kubernetes versions: `talosctl upgrade-k8s` (and
//! Kubernetes' version skew policy) moves a cluster one minor version at a
//! time, so a tenant's `kubernetesVersion` may change to any patch of its
//! minor or of the next minor, never skip one or go back to an older one.
//! A step to the next minor may start only when every machine that reports
//! its Kubernetes version, and the version the machines' configs name
//! ([`KUBERNETES_VERSION_ANNOTATION`]), is at least the minor before it, so
//! a second step cannot start before the first finished.

use std::cmp::Ordering;

use cms_model::{FieldError, Kind, Machine};
use cms_store::Store;

/// The field the rule names.
const FIELD: &str = "spec.kubernetesVersion";

/// On a tenant: the Kubernetes version every machine's config names, once
/// an upgrade rolled through them all (the reconciler writes it). A step
/// counts it as a machine that lags.
pub const KUBERNETES_VERSION_ANNOTATION: &str = "service.io/kubernetes-version";

/// A Kubernetes minor version: `(major, minor)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Minor(u64, u64);

impl Minor {
    /// The minor of `1.31.2`, `v1.31.2` or `1.31`; `None` for anything else.
    fn of(version: &str) -> Option<Minor> {
        let bare = version.strip_prefix('v').unwrap_or(version);
        let mut parts = bare.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        Some(Minor(major, minor))
    }

    fn next(self) -> Minor {
        Minor(self.0, self.1.saturating_add(1))
    }
}

impl std::fmt::Display for Minor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.0, self.1)
    }
}

/// The Kubernetes versions the machines of `tenant` report
/// (`status.kubernetesVersion`, where set), each with its machine's name.
pub(crate) fn observed_versions(store: &dyn Store, tenant: &str) -> Vec<(String, String)> {
    store
        .all(Kind::Machine, Some(tenant.to_string()))
        .iter()
        .filter_map(|object| object.parse::<Machine>().ok())
        .filter_map(|machine| Some((machine.metadata.name, machine.status.kubernetes_version?)))
        .collect()
}

/// Checks a change of a tenant's Kubernetes version from `stored` to
/// `wanted`: the same minor (any patch) or the next one; and for the next
/// one, no machine of `observed` (`(machine, version)` pairs, asked for only
/// then) more than one minor behind it. An unchanged minor is never
/// refused, so other edits go on while a step is under way.
pub(crate) fn check_kubernetes_step(
    wanted: &str,
    stored: &str,
    observed: impl FnOnce() -> Vec<(String, String)>,
) -> Result<(), FieldError> {
    let (Some(to), Some(from)) = (Minor::of(wanted), Minor::of(stored)) else {
        return Ok(());
    };
    if to == from {
        return Ok(());
    }
    let allowed = format!("{from}.x (any patch) or {}.x", from.next());
    if to != from.next() {
        let what = match to.cmp(&from) {
            Ordering::Less => {
                format!("cannot go back from {stored} to {wanted}: Kubernetes is never downgraded")
            }
            _ => format!(
                "cannot move from {stored} to {wanted} in one step: Kubernetes upgrades one minor version \
                 at a time"
            ),
        };
        return Err(FieldError::new(FIELD, format!("{what}; allowed now: {allowed}")));
    }
    let observed = observed();
    let lowest = observed
        .iter()
        .filter_map(|(machine, version)| Some((Minor::of(version)?, machine, version)))
        .min_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    if let Some((minor, machine, version)) = lowest
        && to > minor.next()
    {
        return Err(FieldError::new(
            FIELD,
            format!(
                "cannot start the step to {to} yet: machine {machine:?} still runs Kubernetes {version}, \
                 so the step to {} has not finished; allowed now: {from}.x (any patch)",
                minor.next()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observed(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(machine, version)| (machine.to_string(), version.to_string())).collect()
    }

    /// No machine reports a version; a test that must not ask fails if it does.
    fn unasked() -> Vec<(String, String)> {
        panic!("the machines are asked only for a step to the next minor")
    }

    #[test]
    fn the_same_minor_or_the_next_is_allowed() {
        for (stored, wanted) in [
            ("1.30.2", "1.30.2"),
            ("1.30.2", "1.30.9"),
            ("1.30.2", "1.30.0"),
            ("1.30.2", "1.31.0"),
            ("1.30.2", "1.31.7"),
            ("1.9.0", "1.10.0"),
        ] {
            assert_eq!(check_kubernetes_step(wanted, stored, Vec::new), Ok(()), "{stored} -> {wanted}");
        }
        // Within a minor, the machines are not even asked.
        assert_eq!(check_kubernetes_step("1.30.9", "1.30.2", unasked), Ok(()));
    }

    #[test]
    fn a_skip_is_refused_naming_the_allowed_step() {
        let err = check_kubernetes_step("1.32.0", "1.30.2", Vec::new).unwrap_err();
        assert_eq!(err.field, "spec.kubernetesVersion");
        assert!(err.message.contains("one minor version at a time"), "{err}");
        assert!(err.message.contains("allowed now: 1.30.x (any patch) or 1.31.x"), "{err}");
        assert!(check_kubernetes_step("2.0.0", "1.30.2", Vec::new).is_err(), "a new major is no next minor");
        assert!(check_kubernetes_step("1.40.0", "1.30.2", Vec::new).is_err());
    }

    #[test]
    fn a_downgrade_to_an_older_minor_is_refused() {
        let err = check_kubernetes_step("1.29.9", "1.30.2", Vec::new).unwrap_err();
        assert_eq!(err.field, "spec.kubernetesVersion");
        assert!(err.message.contains("cannot go back from 1.30.2 to 1.29.9"), "{err}");
        assert!(err.message.contains("allowed now: 1.30.x (any patch) or 1.31.x"), "{err}");
    }

    #[test]
    fn the_next_step_waits_for_the_machines_of_the_last_one() {
        // The spec asks for 1.31, a machine still runs 1.30: 1.32 must wait.
        let lagging = observed(&[("cp-1", "v1.31.0"), ("w-1", "1.30.4"), ("w-2", "v1.31.0")]);
        let err = check_kubernetes_step("1.32.0", "1.31.0", || lagging.clone()).unwrap_err();
        assert_eq!(err.field, "spec.kubernetesVersion");
        assert!(err.message.contains(r#"machine "w-1" still runs Kubernetes 1.30.4"#), "{err}");
        assert!(err.message.contains("allowed now: 1.31.x"), "{err}");
        // A patch within the stored minor is still fine while the step runs.
        assert_eq!(check_kubernetes_step("1.31.2", "1.31.0", || lagging.clone()), Ok(()));
        // Once every machine runs 1.31, the step to 1.32 may start.
        let done = observed(&[("cp-1", "v1.31.0"), ("w-1", "v1.31.0")]);
        assert_eq!(check_kubernetes_step("1.32.0", "1.31.0", || done), Ok(()));
        // Machines that report nothing, or nothing readable, do not hold it back.
        let unknown = observed(&[("cp-1", "v1.31.0"), ("w-1", "unknown")]);
        assert_eq!(check_kubernetes_step("1.32.0", "1.31.0", || unknown), Ok(()));
    }

    #[test]
    fn minors_are_read_with_or_without_v() {
        assert_eq!(Minor::of("v1.31.2"), Some(Minor(1, 31)));
        assert_eq!(Minor::of("1.31"), Some(Minor(1, 31)));
        assert_eq!(Minor::of("x.31.2"), None);
        assert_eq!(Minor::of(""), None);
    }
}

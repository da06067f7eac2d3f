//! What a watch has shown the user, kept as client-go's reflector keeps its
//! store, so that a watch that lists again (after 410 `Gone`, or when a
//! stream ends before its resume point is known) shows neither a gap nor a
//! duplicate: the new list is compared with what was shown, by name and
//! `resourceVersion`.

use std::collections::BTreeMap;

use cms_model::Tenant;

use crate::sse::WatchEvent;

/// What the user was shown, and where the watch resumes.
#[derive(Debug, Default)]
pub(crate) struct Reflector {
    /// Each tenant shown, by name, as last shown.
    shown: BTreeMap<String, Tenant>,
    /// The revision to resume after: the last `id` of the stream.
    revision: Option<u64>,
    /// The tenants of the list being read, until its end.
    listing: Option<Vec<Tenant>>,
    /// Whether a first list has ended.
    synced: bool,
}

/// What the user is to see of a change.
#[derive(Debug)]
pub(crate) enum Shown {
    Event(Box<WatchEvent>),
    /// The first list has ended.
    Synced,
}

impl Reflector {
    /// The revision to resume after, once the watch has one.
    pub(crate) fn resume_point(&self) -> Option<u64> {
        self.revision
    }

    /// A stream opens: without a resume point it begins with a list.
    pub(crate) fn open(&mut self) {
        self.listing = self.revision.is_none().then(Vec::new);
    }

    /// The resume point is no longer served (410): the next stream lists
    /// again, and is compared with what was shown.
    pub(crate) fn list_again(&mut self) {
        self.revision = None;
    }

    /// A frame carried `id: revision`.
    pub(crate) fn reached(&mut self, revision: u64) {
        self.revision = Some(revision);
    }

    /// Whether the stream is still reading its opening list.
    pub(crate) fn is_listing(&self) -> bool {
        self.listing.is_some()
    }

    /// One tenant of the opening list.
    pub(crate) fn listed(&mut self, tenant: Tenant) {
        self.listing.get_or_insert_with(Vec::new).push(tenant);
    }

    /// The opening list ended at `revision`. The first list shows every
    /// tenant as `ADDED`; a later one only what differs from what was
    /// shown: new tenants `ADDED`, changed ones `MODIFIED`, vanished ones
    /// `DELETED`.
    pub(crate) fn list_ended(&mut self, revision: u64) -> Vec<Shown> {
        self.revision = Some(revision);
        let listed = self.listing.take().unwrap_or_default();
        let mut changes = Vec::new();
        let mut vanished = std::mem::take(&mut self.shown);
        for tenant in listed {
            let name = tenant.metadata.name.clone();
            let kind = match vanished.remove(&name) {
                None => Some("ADDED"),
                Some(before) if same_version(&before, &tenant) => None,
                Some(_) => Some("MODIFIED"),
            };
            if let Some(kind) = kind {
                changes.push(Shown::Event(Box::new(event(kind, tenant.clone()))));
            }
            self.shown.insert(name, tenant);
        }
        changes.extend(vanished.into_values().map(|tenant| Shown::Event(Box::new(event("DELETED", tenant)))));
        if !self.synced {
            self.synced = true;
            changes.push(Shown::Synced);
        }
        changes
    }

    /// A live change, as the server sent it; `None` when the user has seen
    /// it already (the same `resourceVersion`), or is told of the deletion
    /// of a tenant never shown. A change of a tenant not shown is `ADDED`.
    pub(crate) fn changed(&mut self, kind: &str, tenant: Tenant) -> Option<WatchEvent> {
        let name = tenant.metadata.name.clone();
        if kind == "DELETED" {
            return self.shown.remove(&name).map(|_| event("DELETED", tenant));
        }
        let kind = match self.shown.get(&name) {
            None => "ADDED",
            Some(before) if same_version(before, &tenant) => return None,
            Some(_) => "MODIFIED",
        };
        self.shown.insert(name, tenant.clone());
        Some(event(kind, tenant))
    }
}

/// Whether two states of a tenant are one: the same `resourceVersion` of
/// the same object (a tenant deleted and created again starts over at 1).
fn same_version(before: &Tenant, after: &Tenant) -> bool {
    before.metadata.resource_version == after.metadata.resource_version
        && before.metadata.created_at == after.metadata.created_at
}

fn event(kind: &str, object: Tenant) -> WatchEvent {
    WatchEvent { kind: kind.to_string(), object }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(name: &str, version: u64) -> Tenant {
        let mut tenant = Tenant::default();
        tenant.metadata.name = name.to_string();
        tenant.metadata.resource_version = Some(version);
        tenant
    }

    fn summary(shown: &[Shown]) -> Vec<String> {
        shown
            .iter()
            .map(|shown| match shown {
                Shown::Event(event) => format!(
                    "{} {} {}",
                    event.kind,
                    event.object.metadata.name,
                    event.object.metadata.resource_version.unwrap_or_default()
                ),
                Shown::Synced => "synced".to_string(),
            })
            .collect()
    }

    #[test]
    fn a_second_list_shows_only_what_differs() {
        let mut reflector = Reflector::default();
        reflector.open();
        assert!(reflector.is_listing());
        for (name, version) in [("a", 1), ("b", 1), ("c", 1)] {
            reflector.listed(tenant(name, version));
        }
        let first = reflector.list_ended(10);
        assert_eq!(summary(&first), ["ADDED a 1", "ADDED b 1", "ADDED c 1", "synced"]);
        assert_eq!(reflector.resume_point(), Some(10));
        reflector.open();
        assert!(!reflector.is_listing(), "a resume has no list");

        // The resume point was compacted away: list again.
        reflector.list_again();
        assert_eq!(reflector.resume_point(), None);
        reflector.open();
        for (name, version) in [("a", 1), ("b", 4), ("d", 1)] {
            reflector.listed(tenant(name, version));
        }
        let second = reflector.list_ended(20);
        assert_eq!(summary(&second), ["MODIFIED b 4", "ADDED d 1", "DELETED c 1"]);
        assert_eq!(reflector.resume_point(), Some(20));
    }

    #[test]
    fn live_changes_are_shown_once() {
        let mut reflector = Reflector::default();
        reflector.open();
        reflector.listed(tenant("a", 1));
        reflector.list_ended(5);
        let shown = |event: Option<WatchEvent>| {
            event.map(|event| format!("{} {}", event.kind, event.object.metadata.name))
        };
        assert_eq!(shown(reflector.changed("MODIFIED", tenant("a", 1))), None, "seen already");
        assert_eq!(shown(reflector.changed("MODIFIED", tenant("a", 2))).as_deref(), Some("MODIFIED a"));
        assert_eq!(shown(reflector.changed("MODIFIED", tenant("b", 3))).as_deref(), Some("ADDED b"));
        assert_eq!(shown(reflector.changed("DELETED", tenant("z", 3))), None, "never shown");
        assert_eq!(shown(reflector.changed("DELETED", tenant("a", 2))).as_deref(), Some("DELETED a"));
        assert_eq!(
            shown(reflector.changed("ADDED", tenant("a", 1))).as_deref(),
            Some("ADDED a"),
            "created again"
        );
    }
}

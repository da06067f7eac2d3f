//! Checking watch streams against the authoritative event log.
//!
//! A watcher's history is a list of sessions: the first may start fresh
//! (an initial burst, then a frame with only the snapshot's revision), and
//! every later one resumes from the last revision the watcher saw. Against
//! the log (every tenant event in revision order, as a watch replaying from
//! revision 0 reads it), each watcher's events must be:
//!
//! - ordered: revisions strictly increasing, across sessions too;
//! - unique: no revision twice;
//! - faithful: each event equals the log's event at its revision;
//! - complete: every log event after a session's start, up to the last one
//!   it saw, is in it, and a watcher that was told where the log ends
//!   has seen up to there;
//! - resumed correctly: each session after the first starts from the last
//!   revision the watcher had seen;
//! - and a fresh session's burst is the log's state at the snapshot revision.

use std::collections::BTreeMap;

/// One event of the tenant watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The frame's `id`: the store-wide revision of the change.
    pub revision: u64,
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub kind: String,
    /// The tenant's name.
    pub name: String,
    /// The object's `metadata.resourceVersion`.
    pub resource_version: u64,
}

/// How a session began.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// Without a resume point: the burst of `(name, resourceVersion)` and the
    /// snapshot's revision from the frame that follows it.
    Fresh { burst: Vec<(String, u64)>, synced: u64 },
    /// With `resourceVersion=<from>`.
    Resumed { from: u64 },
}

impl Start {
    fn revision(&self) -> u64 {
        match self {
            Start::Fresh { synced, .. } => *synced,
            Start::Resumed { from } => *from,
        }
    }
}

/// One connection of a watcher, from open to disconnect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub start: Start,
    pub events: Vec<Event>,
}

impl Session {
    /// The last revision this session saw: its last event's, else its start.
    pub fn last_seen(&self) -> u64 {
        self.events.last().map_or(self.start.revision(), |event| event.revision)
    }
}

/// Everything one watcher saw.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Watcher {
    pub name: String,
    pub sessions: Vec<Session>,
}

impl Watcher {
    /// The last revision this watcher saw, if it ever connected.
    pub fn last_seen(&self) -> Option<u64> {
        self.sessions.last().map(Session::last_seen)
    }

    /// How many events it received, over every session.
    pub fn events(&self) -> usize {
        self.sessions.iter().map(|session| session.events.len()).sum()
    }
}

/// Checks `watchers` against `log`, which holds every tenant event after
/// revision `log_after` in order. When `log_complete` is true, every watcher
/// must have seen up to the log's last event. Returns every violation found,
/// each a sentence naming the watcher and the revisions.
pub fn check(log: &[Event], log_after: u64, log_complete: bool, watchers: &[Watcher]) -> Vec<String> {
    let mut violations = Vec::new();
    let mut by_revision = BTreeMap::new();
    let mut previous = log_after;
    for event in log {
        if event.revision <= previous {
            violations.push(format!(
                "the log itself is out of order: revision {} after {previous}",
                event.revision
            ));
        }
        previous = previous.max(event.revision);
        by_revision.insert(event.revision, event);
    }
    let log_end = previous;
    for watcher in watchers {
        check_watcher(&by_revision, log_after, watcher, &mut violations);
        if log_complete {
            match watcher.last_seen() {
                Some(last) if last >= log_end => {}
                last => violations.push(format!(
                    "{}: saw up to revision {last:?}, but the log goes on to {log_end}",
                    watcher.name
                )),
            }
        }
    }
    violations
}

fn check_watcher(
    log: &BTreeMap<u64, &Event>,
    log_after: u64,
    watcher: &Watcher,
    violations: &mut Vec<String>,
) {
    let name = &watcher.name;
    let mut last_seen: Option<u64> = None;
    for (number, session) in watcher.sessions.iter().enumerate() {
        let start = session.start.revision();
        match (&session.start, last_seen) {
            (Start::Fresh { .. }, Some(last)) => violations.push(format!(
                "{name}: session {number} started afresh after seeing revision {last}; it should resume"
            )),
            (Start::Resumed { from }, Some(last)) if *from != last => violations.push(format!(
                "{name}: session {number} resumed from {from}, but the last revision seen was {last}"
            )),
            _ => {}
        }
        if start < log_after {
            violations.push(format!(
                "{name}: session {number} starts at revision {start}, before the log (after {log_after})"
            ));
            continue;
        }
        if let Start::Fresh { burst, synced } = &session.start
            && log_after == 0
        {
            check_burst(log, name, burst, *synced, violations);
        }
        let mut previous = start;
        for event in &session.events {
            if event.revision <= previous {
                violations.push(format!(
                    "{name}: session {number} got revision {} after {previous}: out of order or repeated",
                    event.revision
                ));
                continue;
            }
            match log.get(&event.revision) {
                Some(logged) if **logged == *event => {}
                Some(logged) => violations
                    .push(format!("{name}: session {number} got {event:?} where the log holds {logged:?}")),
                None => violations
                    .push(format!("{name}: session {number} got {event:?}, which is not in the log")),
            }
            let skipped: Vec<u64> =
                log.range(previous + 1..event.revision).map(|(revision, _)| *revision).collect();
            if !skipped.is_empty() {
                violations.push(format!(
                    "{name}: session {number} skipped revisions {skipped:?} before {}",
                    event.revision
                ));
            }
            previous = event.revision;
        }
        last_seen = Some(session.last_seen());
    }
}

/// The burst must list, sorted by name, the tenants the log holds at `synced`.
fn check_burst(
    log: &BTreeMap<u64, &Event>,
    name: &str,
    burst: &[(String, u64)],
    synced: u64,
    violations: &mut Vec<String>,
) {
    let mut state: BTreeMap<&str, u64> = BTreeMap::new();
    for (_, event) in log.range(..=synced) {
        if event.kind == "DELETED" {
            state.remove(event.name.as_str());
        } else {
            state.insert(&event.name, event.resource_version);
        }
    }
    let expected: Vec<(String, u64)> =
        state.into_iter().map(|(name, version)| (name.to_string(), version)).collect();
    if burst != expected {
        violations.push(format!(
            "{name}: the burst at revision {synced} was {burst:?}, but the log holds {expected:?} there"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::{Event, Session, Start, Watcher, check};

    fn event(revision: u64, kind: &str, name: &str, resource_version: u64) -> Event {
        Event { revision, kind: kind.to_string(), name: name.to_string(), resource_version }
    }

    /// A log of six tenant events; revisions 3 and 6 went to other resources.
    fn log() -> Vec<Event> {
        vec![
            event(1, "ADDED", "a", 1),
            event(2, "ADDED", "b", 1),
            event(4, "MODIFIED", "a", 2),
            event(5, "MODIFIED", "b", 2),
            event(7, "DELETED", "a", 3),
            event(8, "MODIFIED", "b", 3),
        ]
    }

    fn pick(revisions: &[u64]) -> Vec<Event> {
        log().into_iter().filter(|event| revisions.contains(&event.revision)).collect()
    }

    fn watcher(sessions: Vec<Session>) -> Watcher {
        Watcher { name: "w".to_string(), sessions }
    }

    fn resumed(from: u64, revisions: &[u64]) -> Session {
        Session { start: Start::Resumed { from }, events: pick(revisions) }
    }

    fn fresh(burst: &[(&str, u64)], synced: u64, revisions: &[u64]) -> Session {
        let burst = burst.iter().map(|(name, version)| (name.to_string(), *version)).collect();
        Session { start: Start::Fresh { burst, synced }, events: pick(revisions) }
    }

    /// Checks one watcher against the whole log and expects violations
    /// containing each of `expected` (none when it is empty).
    fn check_one(watcher: Watcher, complete: bool, expected: &[&str]) {
        let violations = check(&log(), 0, complete, &[watcher]);
        if expected.is_empty() {
            assert!(violations.is_empty(), "{violations:#?}");
        }
        for needle in expected {
            assert!(violations.iter().any(|found| found.contains(needle)), "{needle:?} in {violations:#?}");
        }
    }

    #[test]
    fn a_watcher_that_saw_everything_passes() {
        check_one(watcher(vec![resumed(0, &[1, 2, 4, 5, 7, 8])]), true, &[]);
        check_one(watcher(vec![fresh(&[("a", 2), ("b", 1)], 4, &[5, 7, 8])]), true, &[]);
    }

    #[test]
    fn disconnects_that_resume_from_the_last_revision_pass() {
        check_one(
            watcher(vec![
                fresh(&[("a", 1), ("b", 1)], 3, &[4]),
                resumed(4, &[5]),
                resumed(5, &[]),
                resumed(5, &[7, 8]),
            ]),
            true,
            &[],
        );
    }

    #[test]
    fn gaps_repeats_and_disorder_are_found() {
        check_one(watcher(vec![resumed(0, &[1, 2, 5, 7, 8])]), true, &["skipped revisions [4]"]);
        let mut repeated = resumed(0, &[1, 2, 4]);
        repeated.events.push(event(4, "MODIFIED", "a", 2));
        check_one(watcher(vec![repeated]), false, &["got revision 4 after 4"]);
        let mut reversed = resumed(0, &[1, 2]);
        reversed.events.reverse();
        check_one(watcher(vec![reversed]), false, &["got revision 1 after 2"]);
    }

    #[test]
    fn events_that_differ_from_the_log_are_found() {
        let mut session = resumed(0, &[1]);
        session.events[0].resource_version = 9;
        check_one(watcher(vec![session]), false, &["where the log holds"]);
        let mut session = resumed(0, &[1]);
        session.events.push(event(3, "ADDED", "c", 1));
        check_one(watcher(vec![session]), false, &["not in the log"]);
    }

    #[test]
    fn a_wrong_resume_point_is_found() {
        check_one(watcher(vec![resumed(0, &[1, 2]), resumed(1, &[4])]), false, &["resumed from 1"]);
        check_one(
            watcher(vec![resumed(0, &[1, 2]), fresh(&[("a", 1), ("b", 1)], 2, &[])]),
            false,
            &["started afresh"],
        );
    }

    #[test]
    fn a_watcher_that_stopped_early_is_incomplete() {
        check_one(watcher(vec![resumed(0, &[1, 2, 4])]), true, &["saw up to revision Some(4)"]);
        check_one(watcher(vec![resumed(0, &[1, 2, 4])]), false, &[]);
    }

    #[test]
    fn a_burst_that_differs_from_the_log_is_found() {
        check_one(watcher(vec![fresh(&[("a", 1)], 2, &[])]), false, &["the burst at revision 2"]);
        // After the deletion at 7, only b is left.
        check_one(watcher(vec![fresh(&[("b", 2)], 7, &[8])]), true, &[]);
    }

    #[test]
    fn a_session_before_the_log_cannot_be_checked() {
        let violations = check(&log()[2..], 3, false, &[watcher(vec![resumed(1, &[2])])]);
        assert!(violations.iter().any(|found| found.contains("before the log")), "{violations:#?}");
    }
}

//! Filtered watches, with the Kubernetes semantics: a [`WatchFilter`] says
//! which objects a watch shows (a name from the field selector, a label
//! selector, and any predicate another part of the service adds, such as
//! the caller's grants), and [`Shown`] remembers, per stream, which objects
//! its client was shown, so that an object that starts matching arrives as
//! `ADDED` and one that stops matching as `DELETED`.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use cms_model::LabelSelector;
use cms_store::{EventType, Key, Object};
use serde::Deserialize;

use crate::error::ApiError;

/// A rule of a filtered watch over whole objects, such as "the caller holds
/// a grant on this tenant".
pub(crate) type Predicate = Arc<dyn Fn(&Object) -> bool + Send + Sync>;

/// Which objects a watch shows: those that pass every rule it holds. The
/// default shows everything.
#[derive(Clone, Default)]
pub(crate) struct WatchFilter {
    /// `metadata.name`, from `fieldSelector=metadata.name=NAME` or the
    /// object's own path.
    pub(crate) name: Option<String>,
    /// `labelSelector`; `None` (or an empty selector) matches everything.
    pub(crate) labels: Option<LabelSelector>,
    /// Any other rule, such as the caller's grants.
    pub(crate) predicate: Option<Predicate>,
}

impl fmt::Debug for WatchFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WatchFilter")
            .field("name", &self.name)
            .field("labels", &self.labels)
            .field("predicate", &self.predicate.as_ref().map(|_| "<fn>"))
            .finish()
    }
}

impl WatchFilter {
    /// Adds `predicate` to the rules: an object must pass it too.
    pub(crate) fn with_predicate(self, predicate: Predicate) -> WatchFilter {
        let predicate: Predicate = match self.predicate {
            None => predicate,
            Some(first) => Arc::new(move |object: &Object| first(object) && predicate(object)),
        };
        WatchFilter { predicate: Some(predicate), ..self }
    }

    /// Whether every object passes: no rule at all.
    pub(crate) fn is_everything(&self) -> bool {
        self.name.is_none()
            && self.labels.as_ref().is_none_or(LabelSelector::is_empty)
            && self.predicate.is_none()
    }

    /// Whether the caller may see `object` at all, whatever it selected.
    pub(crate) fn visible(&self, object: &Object) -> bool {
        self.predicate.as_ref().is_none_or(|predicate| predicate(object))
    }

    /// Whether `object` passes every rule.
    pub(crate) fn matches(&self, object: &Object) -> bool {
        if self.name.as_ref().is_some_and(|name| *name != object.key.name) {
            return false;
        }
        if let Some(selector) = self.labels.as_ref().filter(|selector| !selector.is_empty())
            && !selector.matches(&labels_of(object))
        {
            return false;
        }
        self.visible(object)
    }
}

/// The labels of a stored object; none when its JSON holds none.
fn labels_of(object: &Object) -> BTreeMap<String, String> {
    #[derive(Deserialize)]
    struct Head {
        #[serde(default)]
        metadata: Meta,
    }
    #[derive(Default, Deserialize)]
    struct Meta {
        #[serde(default)]
        labels: BTreeMap<String, String>,
    }
    serde_json::from_slice::<Head>(&object.json).map(|head| head.metadata.labels).unwrap_or_default()
}

/// Parses `fieldSelector`: only `metadata.name=NAME` (or `==`) is
/// supported, as a tenant watch needs; anything else is 400 naming it.
pub(crate) fn field_selector(raw: &str) -> Result<Option<String>, ApiError> {
    let refused = || {
        let shown: String = raw.chars().take(256).collect();
        ApiError::BadRequest(format!(
            "fieldSelector {shown:?} is not supported: only metadata.name=NAME (or metadata.name==NAME) is"
        ))
    };
    // Empty is no selector, as in Kubernetes; nothing else is trimmed.
    let text = raw;
    if text.is_empty() {
        return Ok(None);
    }
    let name = text
        .strip_prefix("metadata.name==")
        .or_else(|| text.strip_prefix("metadata.name="))
        .ok_or_else(refused)?;
    if let Err(err) = cms_model::validate_name("metadata.name", name) {
        let shown: String = raw.chars().take(256).collect();
        return Err(ApiError::BadRequest(format!("fieldSelector {shown:?} names no object: {err}")));
    }
    Ok(Some(name.to_string()))
}

/// What a stream's client was shown: the objects it holds now. A fresh
/// watch knows it exactly (its burst showed what matched); a resumed one
/// cannot know what the client held before the resume point, so an object
/// it has not heard of since is unknown, and sent as its client may need it:
/// a match as `MODIFIED` (clients take it as an add when they lack it), a
/// non-match as `DELETED` (a no-op for clients that never had it).
#[derive(Debug, Default)]
pub(crate) struct Shown {
    /// Known objects: `true` when the client holds it. On a fresh watch only
    /// held objects are kept, since the client holds nothing else.
    known: HashMap<Key, bool>,
    resumed: bool,
}

impl Shown {
    /// The memory of a watch, fresh or resumed.
    pub(crate) fn new(resumed: bool) -> Shown {
        Shown { known: HashMap::new(), resumed }
    }

    /// What to send for `event_type` of `object` through `filter`, if
    /// anything, remembering what the client then holds.
    pub(crate) fn decide(
        &mut self,
        filter: &WatchFilter,
        event_type: EventType,
        object: &Object,
    ) -> Option<EventType> {
        let key = &object.key;
        let holds = match self.known.get(key) {
            Some(holds) => Some(*holds),
            None if self.resumed => None,
            None => Some(false),
        };
        // An object the client never held and may not see at all (another
        // team's tenant, to a caller with grants) is never sent: not even
        // as a delete, which would carry it whole.
        if holds.is_none() && !filter.visible(object) {
            return None;
        }
        if event_type == EventType::Deleted {
            self.known.remove(key);
            return match holds {
                Some(false) => None,
                Some(true) | None => Some(EventType::Deleted),
            };
        }
        let matches = filter.matches(object);
        self.remember(key, matches);
        match (holds, matches, event_type) {
            (Some(true), true, _) => Some(EventType::Modified),
            (Some(false), true, _) => Some(EventType::Added),
            (None, true, EventType::Added) => Some(EventType::Added),
            (None, true, _) => Some(EventType::Modified),
            (Some(true), false, _) => Some(EventType::Deleted),
            (None, false, EventType::Added) | (Some(false), false, _) => None,
            (None, false, _) => Some(EventType::Deleted),
        }
    }

    fn remember(&mut self, key: &Key, holds: bool) {
        match (holds, self.resumed) {
            (false, false) => {
                self.known.remove(key);
            }
            _ => {
                self.known.insert(key.clone(), holds);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use cms_store::EventType::{Added, Deleted, Modified};

    use super::*;

    fn tenant(name: &str, labels: &[(&str, &str)]) -> Object {
        let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
        let json =
            serde_json::json!({"metadata": {"name": name, "labels": labels}, "spec": {}, "status": {}});
        Object {
            key: Key::tenant(name),
            resource_version: 1,
            generation: 1,
            deleting: false,
            json: Bytes::from(json.to_string()),
        }
    }

    fn team(value: &str) -> WatchFilter {
        WatchFilter {
            labels: Some(LabelSelector::parse(&format!("team={value}")).unwrap()),
            ..WatchFilter::default()
        }
    }

    /// Runs `events` through a fresh or resumed stream; returns what was sent.
    fn check(
        filter: &WatchFilter,
        resumed: bool,
        events: &[(EventType, Object)],
        expected: &[Option<EventType>],
    ) {
        let mut shown = Shown::new(resumed);
        let sent: Vec<Option<EventType>> =
            events.iter().map(|(event_type, object)| shown.decide(filter, *event_type, object)).collect();
        assert_eq!(sent, expected, "{filter:?}, resumed: {resumed}");
    }

    #[test]
    fn a_resumed_stream_never_sends_what_the_caller_may_not_see() {
        let hidden = || tenant("b", &[("team", "blue")]);
        let mine = || tenant("a", &[("team", "red")]);
        let predicate: Predicate = Arc::new(|object: &Object| object.key.name == "a");
        let filter = WatchFilter::default().with_predicate(predicate);
        check(
            &filter,
            true,
            &[(Modified, hidden()), (Deleted, hidden()), (Added, hidden()), (Modified, mine())],
            &[None, None, None, Some(Modified)],
        );
    }

    #[test]
    fn an_object_that_starts_matching_is_added_and_one_that_stops_is_deleted() {
        let red = || tenant("a", &[("team", "red")]);
        let blue = || tenant("a", &[("team", "blue")]);
        check(
            &team("red"),
            false,
            &[(Added, blue()), (Modified, red()), (Modified, red()), (Modified, blue()), (Modified, blue())],
            &[None, Some(Added), Some(Modified), Some(Deleted), None],
        );
        check(&team("red"), false, &[(Added, red()), (Deleted, red())], &[Some(Added), Some(Deleted)]);
        check(&team("red"), false, &[(Added, blue()), (Deleted, blue())], &[None, None]);
        check(
            &team("red"),
            false,
            &[(Added, red()), (Modified, blue()), (Deleted, blue())],
            &[Some(Added), Some(Deleted), None],
        );
    }

    #[test]
    fn a_resumed_stream_sends_what_its_client_may_need() {
        let red = || tenant("a", &[("team", "red")]);
        let blue = || tenant("a", &[("team", "blue")]);
        check(&team("red"), true, &[(Modified, red()), (Modified, red())], &[Some(Modified), Some(Modified)]);
        check(
            &team("red"),
            true,
            &[(Modified, blue()), (Modified, blue()), (Modified, red())],
            &[Some(Deleted), None, Some(Added)],
        );
        check(&team("red"), true, &[(Added, blue()), (Deleted, blue())], &[None, None]);
        check(&team("red"), true, &[(Deleted, blue())], &[Some(Deleted)]);
    }

    #[test]
    fn a_predicate_can_change_its_answer_for_the_same_object() {
        let granted = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = granted.clone();
        let filter = WatchFilter::default()
            .with_predicate(Arc::new(move |_: &Object| flag.load(std::sync::atomic::Ordering::SeqCst)));
        let mut shown = Shown::new(false);
        let object = tenant("a", &[]);
        assert_eq!(shown.decide(&filter, Added, &object), None);
        granted.store(true, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(shown.decide(&filter, Modified, &object), Some(Added), "granted: it starts matching");
        granted.store(false, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(shown.decide(&filter, Modified, &object), Some(Deleted), "revoked: it stops matching");
    }

    #[test]
    fn every_rule_must_hold() {
        let object = tenant("a", &[("team", "red")]);
        assert!(WatchFilter::default().matches(&object));
        assert!(WatchFilter::default().is_everything());
        let named = |name: &str| WatchFilter { name: Some(name.to_string()), ..team("red") };
        assert!(named("a").matches(&object));
        assert!(!named("b").matches(&object));
        assert!(!team("blue").matches(&object));
        let refusing = named("a")
            .with_predicate(Arc::new(|_: &Object| true))
            .with_predicate(Arc::new(|_: &Object| false));
        assert!(!refusing.matches(&object), "predicates add up");
        assert!(!refusing.is_everything());
    }

    #[test]
    fn field_selectors_name_one_object() {
        assert_eq!(field_selector("metadata.name=acme").unwrap().as_deref(), Some("acme"));
        assert_eq!(field_selector("metadata.name==acme").unwrap().as_deref(), Some("acme"));
        assert_eq!(field_selector("").unwrap(), None);
        for refused in [
            "metadata.name!=acme",
            "metadata.namespace=x",
            "spec.kubernetesVersion=1.31.1",
            "metadata.name=",
            "metadata.name = acme",
            "metadata.name=a,metadata.name=b",
            "metadata.name=Not_A_Name",
            "metadata.name=a=b",
            "name=acme",
        ] {
            let Err(ApiError::BadRequest(message)) = field_selector(refused) else {
                panic!("{refused:?} is refused");
            };
            assert!(message.starts_with(&format!("fieldSelector {refused:?} ")), "{message}");
        }
        let Err(ApiError::BadRequest(message)) = field_selector("spec.kubernetesVersion=1.31.1") else {
            panic!("other fields are refused");
        };
        assert!(message.contains("only metadata.name=NAME (or metadata.name==NAME) is"), "{message}");
    }
}

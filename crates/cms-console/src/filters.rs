//! The tenants page's query: a name substring (`q`), a label selector
//! (`label`, parsed as the API's `labelSelector` is, Kubernetes' syntax:
//! `team in (a,b),env!=prod`), a phase (`phase`) and the page (`page`, from
//! 1). Filtering reads the store's cached objects: the name from the key,
//! and for labels and phase only those two fields of the stored JSON.

use std::collections::BTreeMap;

use cms_model::{LabelSelector, Phase, SelectorError};
use cms_store::Object;
use serde::Deserialize;

use crate::form::Form;
use crate::summary::{PHASES, phase_name};

/// How many tenants a page shows.
pub(crate) const PER_PAGE: usize = 50;

/// A parsed tenants query.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Filters {
    pub(crate) q: String,
    /// The label selector as typed, trimmed.
    pub(crate) label: String,
    /// `label`, parsed; empty when `label` is empty or malformed.
    pub(crate) selector: LabelSelector,
    /// Why `label` is malformed, for people: the page then shows the
    /// message at the field and lists nothing.
    pub(crate) label_error: Option<String>,
    pub(crate) phase: Option<Phase>,
    /// The page, from 1.
    pub(crate) page: usize,
}

/// A query the page cannot serve, for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadQuery(pub(crate) String);

impl Filters {
    pub(crate) fn parse(query: &Form) -> Result<Filters, BadQuery> {
        let phase = match query.optional("phase") {
            None => None,
            Some(name) => Some(
                PHASES
                    .into_iter()
                    .find(|phase| phase_name(*phase) == name)
                    .ok_or_else(|| BadQuery(format!("There is no phase {name:?}.")))?,
            ),
        };
        let page = match query.optional("page") {
            None => 1,
            Some(text) => text
                .parse::<usize>()
                .ok()
                .filter(|page| *page >= 1)
                .ok_or_else(|| BadQuery(format!("The page must be a number from 1, not {text:?}.")))?,
        };
        let label = query.get("label").trim().to_string();
        let (selector, label_error) = match LabelSelector::parse(&label) {
            Ok(selector) => (selector, None),
            Err(err) => (LabelSelector::default(), Some(selector_message(&label, &err))),
        };
        Ok(Filters { q: query.get("q").trim().to_lowercase(), label, selector, label_error, phase, page })
    }

    /// Whether anything but the page narrows the list.
    pub(crate) fn narrows(&self) -> bool {
        !self.q.is_empty() || !self.label.is_empty() || self.phase.is_some()
    }

    /// Whether the stored tenant `object` matches.
    pub(crate) fn matches(&self, object: &Object) -> bool {
        if !object.key.name.contains(&self.q) {
            return false;
        }
        if self.label_error.is_some() {
            return false;
        }
        if self.selector.is_empty() && self.phase.is_none() {
            return true;
        }
        let Ok(fields) = serde_json::from_slice::<Filtered>(&object.json) else { return false };
        self.selector.matches(&fields.metadata.labels)
            && self.phase.is_none_or(|phase| fields.status.phase == phase)
    }

    /// The offset of the page's first tenant.
    pub(crate) fn offset(&self) -> usize {
        (self.page - 1).saturating_mul(PER_PAGE)
    }

    /// The query string of the same filters on `page`.
    pub(crate) fn query_for(&self, page: usize) -> String {
        let mut query = form_urlencoded::Serializer::new(String::new());
        if !self.q.is_empty() {
            query.append_pair("q", &self.q);
        }
        if !self.label.is_empty() {
            query.append_pair("label", &self.label);
        }
        if let Some(phase) = self.phase {
            query.append_pair("phase", phase_name(phase));
        }
        if page > 1 {
            query.append_pair("page", &page.to_string());
        }
        query.finish()
    }
}

/// What is wrong with a malformed label selector, as a sentence; a
/// selector too long to repeat is not quoted.
pub(crate) fn selector_message(label: &str, err: &SelectorError) -> String {
    match err {
        SelectorError::TooLong { .. } => format!("The label selector is not valid: {err}."),
        err => format!("The label selector {label:?} is not valid: {err}."),
    }
}

/// The two fields filtering needs from a stored tenant; the rest of the
/// JSON is skipped.
#[derive(Deserialize)]
struct Filtered {
    metadata: FilteredMeta,
    #[serde(default)]
    status: FilteredStatus,
}

#[derive(Deserialize)]
struct FilteredMeta {
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

#[derive(Default, Deserialize)]
struct FilteredStatus {
    #[serde(default)]
    phase: Phase,
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use cms_store::Key;

    fn filters(query: &str) -> Result<Filters, BadQuery> {
        let request = http::Request::builder().uri(format!("/?{query}")).body(Bytes::new()).expect("request");
        Filters::parse(&Form::query(&request))
    }

    fn tenant(name: &str, labels: &str, phase: &str) -> Object {
        let json = format!(
            r#"{{"metadata":{{"name":"{name}","labels":{labels}}},"spec":{{}},"status":{{"phase":"{phase}"}}}}"#
        );
        Object {
            key: Key::tenant(name),
            resource_version: 1,
            generation: 1,
            deleting: false,
            json: Bytes::from(json),
        }
    }

    #[test]
    fn queries_parse_and_refuse_what_they_cannot_mean() {
        let parsed = filters("q=Web&label=env%3Dprod&phase=active&page=3").expect("parses");
        assert_eq!(
            (parsed.q.as_str(), parsed.label.as_str(), parsed.phase, parsed.page),
            ("web", "env=prod", Some(Phase::Active), 3)
        );
        assert_eq!(parsed.offset(), 100);
        assert_eq!(parsed.query_for(4), "q=web&label=env%3Dprod&phase=active&page=4");
        assert_eq!(filters("").expect("parses"), Filters { page: 1, ..Filters::default() });
        assert!(filters("phase=sleeping").is_err());
        assert!(filters("page=0").is_err());
        let malformed = filters("label=%3Dx").expect("a malformed selector is shown at its field");
        assert_eq!(
            malformed.label_error.as_deref(),
            Some("The label selector \"=x\" is not valid: found '=', expected a key, '!' or the end.")
        );
        assert!(!malformed.matches(&tenant("web-1", "{}", "active")), "it lists nothing");
    }

    #[test]
    fn tenants_match_by_name_labels_and_phase() {
        let web = tenant("web-1", r#"{"env":"prod","team":"a"}"#, "active");
        let check = |query: &str, expected: bool| {
            assert_eq!(filters(query).expect("parses").matches(&web), expected, "{query}");
        };
        check("", true);
        check("q=web", true);
        check("q=db", false);
        check("label=env%3Dprod", true);
        check("label=env%3Dprod,team", true);
        check("label=env%3Ddev", false);
        check("label=owner", false);
        check("label=team+in+(a,b),env!%3Dprod", false);
        check("label=team+in+(a,b),env!%3Ddev", true);
        check("label=!owner", true);
        check("label=team+notin+(a)", false);
        check("phase=active", true);
        check("phase=failed", false);
    }
}

//! The query of list requests: `limit`, `offset`, `labelSelector`, and for
//! tenants `watch` with its resume point (`resourceVersion` or the
//! `Last-Event-ID` header); for the audit log, its filters.

use std::future::{Ready, ready};

use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest, web};
use cms_model::{LabelSelector, Page, SelectorError};
use cms_store::AuditFilter;
use serde::Deserialize;

use crate::error::ApiError;

/// The header an SSE client sends to resume after the last `id` it saw.
const LAST_EVENT_ID: &str = "last-event-id";

/// A parsed list query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListQuery {
    pub(crate) page: Page,
    /// `labelSelector`: which objects to list (and, for a watch, to
    /// follow); empty when absent, which matches everything.
    pub(crate) selector: LabelSelector,
    /// Whether the client asked for a watch stream instead of a list.
    pub(crate) watch: bool,
    /// For a watch, the revision to resume after.
    pub(crate) since: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct RawQuery {
    limit: Option<String>,
    offset: Option<String>,
    #[serde(rename = "labelSelector")]
    label_selector: Option<String>,
    watch: Option<String>,
    #[serde(rename = "resourceVersion")]
    resource_version: Option<String>,
}

impl ListQuery {
    /// Refuses `watch=true` on lists that have no watch.
    pub(crate) fn without_watch(self) -> Result<ListQuery, ApiError> {
        if self.watch {
            return Err(ApiError::BadRequest("watch is only supported on tenants".to_string()));
        }
        Ok(self)
    }

    /// The page of a list of things without labels, such as projected
    /// resources: refuses `watch=true` and a `labelSelector` that is not empty.
    pub(crate) fn page_only(self, what: &str) -> Result<Page, ApiError> {
        let query = self.without_watch()?;
        if !query.selector.is_empty() {
            return Err(ApiError::BadRequest(format!(
                "labelSelector is not supported on {what}: they have no labels"
            )));
        }
        Ok(query.page)
    }

    fn parse(req: &HttpRequest) -> Result<ListQuery, ApiError> {
        let raw = web::Query::<RawQuery>::from_query(req.query_string())
            .map_err(|err| ApiError::BadRequest(format!("bad query: {err}")))?
            .into_inner();
        let page = Page::parse(raw.limit.as_deref(), raw.offset.as_deref())
            .map_err(|err| ApiError::BadRequest(err.to_string()))?;
        let selector = raw.label_selector.as_deref().map(selector).transpose()?.unwrap_or_default();
        let watch = boolean(req.query_string(), "watch", raw.watch.as_deref())?;
        // Checked even when not watching: a bad query parameter is 400, never ignored.
        let resource_version =
            raw.resource_version.as_deref().map(|raw| revision("resourceVersion", raw)).transpose()?;
        let since = match watch {
            false => None,
            true => match resource_version {
                Some(revision) => Some(revision),
                None => match req.headers().get(LAST_EVENT_ID) {
                    None => None,
                    Some(value) => Some(revision("Last-Event-ID", value.to_str().unwrap_or("?"))?),
                },
            },
        };
        Ok(ListQuery { page, selector, watch, since })
    }
}

/// A boolean query parameter's value: absent, `false` or `0` is false;
/// `true`, `1` or the bare name (`?watch`, as Kubernetes takes it) is true.
/// Anything else, an empty value (`?watch=`) too, is 400 naming it.
pub(crate) fn boolean(query: &str, name: &str, value: Option<&str>) -> Result<bool, ApiError> {
    match value {
        None | Some("false" | "0") => Ok(false),
        Some("true" | "1") => Ok(true),
        Some("") if query.split('&').any(|pair| pair == name) => Ok(true),
        Some(other) => {
            let shown: String = other.chars().take(64).collect();
            Err(ApiError::BadRequest(format!("{name} must be true or false, got {shown:?}")))
        }
    }
}

/// Parses `labelSelector`; a malformed one is 400, its message naming the
/// selector (quoted, unless it is too long to repeat) and what is wrong.
fn selector(raw: &str) -> Result<LabelSelector, ApiError> {
    LabelSelector::parse(raw).map_err(|err| match err {
        SelectorError::TooLong { .. } => ApiError::BadRequest(format!("labelSelector is not valid: {err}")),
        err => ApiError::BadRequest(format!("labelSelector {raw:?} is not valid: {err}")),
    })
}

fn revision(name: &str, raw: &str) -> Result<u64, ApiError> {
    raw.trim()
        .parse::<u64>()
        .map_err(|_| ApiError::BadRequest(format!("{name} must be a non-negative integer, got {raw:?}")))
}

impl FromRequest for ListQuery {
    type Error = ApiError;
    type Future = Ready<Result<ListQuery, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(ListQuery::parse(req))
    }
}

/// The query of `GET /audit`: a page and the filters `actor` and `tenant`.
/// Any other parameter is 400, so that a misspelt filter never lists
/// everything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AuditQuery {
    pub(crate) page: Page,
    pub(crate) filter: AuditFilter,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAuditQuery {
    limit: Option<String>,
    offset: Option<String>,
    actor: Option<String>,
    tenant: Option<String>,
}

impl AuditQuery {
    fn parse(req: &HttpRequest) -> Result<AuditQuery, ApiError> {
        let raw = web::Query::<RawAuditQuery>::from_query(req.query_string())
            .map_err(|err| ApiError::BadRequest(format!("bad query: {err}")))?
            .into_inner();
        let page = Page::parse(raw.limit.as_deref(), raw.offset.as_deref())
            .map_err(|err| ApiError::BadRequest(err.to_string()))?;
        let filter =
            AuditFilter { actor: filter("actor", raw.actor)?, tenant: filter("tenant", raw.tenant)? };
        Ok(AuditQuery { page, filter })
    }
}

fn filter(name: &str, value: Option<String>) -> Result<Option<String>, ApiError> {
    match value {
        Some(value) if value.is_empty() => Err(ApiError::BadRequest(format!("{name} must not be empty"))),
        value => Ok(value),
    }
}

impl FromRequest for AuditQuery {
    type Error = ApiError;
    type Future = Ready<Result<AuditQuery, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(AuditQuery::parse(req))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    fn parse(uri: &str, last_event_id: Option<&str>) -> Result<ListQuery, ApiError> {
        let mut req = TestRequest::get().uri(uri);
        if let Some(id) = last_event_id {
            req = req.insert_header((LAST_EVENT_ID, id));
        }
        ListQuery::parse(&req.to_http_request())
    }

    #[test]
    fn pages_and_watches() {
        let query = parse("/t?limit=5&offset=2", None).unwrap();
        let expected = ListQuery {
            page: Page { limit: 5, offset: 2 },
            selector: LabelSelector::default(),
            watch: false,
            since: None,
        };
        assert_eq!(query, expected);
        assert_eq!(parse("/t?watch=true", None).unwrap().since, None);
        assert_eq!(parse("/t?watch=true&resourceVersion=7", Some("9")).unwrap().since, Some(7));
        assert_eq!(parse("/t?watch=true", Some("9")).unwrap().since, Some(9));
        assert_eq!(parse("/t", Some("junk")).unwrap().since, None, "only watches read the header");
    }

    #[test]
    fn label_selectors_parse_for_lists_and_watches() {
        let query = parse("/t?labelSelector=team%20in%20(a%2Cb)%2Cenv!%3Dprod&limit=2", None).unwrap();
        assert_eq!(query.selector, LabelSelector::parse("team in (a,b),env!=prod").unwrap());
        assert_eq!(query.page.limit, 2);
        let watch = parse("/t?watch=true&labelSelector=team%3Da", None).unwrap();
        assert!(watch.watch, "a selector does not stop a watch");
        assert_eq!(watch.selector, LabelSelector::parse("team=a").unwrap());
        assert!(parse("/t?labelSelector=", None).unwrap().selector.is_empty());
        let Err(ApiError::BadRequest(message)) = parse("/t?labelSelector=x%20in%20(a", None) else {
            panic!("a malformed selector is 400");
        };
        assert_eq!(message, r#"labelSelector "x in (a" is not valid: found the end, expected ',' or ')'"#);
        let long = format!("/t?labelSelector={}", "x".repeat(cms_model::MAX_SELECTOR_BYTES + 1));
        let Err(ApiError::BadRequest(message)) = parse(&long, None) else { panic!("too long is 400") };
        assert!(message.starts_with("labelSelector is not valid: it is 4097 bytes long"), "{message}");
        let refused = parse("/t?labelSelector=team", None).unwrap().page_only("projected resources");
        assert!(matches!(refused, Err(ApiError::BadRequest(message)) if message.contains("no labels")));
        assert_eq!(parse("/t?limit=3", None).unwrap().page_only("projected resources").unwrap().limit, 3);
    }

    #[test]
    fn bad_values_are_400() {
        for (uri, header) in [
            ("/t?limit=x", None),
            ("/t?limit=0", None),
            ("/t?offset=-1", None),
            ("/t?watch=maybe", None),
            ("/t?watch=", None),
            ("/t?watch=true&resourceVersion=x", None),
            ("/t?resourceVersion=-1", None),
            ("/t?watch=true", Some("-3")),
        ] {
            assert!(matches!(parse(uri, header), Err(ApiError::BadRequest(_))), "{uri} {header:?}");
        }
    }

    fn audit(uri: &str) -> Result<AuditQuery, ApiError> {
        AuditQuery::parse(&TestRequest::get().uri(uri).to_http_request())
    }

    #[test]
    fn audit_pages_and_filters() {
        let query = audit("/a?limit=2&offset=4&actor=dev&tenant=acme").unwrap();
        assert_eq!(query.page, Page { limit: 2, offset: 4 });
        assert_eq!(query.filter, AuditFilter { actor: Some("dev".into()), tenant: Some("acme".into()) });
        assert_eq!(
            audit("/a").unwrap(),
            AuditQuery { page: Page::default(), filter: AuditFilter::default() }
        );
        for uri in
            ["/a?limit=x", "/a?offset=-1", "/a?limit=1001", "/a?actr=dev", "/a?actor=", "/a?watch=true"]
        {
            assert!(matches!(audit(uri), Err(ApiError::BadRequest(_))), "{uri}");
        }
    }
}

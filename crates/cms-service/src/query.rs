//! The query of list requests: `limit`, `offset`, and for tenants `watch`
//! with its resume point (`resourceVersion` or the `Last-Event-ID` header).

use std::future::{Ready, ready};

use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest, web};
use cms_model::Page;
use serde::Deserialize;

use crate::error::ApiError;

/// The header an SSE client sends to resume after the last `id` it saw.
const LAST_EVENT_ID: &str = "last-event-id";

/// A parsed list query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ListQuery {
    pub(crate) page: Page,
    /// Whether the client asked for a watch stream instead of a list.
    pub(crate) watch: bool,
    /// For a watch, the revision to resume after.
    pub(crate) since: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct RawQuery {
    limit: Option<String>,
    offset: Option<String>,
    watch: Option<String>,
    #[serde(rename = "resourceVersion")]
    resource_version: Option<String>,
}

impl ListQuery {
    /// Refuses `watch=true` on lists that have no watch.
    pub(crate) fn without_watch(self) -> Result<Page, ApiError> {
        if self.watch {
            return Err(ApiError::BadRequest("watch is only supported on tenants".to_string()));
        }
        Ok(self.page)
    }

    fn parse(req: &HttpRequest) -> Result<ListQuery, ApiError> {
        let raw = web::Query::<RawQuery>::from_query(req.query_string())
            .map_err(|err| ApiError::BadRequest(format!("bad query: {err}")))?
            .into_inner();
        let page = Page::parse(raw.limit.as_deref(), raw.offset.as_deref())
            .map_err(|err| ApiError::BadRequest(err.to_string()))?;
        let watch = match raw.watch.as_deref() {
            None | Some("false" | "0") => false,
            Some("true" | "1" | "") => true,
            Some(other) => {
                return Err(ApiError::BadRequest(format!("watch must be true or false, got {other:?}")));
            }
        };
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
        Ok(ListQuery { page, watch, since })
    }
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
        assert_eq!(query, ListQuery { page: Page { limit: 5, offset: 2 }, watch: false, since: None });
        assert_eq!(parse("/t?watch=true", None).unwrap().since, None);
        assert_eq!(parse("/t?watch=true&resourceVersion=7", Some("9")).unwrap().since, Some(7));
        assert_eq!(parse("/t?watch=true", Some("9")).unwrap().since, Some(9));
        assert_eq!(parse("/t", Some("junk")).unwrap().since, None, "only watches read the header");
    }

    #[test]
    fn bad_values_are_400() {
        for (uri, header) in [
            ("/t?limit=x", None),
            ("/t?limit=0", None),
            ("/t?offset=-1", None),
            ("/t?watch=maybe", None),
            ("/t?watch=true&resourceVersion=x", None),
            ("/t?resourceVersion=-1", None),
            ("/t?watch=true", Some("-3")),
        ] {
            assert!(matches!(parse(uri, header), Err(ApiError::BadRequest(_))), "{uri} {header:?}");
        }
    }
}

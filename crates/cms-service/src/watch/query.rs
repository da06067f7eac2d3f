//! The watch's own query parameters, beside those of every list
//! (`crate::query::ListQuery`): `allowWatchBookmarks` and `fieldSelector`.

use std::future::{Ready, ready};

use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest, web};
use serde::Deserialize;

use super::filter::field_selector;
use crate::error::ApiError;
use crate::query::boolean;

/// `allowWatchBookmarks` and the name of `fieldSelector=metadata.name=NAME`.
/// Both are checked on every request that takes them, watch or not: a bad
/// value is 400, never ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct WatchQuery {
    /// Whether a watch sends `BOOKMARK` frames.
    pub(crate) bookmarks: bool,
    /// The one object's name the field selector asks for.
    pub(crate) name: Option<String>,
}

#[derive(Debug, Deserialize)]
struct RawQuery {
    #[serde(rename = "allowWatchBookmarks")]
    allow_watch_bookmarks: Option<String>,
    #[serde(rename = "fieldSelector")]
    field_selector: Option<String>,
}

impl WatchQuery {
    fn parse(req: &HttpRequest) -> Result<WatchQuery, ApiError> {
        let raw = web::Query::<RawQuery>::from_query(req.query_string())
            .map_err(|err| ApiError::BadRequest(format!("bad query: {err}")))?
            .into_inner();
        let bookmarks =
            boolean(req.query_string(), "allowWatchBookmarks", raw.allow_watch_bookmarks.as_deref())?;
        let name = raw.field_selector.as_deref().map(field_selector).transpose()?.flatten();
        Ok(WatchQuery { bookmarks, name })
    }
}

impl FromRequest for WatchQuery {
    type Error = ApiError;
    type Future = Ready<Result<WatchQuery, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(WatchQuery::parse(req))
    }
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::*;

    fn parse(uri: &str) -> Result<WatchQuery, ApiError> {
        WatchQuery::parse(&TestRequest::get().uri(uri).to_http_request())
    }

    #[test]
    fn bookmarks_and_field_selectors() {
        assert_eq!(parse("/t?watch=true").unwrap(), WatchQuery::default());
        assert!(parse("/t?allowWatchBookmarks=true").unwrap().bookmarks);
        assert!(parse("/t?allowWatchBookmarks=1").unwrap().bookmarks);
        assert!(parse("/t?allowWatchBookmarks").unwrap().bookmarks);
        assert!(!parse("/t?allowWatchBookmarks=false").unwrap().bookmarks);
        let named = parse("/t?fieldSelector=metadata.name%3Dacme").unwrap();
        assert_eq!(named.name.as_deref(), Some("acme"));
        let named = parse("/t?fieldSelector=metadata.name%3D%3Dacme&allowWatchBookmarks=true").unwrap();
        assert_eq!(named, WatchQuery { bookmarks: true, name: Some("acme".to_string()) });
        assert_eq!(parse("/t?fieldSelector=").unwrap().name, None);
    }

    #[test]
    fn bad_values_are_400() {
        for uri in [
            "/t?allowWatchBookmarks=yes",
            "/t?allowWatchBookmarks=",
            "/t?allowWatchBookmarks=TRUE",
            "/t?fieldSelector=metadata.name!%3Dacme",
            "/t?fieldSelector=status.phase%3Dactive",
            "/t?fieldSelector=metadata.name%3DACME",
        ] {
            assert!(matches!(parse(uri), Err(ApiError::BadRequest(_))), "{uri}");
        }
        let Err(ApiError::BadRequest(message)) = parse("/t?fieldSelector=spec.x%3D1") else { panic!("400") };
        assert!(message.starts_with(r#"fieldSelector "spec.x=1" is not supported"#), "{message}");
    }
}

//! List responses and their pagination (decisions §7).

use serde::{Deserialize, Serialize};

/// A page of a list: `{items, total}`, where `total` counts every item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct List<T> {
    pub items: Vec<T>,
    pub total: u64,
}

/// Which slice of a list to return. Items are sorted by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    pub limit: usize,
    pub offset: usize,
}

impl Page {
    pub const DEFAULT_LIMIT: usize = 100;
    pub const MAX_LIMIT: usize = 1000;

    /// Builds a page from the raw `limit` and `offset` query values.
    pub fn parse(limit: Option<&str>, offset: Option<&str>) -> Result<Page, PageError> {
        let limit = match limit {
            None => Page::DEFAULT_LIMIT,
            Some(raw) => number("limit", raw)?,
        };
        if !(1..=Page::MAX_LIMIT).contains(&limit) {
            return Err(PageError(format!("limit must be between 1 and {}", Page::MAX_LIMIT)));
        }
        let offset = match offset {
            None => 0,
            Some(raw) => number("offset", raw)?,
        };
        Ok(Page { limit, offset })
    }
}

impl Default for Page {
    fn default() -> Page {
        Page { limit: Page::DEFAULT_LIMIT, offset: 0 }
    }
}

fn number(name: &str, raw: &str) -> Result<usize, PageError> {
    raw.parse::<usize>().map_err(|_| PageError(format!("{name} must be a non-negative integer, got {raw:?}")))
}

/// A bad `limit` or `offset`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PageError(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds() {
        assert_eq!(Page::parse(None, None).unwrap(), Page { limit: 100, offset: 0 });
        assert_eq!(Page::parse(Some("1000"), Some("7")).unwrap(), Page { limit: 1000, offset: 7 });
        for (limit, offset) in [("0", "0"), ("1001", "0"), ("-1", "0"), ("x", "0"), ("1", "-2"), ("1", "1.5")]
        {
            assert!(Page::parse(Some(limit), Some(offset)).is_err(), "{limit} {offset}");
        }
    }
}

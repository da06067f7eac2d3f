//! The headers every console answer carries, whatever it is: a page, a
//! redirect, an asset, a download or the event stream.
//!
//! The content security policy allows scripts, styles, images, fonts and
//! connections from this origin only, and nothing inline: the pages carry
//! no `<script>` body, no `style=` attribute and no `on*=` handler, so an
//! injected one does not run. No other site may frame a page, a `<base>`
//! cannot move relative links, and forms post to this origin only.

use http::HeaderMap;
use http::HeaderValue;
use http::header::{CONTENT_SECURITY_POLICY, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS};

/// The policy of every answer.
pub(crate) const CONTENT_SECURITY_POLICY_VALUE: &str =
    "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// Adds the security headers to an answer's `headers`.
pub(crate) fn protect(headers: &mut HeaderMap) {
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY_VALUE));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("same-origin"));
}

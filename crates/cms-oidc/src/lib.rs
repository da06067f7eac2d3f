//! OpenID Connect for `cms`, on the relying party's side.
//!
//! - [`Issuer`]: one trusted issuer: its discovery document and its signing
//!   keys (JWKS), each cached, the keys fetched again when a token names one
//!   the cache does not hold, so a key rollover needs no restart; and the
//!   verification of its tokens (signature, `iss`, `aud`, `exp`, `nbf`,
//!   `nonce`) with `jsonwebtoken`.
//! - [`CodeFlow`]: the authorization code flow with PKCE for a confidential
//!   client (`oauth2`): the authorization URL, and a code exchanged for a
//!   verified ID token.
//! - [`Transport`]: the one IO seam, an HTTP exchange; [`HttpTransport`] is
//!   `reqwest`'s. Mocked under the `testsuite` feature, which also brings
//!   [`testing`]: signing keys and a fake issuer.

mod claims;
mod error;
mod flow;
mod issuer;
mod keys;
#[cfg(any(test, feature = "testsuite"))]
pub mod testing;
mod transport;

pub use claims::Claims;
pub use error::OidcError;
pub use flow::{AuthorizationRequest, CodeFlow, pkce_challenge, pkce_pair};
pub use issuer::{Expected, Issuer, Metadata};
#[cfg(any(test, feature = "testsuite"))]
pub use transport::MockTransport;
pub use transport::{HttpTransport, Transport};

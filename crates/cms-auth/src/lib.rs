//! Authentication and authorization for `cms`, with no HTTP in it.
//!
//! - [`password`]: bcrypt hashing at cost 12, and a verify that costs the same
//!   whether or not the user exists.
//! - [`LoginTokens`]: HS256 login JWTs with a pinned algorithm and a type claim.
//! - [`api_token`]: API tokens of 256 random bits, kept only as hashes.
//! - [`Permission`]: the role × action matrix of decisions §3, as data.
//! - [`LoginThrottle`]: at most 5 failed logins per user per minute.
//! - [`Authenticator`]: ties them to the store's [`cms_store::Accounts`].

pub mod api_token;
mod authenticator;
mod bootstrap;
mod error;
mod jwt;
pub mod password;
mod permission;
mod random;
mod throttle;

pub use authenticator::{AuthOptions, Authenticator, Caller, Credential, LoginsHeld};
pub use bootstrap::{BOOTSTRAP_ADMIN, FirstAdmin, bootstrap_admin, create_first_admin};
pub use error::AuthError;
pub use jwt::{LoginClaims, LoginTokens, SIGNING_KEY_SETTING};
pub use permission::Permission;
pub use throttle::LoginThrottle;

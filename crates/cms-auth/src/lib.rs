//! Authentication and authorization for `cms`, with no HTTP in it.
//!
//! - [`password`]: bcrypt hashing at cost 12, and a verify that costs the same
//!   whether or not the user exists.
//! - [`LoginTokens`]: HS256 login JWTs with a pinned algorithm and a type claim.
//! - [`api_token`]: API tokens of 256 random bits, kept only as hashes.
//! - [`Permission`]: the role × action matrix of decisions §3, as data.
//! - [`LoginThrottle`]: failed logins counted per user and address, per
//!   address and per user, so that a stranger locks out their own address
//!   rather than the user; `password_checks.rs` bounds how many password
//!   checks of logins run at once.
//! - [`Limits`] (`limits.rs`): per identity, the watch streams held open
//!   ([`WatchSlot`]) and the request rate; their tables and the login
//!   throttle's are the same sharded, bounded map (`limits/shards.rs`).
//! - [`sso`]: single sign-on at an OpenID Connect provider, its groups
//!   mapped to roles, and trusted workload issuers, their subjects mapped
//!   to roles; `federated.rs` checks their tokens with `cms-oidc`.
//! - [`Caller`] (`identity.rs`): who calls, with which global role,
//!   credential and identity source, and the grants that name it.
//! - [`Grant`] (`grants.rs`): a role on the tenants a grant covers, and
//!   [`role_on`], a caller's role on one tenant: its global role joined
//!   with its grants'. `grant_records.rs`: the grants the authenticator
//!   reads (cached like roles), writes and attaches to each caller.
//! - [`Authenticator`]: ties them to the store's [`cms_store::Accounts`];
//!   `bootstrap.rs` creates the first admin on an empty store.

pub mod api_token;
mod authenticator;
mod bootstrap;
mod error;
mod federated;
mod grant_records;
mod grants;
mod identity;
mod jwt;
mod limits;
pub mod password;
mod password_checks;
mod permission;
mod random;
mod seen;
pub mod sso;
mod throttle;

pub use authenticator::{AuthOptions, Authenticator, LoginsHeld};
pub use bootstrap::{BOOTSTRAP_ADMIN, FirstAdmin, bootstrap_admin, create_first_admin};
/// A fresh PKCE pair (S256 challenge, verifier) for a sign-in.
pub use cms_oidc::pkce_pair;
pub use error::AuthError;
pub use federated::SsoLogin;
pub use grants::{Grant, Grants, Labels, role_on, tenant_labels};
pub use identity::{Caller, Credential, Source};
pub use jwt::{LoginClaims, LoginTokens, SsoClaims};
pub use limits::{LimitOptions, Limits, WATCH_RETRY_AFTER, WatchSlot};
pub use permission::Permission;
pub use throttle::LoginThrottle;

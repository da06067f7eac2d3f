//! Health probes of tenant clusters, on request only: there is no
//! background scraping.
//!
//! A probe asks the tenant's machines for their Talos version through the
//! node API, up to 16 at once, all within one deadline (2 s): the answer is
//! that of the first machine in probing order (control planes, then
//! workers, then the rest, each by name) that answers, taken as soon as no
//! machine before it can still answer, or at the deadline the best one so
//! far. [`Prober`] caches each tenant's result for
//! 15 s, as told by an injectable [`Clock`], and concurrent requests for one
//! tenant share one probe (single flight). [`Prober::all`] probes every
//! tenant with bounded parallelism.
//!
//! The seams: the node API ([`cms_nodeapi::NodeApi`]), the tenant's
//! credentials (`cms_tenancy::TenantCredentials`, whose real one opens the
//! tenant's sealed bundle) and the clock.

mod clock;
mod error;
mod health;
mod probe;
mod prober;

#[cfg(any(test, feature = "testsuite"))]
pub use clock::MockClock;
pub use clock::{Clock, ManualClock, SystemClock};
pub use error::ProberError;
pub use health::{Health, NO_CREDENTIALS, NO_REACHABLE_MACHINES};
pub use prober::{Prober, ProberOptions};

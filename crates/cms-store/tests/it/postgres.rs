//! The store conformance suite on PostgreSQL: a fresh database per test on
//! one throwaway server per test process.

use cms_store::conformance::postgres;

cms_store::conformance_suite!(postgres());

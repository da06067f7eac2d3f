//! The store conformance suite on embedded SQLite.

use cms_store::conformance::sqlite;

cms_store::conformance_suite!(sqlite());

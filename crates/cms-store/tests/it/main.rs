//! The store's integration tests: the conformance suite on SQLite and on
//! PostgreSQL, and what only several replicas on PostgreSQL can show.

mod outage;
mod postgres;
mod proxy;
mod replicas;
mod sqlite;

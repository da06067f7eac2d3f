//! The store's integration tests: the conformance suite on SQLite and on
//! PostgreSQL, and what only several replicas on PostgreSQL can show; the
//! embedded database's backup and restore.

mod backup;
mod migrations;
mod outage;
mod postgres;
mod proxy;
mod replicas;
mod sqlite;
mod state_locks;
mod statements;

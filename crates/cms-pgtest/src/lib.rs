//! A throwaway PostgreSQL server for tests.
//!
//! [`PgServer::start`] runs `initdb` (as the `postgres` user when the tests
//! run as root) in a fresh directory, starts `postgres` on a free loopback
//! port with `fsync` on, and waits until it accepts connections.
//! [`PgServer::database`] creates an empty database and returns its URL.
//! [`PgServer::stop`] and [`PgServer::restart`] take the server down and
//! bring it back on the same port and data, for outage tests. Dropping the
//! server stops it and removes its directory.
//!
//! [`PgServer::shared`] is one server per test process, for tests that only
//! need a fresh database each: they stay fast. A shared server is never
//! dropped, so the server is watched by a small shell that stops it and
//! removes its directory as soon as the test process exits, however it
//! exits: it reads the process's end of a pipe, which closes at exit.
//!
//! The binaries come from `CMS_TEST_PG_BIN`, else from `initdb` on `PATH`,
//! else from `/usr/lib/postgresql/*/bin`. Without them, the harness panics
//! with a message that says how to install them: tests never skip.

mod binaries;
mod server;

pub use binaries::{BIN_VARIABLE, client_tool, find_binaries};
pub use server::PgServer;

//! Consistency checkers over histories recorded against the real server.
//!
//! The recording happens elsewhere (`cargo xtask soak` drives the server over
//! HTTP); this crate only judges what was recorded, and does no IO.
//!
//! - [`linearizability`]: a Wing–Gong search with Lowe's memoisation that
//!   decides whether a history of concurrent operations on one object has a
//!   linearization under a sequential [`linearizability::Model`], and
//!   [`register`], the model of a tenant as a register whose writes are
//!   compare-and-set on `resourceVersion`.
//! - [`watch`]: checks that every watcher's events, across disconnects and
//!   resumes, are the authoritative event log in order, once each, without gaps.

pub mod linearizability;
pub mod register;
pub mod watch;

//! End-to-end tests: the real `cms-server` binary, started by each test on a
//! free loopback port with a fresh data directory, and driven over HTTP.
//!
//! Build the binary first (`cargo build -p cms-server`), or run
//! `cargo xtask e2e`, which does both.

mod api_guide;
mod at_rest;
mod audit;
mod auth;
mod backup;
mod backup_schedules;
mod backups;
mod backups_s3;
mod cli_accounts;
mod cli_backups;
mod cli_health;
mod cli_logs;
mod cli_provisioning;
mod cli_resources;
mod cli_walkthrough;
mod cli_watch;
mod cli_watch_relist;
mod cloud_harness;
mod config_patches;
mod conflicts;
mod console;
mod console_accounts;
mod console_backups;
mod console_editing;
mod console_logs;
mod console_selectors;
mod console_sso;
mod deletion;
mod durability;
mod errors;
mod generation;
mod grants;
mod health;
mod inline_groups;
mod key_rotation;
mod limits;
mod live;
mod machines;
mod metrics;
mod node_groups;
mod operational;
mod pagination;
mod provisioning;
mod replicas;
mod secrets;
mod selectors;
mod shutdown;
mod sizes;
mod sso;
mod state_lock;
mod support;
mod tenants;
mod traces;
mod upgrades;
mod watch;
mod watch_resume;
mod workload;

//! `cms-tofu`: the provisioning driver, and the only crate of the workspace
//! that spawns a process.
//!
//! Each tenant has a workspace under the data directory. Its configuration is
//! generated as `main.tf.json` data by one module per provider (`metal`,
//! `oci`, `openstack`); the tool runs there (`init`, `apply`, `show -json`,
//! `destroy`) with a timeout that stops its whole process group, one run at a
//! time per tenant. Cloud credentials come from the service's environment
//! only and are redacted from whatever the tool prints; so are the
//! machines' user data, which reach the tool in its environment only, and
//! any PEM block or its base64.
//!
//! Where things are: `process.rs`, the one place a process is spawned (a
//! process group per run, SIGTERM then SIGKILL at the timeout); `workspace.rs`
//! and `providers/`, a `WorkspacePlan` to `main.tf.json`; `template.rs`,
//! the one place user strings are escaped so that the tool never reads them
//! as templates, and the service's own expressions kept apart; `driver.rs`
//! ([`Tofu`]), the per-tenant workspace (0700) and its runs, with the inputs
//! hash of an apply; `credentials.rs`, `OCI_CLI_*` and `OS_*` from the
//! environment, fingerprinted and redacted; `user_data.rs`, cloud user data
//! as one sensitive variable per node group set through `TF_VAR_*`; `encryption.rs`, OpenTofu's state
//! encryption block; `state.rs`, `show -json` to projected resources;
//! `lock.rs`, the engine's state lock (the
//! local lock file, `force-unlock`, the `pg` connection's `application_name`);
//! `drift.rs`, `plan -detailed-exitcode` and the resources and attribute
//! names that differ (`Tofu::plan`); `run_log.rs`, the last redacted output of each apply,
//! plan and destroy per tenant until the caller takes it ([`Tofu::take_run`]); `readback.rs`, what is read back from the state after an apply (the
//! made endpoint's address, instances their group no longer asks for). `Runner`
//! is the IO seam, with a mock. Details: `docs/provisioning.md`.

mod credentials;
mod drift;
mod driver;
mod encryption;
mod error;
mod lock;
mod process;
mod providers;
mod readback;
mod run_log;
mod runner;
mod state;
mod template;
mod user_data;
mod workspace;

pub use credentials::{CREDENTIAL_PREFIXES, Credentials, REDACTED};
pub use drift::{Drift, DriftedResource, PLAN_FILE, USER_DATA_STAND_IN, parse_plan};
pub use driver::{Applied, StateBackend, Tofu, TofuOptions, legacy_state_schema, state_schema};
pub use encryption::{
    Engine, block as encryption_block, fingerprint as state_key_fingerprint, passphrase as state_passphrase,
};
pub use error::TofuError;
pub use lock::{
    EngineLock, LOCK_INFO_FILE, application_name, application_prefix, holder_tag, lock_holder,
    parse_lock_info,
};
pub use process::{Invocation, Output};
pub use readback::endpoint_address;
#[cfg(any(test, feature = "testsuite"))]
pub use runner::MockRunner;
pub use runner::{ProcessRunner, Runner};
pub use state::{StateResource, parse_show, project};
pub use user_data::{MAX_ENV_STRING, PEM_BASE64_MARKERS, VARIABLE_PREFIX as USER_DATA_VARIABLE_PREFIX};
pub use workspace::{
    MAIN_FILE, MachinePlan, Network, WorkspacePlan, inputs_hash, resource_name, resource_type,
};

#[cfg(test)]
mod snapshots;
#[cfg(test)]
mod tests;

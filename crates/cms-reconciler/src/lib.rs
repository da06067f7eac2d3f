//! `cms-reconciler`: the reconcile controller that turns tenants' desired
//! state into infrastructure through `cms-tofu`, in kube-runtime's shape
//! (`reconcile(tenant, ctx) -> Result<Action>`, an error policy with
//! exponential backoff and jitter).
//!
//! It records the projection of the tool's state, keeps the machines in the
//! store in line with it, applies `metal` machine configs through the
//! [`MachineConfigApplier`] seam, writes tenant status (phase, conditions,
//! `observedGeneration`, `lastAppliedAt`) and carries out tenant deletion.

mod action;
mod applier;
mod controller;
mod error;
mod machines;
mod plan;
mod reconcile;
mod status;

pub use action::{Action, Backoff};
#[cfg(any(test, feature = "testsuite"))]
pub use applier::MockMachineConfigApplier;
pub use applier::{ApplyOutcome, ApplyTarget, MachineConfigApplier, NO_NODE_API_CLIENT, PendingApplier};
pub use controller::{ControllerOptions, run};
pub use error::ReconcileError;
pub use machines::{NODE_API_PORT, management_address};
#[cfg(any(test, feature = "testsuite"))]
pub use plan::MockMachineConfigs;
pub use plan::{MachineConfigs, desired, machine_id};
pub use reconcile::{Context, reconcile};
pub use status::{MACHINES_CONFIGURED, PROVISIONED};

#[cfg(test)]
mod tests;

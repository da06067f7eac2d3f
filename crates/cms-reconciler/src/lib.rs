//! `cms-reconciler`: the reconcile controller that turns tenants' desired
//! state into infrastructure through `cms-tofu`, in kube-runtime's shape
//! (`reconcile(tenant, ctx) -> Result<Action>`, an error policy with
//! exponential backoff and jitter).
//!
//! It records the projection of the tool's state, keeps the machines in the
//! store in line with it, applies `metal` machine configs and waits for
//! machines to answer through `cms_tenancy`'s `NodeClient` seam (and renders
//! cloud user data through its `MachineConfigs`), writes tenant status
//! (phase, `ready`, conditions, `observedGeneration`, `lastAppliedAt`) and
//! carries out tenant deletion.
//!
//! Where things are: `reconcile.rs`, converge or clean up one tenant;
//! `plan.rs`, the desired workspace (`<group>-<index>` machine ids; a
//! cloud tenant's endpoint made in two passes);
//! `view.rs`, the tenant's machines read once per pass and handed to each
//! phase; `machines.rs`, machines in the store from the projection;
//! `settle.rs`, machines take their config over the node API without a
//! reboot (tracked by `service.io/config-hash`; a configured host or a cloud
//! instance is only ever sent one over mTLS), and every machine is asked
//! `Version` each pass (`connected`, stage `off`); `rollout.rs`, the one
//! mechanism of every rolling procedure (Talos upgrades, reboots for config
//! changes, Kubernetes components then kubelets, in `rollout/`): control
//! planes one at a time (the etcd leader last, as `leader.rs` tells it),
//! then workers within `maxParallelism`, with their state in annotations
//! (`docs/upgrades.md`);
//! `outdated.rs`, instances whose image, shape or placement their group no
//! longer asks for, and `replacement.rs`, which replaces them one at a time,
//! each leaving first (`leaving.rs`: drain, leave etcd, reset, delete the
//! Node, each step a machine stage, for scale-downs and machines deleted
//! through the API too); `teardown.rs`, a deleted tenant's hosts reset;
//! `bootstrap.rs`, `Bootstrap` exactly once, the choice recorded before the
//! call and the outcome after it; `cluster.rs`, etcd's health and the
//! tenant's Kubernetes API; `readiness.rs`, machines ready when their Node
//! is; `status.rs`, the status writes (the reconciler writes all of tenant
//! status but `status.backups` and the `Restoring` condition) and the phase; `blocker.rs`, the
//! message of a tenant that is not ready (its first blocker, in a fixed order) and the bounds of
//! every message the reconciler writes; `controller.rs`, the loop (watch triggers, resync, bounded
//! concurrency, one task per tenant, fenced work leases on PostgreSQL);
//! `state_lock.rs`, the tool's state lock recorded in `status.stateLock` while
//! a run holds it, and a gone holder's lock released past a bound or on request;
//! `tool_runs.rs`, the tool's last output of each apply, plan and destroy kept in
//! the store for support bundles ([`record_tool_run`]);
//! `ca_rotation.rs`, a rotation of the tenant's CAs carried on phase by
//! phase, once every machine runs its phase's config (`docs/ca-rotation.md`);
//! `drift.rs`, drift detection: each tenant planned on its own interval
//! (`drift/schedule.rs`, bounded at once and per interval), the `Drifted`
//! condition, and an apply in `correct` mode;
//! `action.rs`, the backoff; `error.rs`, [`ReconcileError`], whose
//! `is_transient` keeps a tenant out of `failed` while a retry may succeed.
//! The tenant's lifecycle and its conditions: `docs/provisioning.md`.

mod action;
mod blocker;
mod bootstrap;
mod ca_rotation;
mod cluster;
mod controller;
mod drift;
mod error;
mod leader;
mod leaving;
mod machines;
mod outdated;
mod plan;
mod readiness;
mod reconcile;
mod replacement;
mod rollout;
mod settle;
mod state_lock;
mod status;
mod teardown;
mod tool_runs;
mod view;

pub use action::{Action, Backoff};
pub use blocker::{CONDITION_LIMIT, MACHINE_MESSAGE_LIMIT, MESSAGE_LIMIT, NAMED, TOOL_OUTPUT_LIMIT};
pub use bootstrap::{BOOTSTRAP_NODE_ANNOTATION, BOOTSTRAPPED_ANNOTATION};
pub use ca_rotation::CA_ROTATION;
pub use controller::{ControllerOptions, run};
pub use drift::{DRIFTED, DriftOptions, JITTER, SCHEDULER_LEASE, Trigger};
pub use error::ReconcileError;
pub use leaving::{DRAIN_TIMEOUT, LEAVING_ANNOTATION, RESET_TIMEOUT};
pub use machines::{CONFIGURED_HOSTS_ANNOTATION, NODE_API_PORT, management_address};
pub use outdated::{INSTANCES_CURRENT, OUTDATED_ANNOTATION};
pub use plan::{OCI_REGIONS_ANNOTATION, desired, machine_id};
pub use reconcile::{APPLIED_ANNOTATION, Context, LEAVE_POLL, LeaseOptions, NODE_RETRY, reconcile};
pub use replacement::REPLACING_ANNOTATION;
pub use rollout::{
    KUBELET_ANNOTATION, KUBERNETES_COMPONENTS_ANNOTATION, KUBERNETES_UPGRADING,
    KUBERNETES_VERSION_ANNOTATION, MACHINE_KUBERNETES_ANNOTATION, PAUSED_ANNOTATION, REBOOTING,
    REBOOTING_ANNOTATION, UPGRADE_TIMEOUT, UPGRADING_ANNOTATION,
};
pub use settle::{
    CONFIG_HASH_ANNOTATION, CONFIG_UNKNOWN, REBOOT_PENDING_ANNOTATION, STAGE_OFF, STAGE_UNRECOGNIZED,
};
pub use state_lock::{RELEASE_ANNOTATION, STATE_LOCK_ACTOR, StateLockOptions};
pub use status::{
    BOOTSTRAPPED, ETCD_HEALTHY, FIRST_READY_ANNOTATION, KUBERNETES_API_READY, MACHINES_CONNECTED,
    MACHINES_READY, NODES_READY, PROVISIONED, UPGRADING,
};
pub use tool_runs::record_tool_run;

#[cfg(test)]
mod tests;

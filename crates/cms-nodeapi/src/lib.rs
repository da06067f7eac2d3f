//! The Talos node API (apid) client of `cms`: gRPC with tonic and prost over
//! mTLS, on `.proto` files written from the field numbers of Talos's
//! `api/machine/machine.proto` (`docs/node-api.md` lists them).
//!
//! - [`NodeApi`]: the IO seam (`Version`, `SystemStat`'s boot time,
//!   `ApplyConfiguration` with the mode the node used, `Upgrade`;
//!   to make machines one cluster, `Bootstrap`, `EtcdMemberList`,
//!   `EtcdStatus`, `EtcdLeaveCluster`, `EtcdRemoveMemberByID` and `Reset`;
//!   for etcd's maintenance, `EtcdForfeitLeadership`, and `EtcdSnapshot`
//!   and `EtcdRecover` streamed chunk by chunk as [`SnapshotStream`] and
//!   [`UploadStream`]; to read a node's logs, `Logs` and `Dmesg` streamed
//!   as [`LogStream`], and `ServiceList`), mocked as `MockNodeApi` under the `testsuite`
//!   feature; [`TalosNodeClient`] is the real client.
//! - [`NodeCredentials`]: the tenant's OS CA as the only root and a client
//!   certificate it signs, or the insecure maintenance mode of a metal host
//!   that has no config yet.
//! - [`NodeTarget`]: where to connect (port [`NODE_API_PORT`] unless the
//!   address names one) and the `node` metadata that routes a call through
//!   an endpoint to another node.
//! - [`proto`]: the generated messages, client and server.
//!
//! `tests/it` is the drift guard: it holds `proto/` to an unmodified copy of
//! Talos's own files (`crates/cms-fake-node/proto-upstream/`, which the fake
//! node is built from) and fails on a method, message, field or enum value
//! of ours that Talos does not define the same way (`docs/node-api.md`).
//!
//! This is its own crate, apart from `cms-talos`, so that the pure Talos
//! functions stay free of tokio, tonic and sockets.

mod apply;
mod client;
mod error;
mod etcd;
mod logs;
mod snapshot;
mod target;
mod tls;

pub use apply::{ApplyMode, ApplyOutcome, ApplyRequest};
#[cfg(any(test, feature = "testsuite"))]
pub use client::MockNodeApi;
pub use client::{NodeApi, NodeVersion, TalosNodeClient, UpgradeOutcome, UpgradeRequest};
pub use error::NodeApiError;
pub use etcd::{BootstrapRequest, EtcdMember, EtcdMemberStatus, ResetRequest, WipeMode};
pub use logs::{LogStream, LogsRequest, SYSTEM_NAMESPACE, ServiceInfo};
pub use snapshot::{SnapshotStream, UploadStream};
pub use target::{NODE_API_PORT, NodeTarget};
pub use tls::{NodeCredentials, load_certificates, load_private_key};

/// The generated protobuf messages and gRPC stubs.
#[allow(clippy::all, clippy::pedantic, missing_debug_implementations, unreachable_pub)]
pub mod proto {
    /// Talos's `common` package.
    pub mod common {
        tonic::include_proto!("common");
    }
    /// Talos's `machine` package: `MachineService`.
    pub mod machine {
        tonic::include_proto!("machine");
    }
    /// `google.rpc.Status`.
    pub mod google {
        /// The `google.rpc` package.
        pub mod rpc {
            tonic::include_proto!("google.rpc");
        }
    }
}

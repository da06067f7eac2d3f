//! A fake Talos node API (apid) for tests: the real gRPC service over mTLS,
//! with behaviour the test controls and a record of the calls it got.
//!
//! ```no_run
//! # async fn demo(bundle: cms_talos::SecretsBundle) -> Result<(), cms_fake_node::FakeNodeError> {
//! use cms_fake_node::{FakeNode, FakeNodeOptions, Method};
//!
//! let node = FakeNode::start(FakeNodeOptions::new(bundle.os_ca().clone()).version("v1.14.0")).await?;
//! // ... point a machine's managementAddress at node.addr() and probe it ...
//! assert!(node.calls().iter().all(|call| call.method == Method::Version));
//! node.stop();
//! # Ok(()) }
//! ```
//!
//! - It serves with a certificate that `ca` issues for the loopback
//!   addresses, and accepts only client certificates that `client_ca`
//!   (by default `ca`) signed: TLS is verified both ways, as apid does.
//!   With [`FakeNodeOptions::maintenance`] it also takes clients without a
//!   certificate, like a metal host that has no config yet. With
//!   [`FakeNodeOptions::booted`] it starts configured instead, like a cloud
//!   instance that booted with its machine config as user data.
//! - [`FakeNode::set_version`], [`FakeNode::set_latency`] and
//!   [`FakeNode::set_failure`] change its answers while it runs;
//!   [`FakeNode::stop`] takes it off the network (connections are refused).
//! - The nodes of one cluster share a [`FakeEtcd`]
//!   ([`FakeNodeOptions::etcd`]): `Bootstrap` starts it once (a second call
//!   fails with `AlreadyExists`, as Talos's does), control planes join as
//!   they take their config, `EtcdLeaveCluster`, `EtcdRemoveMemberByID` and
//!   `Reset` change its members (each with its node's IP in its URLs), and
//!   it notes whether quorum was ever lost.
//! - A [`FakeKube`] is the cluster's Kubernetes API, over HTTPS with client
//!   certificates from the tenant's Kubernetes CA
//!   ([`FakeKubeOptions::new`]); kubectl can list its Nodes. A fake node
//!   given it ([`FakeNodeOptions::kube`], or [`FakeNode::set_kube`] while it
//!   runs) registers as a Ready Node when it takes a config and turns
//!   NotReady when reset; the test adds Pods
//!   ([`FakeKube::add_pod`], of a [`PodKind`]), makes a disruption budget
//!   refuse evictions ([`FakeKube::block_evictions`]), and reads back the
//!   Nodes ([`FakeKubeNode`]), Pods ([`FakePod`]), evictions, deleted
//!   Nodes and requests ([`KubeRequest`]). Given the cluster's etcd
//!   ([`FakeKubeOptions::etcd`]) it answers only once that is bootstrapped.
//! - etcd's backup and restore: `EtcdSnapshot` streams [`snapshot_bytes`]
//!   of [`FakeNodeOptions::snapshot_size`] in chunks; `EtcdRecover` takes
//!   an upload on a control plane whose etcd has not started and keeps its
//!   SHA-256 ([`FakeNode::recovered_sha256`]), which a `Bootstrap` with
//!   `recover_etcd` starts etcd from ([`FakeEtcd::restored_from`]);
//!   `EtcdForfeitLeadership` hands the leadership
//!   ([`FakeEtcd::set_leader`]) to another member.
//! - [`FakeNode::calls`] lists every call that reached the service, in order,
//!   with its method, payload, `node` metadata and time. [`Call::seq`] orders
//!   calls across all fake nodes of one process.
//!
//! The `cms-fake-node` binary runs one from the command line for tests of the
//! real server; it prints `listening on <addr>`, then one `call {json}` line
//! per call.

mod cluster;
mod etcd;
mod kube;
mod node;
mod record;
mod service;
mod snapshot;
mod tls;

pub use etcd::{FakeEtcd, FakeMember};
pub use kube::{FakeKube, FakeKubeNode, FakeKubeOptions, FakePod, KubeRequest, PodKind};
pub use node::{FakeNode, FakeNodeError, FakeNodeOptions};
pub use service::{Call, Failure, Method, Payload, Upload};
pub use snapshot::{SNAPSHOT_CHUNK, snapshot_bytes};

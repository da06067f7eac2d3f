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
//! - Its TLS identity follows Talos's (`identity.rs`). It serves with a
//!   certificate that `ca` issues for the loopback and listen addresses,
//!   and accepts only client certificates that `client_ca` (by default
//!   `ca`) signed: TLS is verified both ways, as apid does. With
//!   [`FakeNodeOptions::maintenance`] it is a metal host that has no config
//!   yet: it serves a certificate from a CA it made itself and asks clients
//!   for none, as Talos's maintenance service (the secrets controllers'
//!   `maintenance_root.go` and `maintenance.go` in
//!   `internal/app/machined/pkg/controllers/secrets/`). Once it takes a
//!   config, apid's certificate comes from the config's OS CA
//!   (`machine.ca`) and only client certificates from it (or from
//!   `machine.acceptedCAs`) are taken, as `root.go` and `api.go` there
//!   make them; new connections get the new identity, and a `Reset` makes
//!   it a host in maintenance mode again, with a new CA of its own
//!   ([`FakeNode::in_maintenance`], [`FakeNode::server_ca`]). With
//!   [`FakeNodeOptions::booted`] it starts configured instead, like a cloud
//!   instance that booted with its machine config as user data.
//! - It takes configs as machined does (`apply.rs`, after `ApplyConfiguration`
//!   in Talos's `internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go`):
//!   a configured node compares the new config with the one it runs
//!   (`immediate.rs`, after `CanApplyImmediate` in
//!   `internal/app/machined/pkg/runtime/v1alpha1/v1alpha1_runtime.go`). In
//!   mode `NO_REBOOT` a change it cannot apply at once is refused with
//!   `InvalidArgument`; `AUTO` applies at once when it can and otherwise
//!   reboots; `REBOOT` always reboots; the answer's `mode` and
//!   `mode_details` say which and why. In maintenance mode it answers as
//!   Talos's maintenance service (`internal/app/maintenance/server.go`):
//!   `REBOOT`, `AUTO` and `TRY` take the config (the answer's mode reads
//!   `REBOOT`), `NO_REBOOT` and `STAGED` are `Unimplemented`. A fresh node
//!   out of maintenance mode with no config takes any.
//! - Reboots (`boot.rs`): a config that needs one, or an `Upgrade`, takes
//!   the node down ([`FakeNodeOptions::reboot_delay`],
//!   [`FakeNodeOptions::upgrade_delay`]; calls fail as `unavailable`), its
//!   Node NotReady and its etcd member silent, then it runs the new config
//!   (or Talos version) and its Node is Ready again.
//!   [`FakeNode::reboots`] says when each began; `SystemStat` answers the
//!   last boot time ([`FakeNode::boot_time`]), as `/proc/stat`'s `btime`.
//! - [`FakeNode::config`] is the config it runs, [`FakeNode::kubelet_version`]
//!   and [`FakeNode::api_server_version`] the tags of the kubelet and API
//!   server images it names.
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
//!   runs) registers as a Ready Node when it takes a config, its
//!   `kubeletVersion` the tag of the config's kubelet image
//!   (`machine.kubelet.image`, or the `KubeletConfig` document's `image`;
//!   updated when a config changes it, which Talos applies at once), is
//!   NotReady while it reboots and turns NotReady when reset; the test adds Pods
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
//! - Logs (`journal.rs`, `logs.rs`): its services (machined, apid, udevd;
//!   once configured containerd, cri and the kubelet; on a control plane
//!   trustd and etcd) and its kernel keep logs in memory: lines on what
//!   happens to the node (its boot, a config taken, an upgrade, a reboot,
//!   a reset, etcd's bootstrap and leaves) and one per running service
//!   each [`FakeNodeOptions::log_interval`]. `Logs` streams one (its last
//!   `tail_lines`, and with `follow` what comes next), `Dmesg` the
//!   kernel's, `ServiceList` the services with their state and health, as
//!   Talos answers them; [`FakeNode::log`] writes a line,
//!   [`FakeNode::log_followers`] counts the followed streams open.
//! - [`FakeNode::calls`] lists every call that reached the service, in order,
//!   with its method, payload, `node` metadata and time. [`Call::seq`] orders
//!   calls across all fake nodes of one process.
//!
//! - It serves Talos's own definitions of the node API ([`proto`], from an
//!   unmodified copy of Talos's `.proto` files in `proto-upstream/`), not the
//!   trimmed copy the client in `cms-nodeapi` is built from; the calls it
//!   does not implement answer `Unimplemented`. [`Payload`] holds these
//!   messages.
//!
//! The `cms-fake-node` binary runs one from the command line for tests of the
//! real server; it prints `listening on <addr>`, then one `call {json}` line
//! per call.

mod apply;
mod boot;
mod cluster;
mod config;
mod etcd;
mod identity;
mod immediate;
mod journal;
mod kube;
mod logs;
mod node;
pub mod proto;
mod record;
mod service;
mod snapshot;
mod tls;

pub use etcd::{FakeEtcd, FakeMember};
pub use journal::KEPT_LINES;
pub use kube::{FakeKube, FakeKubeNode, FakeKubeOptions, FakePod, KubeRequest, PodKind};
pub use node::{FakeNode, FakeNodeError, FakeNodeOptions};
pub use service::{Call, Failure, Method, Payload, Upload};
pub use snapshot::{SNAPSHOT_CHUNK, snapshot_bytes};

//! `Logs`, `Dmesg` and `ServiceList` as machined answers them
//! (`internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go`),
//! over the node's [`crate::journal`].
//!
//! - `Logs` in namespace `system` (or for the `kubelet`) reads a service's
//!   log: the last `tail_lines` lines (all when negative), then, with
//!   `follow`, each line as it is written, until the client goes away. A
//!   log never written is refused with `Unknown`, `log "x" was not
//!   registered`, as Talos's logging manager refuses it; another namespace
//!   is a container's log, which the fake has none of (`NotFound`).
//! - `Dmesg` reads the kernel's buffer; with `follow` it keeps streaming,
//!   and with `follow` and `tail` it sends only what comes after the call.
//! - Each answer is `common.Data` chunks of text: the lines kept, in
//!   chunks of at most [`CHUNK`] bytes, then one chunk per new line.
//! - `ServiceList` names the services the node runs, with their state and
//!   health: machined (health unknown, as Talos's), apid and udevd always;
//!   once configured containerd, cri and the kubelet; on a control plane
//!   trustd and etcd (`Running` once a member, `Preparing` until then).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio_stream::StreamExt;
use tokio_stream::wrappers::BroadcastStream;
use tonic::Status;

use crate::journal::{Reading, Source};
use crate::proto::common::Data;
use crate::proto::machine::{
    DmesgRequest, LogsRequest, ServiceHealth, ServiceInfo, ServiceList, ServiceListResponse,
};
use crate::service::{Behaviour, Shared, metadata};
use crate::snapshot::Chunks;

/// The most bytes of kept lines in one chunk.
pub(crate) const CHUNK: usize = 16 * 1024;

/// A service as `ServiceList` shows it.
#[derive(Debug, Clone)]
pub(crate) struct Service {
    pub(crate) id: &'static str,
    pub(crate) state: &'static str,
    pub(crate) healthy: Option<bool>,
    pub(crate) message: &'static str,
}

impl Shared {
    /// `Logs`: a service's log.
    pub(crate) fn logs(&self, request: &LogsRequest) -> Result<Chunks, Status> {
        if request.namespace != "system" && request.id != "kubelet" {
            return Err(Status::not_found(format!(
                "container {:?} in namespace {:?}: not found",
                request.id, request.namespace
            )));
        }
        let source = Source::Service(request.id.clone());
        if !self.journal.exists(&source) {
            return Err(Status::unknown(format!("log {:?} was not registered", request.id)));
        }
        let tail = usize::try_from(request.tail_lines).ok();
        let reading = self.journal.read(&source, tail, request.follow);
        Ok(self.stream(source, reading))
    }

    /// `Dmesg`: the kernel's buffer.
    pub(crate) fn dmesg(&self, request: &DmesgRequest) -> Chunks {
        let tail = (request.follow && request.tail).then_some(0);
        self.stream(Source::Kernel, self.journal.read(&Source::Kernel, tail, request.follow))
    }

    /// The kept lines in chunks, then each new line of `source`.
    fn stream(&self, source: Source, reading: Reading) -> Chunks {
        let mut chunks = Vec::new();
        let mut chunk = Vec::new();
        for line in reading.kept {
            if !chunk.is_empty() && chunk.len() + line.len() > CHUNK {
                chunks.push(Ok(Data { metadata: None, bytes: std::mem::take(&mut chunk) }));
            }
            chunk.extend_from_slice(line.as_bytes());
        }
        if !chunk.is_empty() {
            chunks.push(Ok(Data { metadata: None, bytes: chunk }));
        }
        let kept = tokio_stream::iter(chunks);
        let Some(next) = reading.next else { return Box::pin(kept) };
        let follower = Follower::new(self.journal.followers.clone());
        let next = BroadcastStream::new(next).filter_map(move |written| {
            let _open = &follower;
            match written {
                Ok((from, line)) if from == source => {
                    Some(Ok(Data { metadata: None, bytes: line.as_bytes().to_vec() }))
                }
                // A follower too slow for the lines skips those it missed.
                _ => None,
            }
        });
        Box::pin(kept.chain(next))
    }

    /// The services the node runs now.
    pub(crate) fn services(&self) -> Vec<Service> {
        let running = |id, message| Service { id, state: "Running", healthy: Some(true), message };
        let mut services = vec![
            Service { id: "machined", state: "Running", healthy: None, message: "" },
            running("apid", "Health check successful"),
            running("udevd", "Health check successful"),
        ];
        if self.configured.load(Ordering::SeqCst) {
            services.push(running("containerd", "Health check successful"));
            services.push(running("cri", "Health check successful"));
            services.push(running("kubelet", "Health check successful"));
        }
        if self.control_plane.load(Ordering::SeqCst) {
            services.push(running("trustd", "Health check successful"));
            let hostname = self.behaviour().hostname.clone();
            services.push(match self.etcd.member_id(&hostname) {
                Ok(_) => running("etcd", "Health check successful"),
                Err(_) => Service {
                    id: "etcd",
                    state: "Preparing",
                    healthy: Some(false),
                    message: "etcd waits to join the cluster or for its bootstrap",
                },
            });
        }
        services.sort_by_key(|service| service.id);
        services
    }

    /// `ServiceList`.
    pub(crate) fn service_list(&self, behaviour: &Behaviour) -> ServiceListResponse {
        let services = self
            .services()
            .into_iter()
            .map(|service| ServiceInfo {
                id: service.id.to_string(),
                state: service.state.to_string(),
                events: None,
                health: Some(ServiceHealth {
                    unknown: service.healthy.is_none(),
                    healthy: service.healthy.unwrap_or(false),
                    last_message: service.message.to_string(),
                    last_change: None,
                }),
            })
            .collect();
        ServiceListResponse { messages: vec![ServiceList { metadata: metadata(behaviour), services }] }
    }
}

/// Counts an open followed stream while it lives.
struct Follower(Arc<std::sync::atomic::AtomicUsize>);

impl Follower {
    fn new(count: Arc<std::sync::atomic::AtomicUsize>) -> Follower {
        count.fetch_add(1, Ordering::SeqCst);
        Follower(count)
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

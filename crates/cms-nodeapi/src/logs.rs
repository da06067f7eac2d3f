//! A node's logs over the node API: `Logs` streams a service's log and
//! `Dmesg` the kernel's, both as `common.Data` chunks of text as the node
//! writes them; `ServiceList` names the services with their state and
//! health. Field numbers are Talos's (`docs/node-api.md`).
//!
//! Talos keeps each of its own services' logs (machined, apid, etcd,
//! kubelet, ...) in memory, asked for as `talosctl logs` does: namespace
//! `system`, driver `CONTAINERD`. A log the node never kept (an unknown
//! service) is refused with `Unknown`: `log "x" was not registered`
//! ([`NodeApiError::is_unknown_log`]).
//!
//! The client's timeout bounds connecting and the node's first answer. A
//! read to the end (no `follow`) is then bounded per chunk, as a snapshot
//! is; a `follow` stream has no deadline at all, since a quiet service may
//! write nothing for long: it ends when the node ends it or the caller
//! drops it (which resets the call, so the node stops too).

use std::pin::Pin;
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use tonic::transport::Channel;

use crate::client::{first, request, status};
use crate::error::NodeApiError;
use crate::proto::common::{ContainerDriver, Data};
use crate::proto::machine::machine_service_client::MachineServiceClient;
use crate::proto::machine::{self, DmesgRequest};
use crate::target::NodeTarget;

/// The namespace of Talos's own services' logs.
pub const SYSTEM_NAMESPACE: &str = "system";

/// A log as it arrives: its chunks of text in order, or the error that
/// ended it (after which the stream ends).
pub type LogStream = Pin<Box<dyn Stream<Item = Result<Vec<u8>, NodeApiError>> + Send>>;

/// A `Logs` call: one of Talos's services' logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogsRequest {
    /// The service's id, such as `machined`, `etcd` or `kubelet`.
    pub service: String,
    /// Keep streaming what the service writes next.
    pub follow: bool,
    /// Only the last lines; `None` for the whole log the node keeps.
    pub tail_lines: Option<u32>,
}

/// A service on a node, as `ServiceList` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceInfo {
    /// Such as `machined`, `etcd`.
    pub id: String,
    /// Such as `Running`, `Finished`, `Waiting`.
    pub state: String,
    /// Whether its health check passes; `None` when the node does not know
    /// (a service without a check).
    pub healthy: Option<bool>,
    /// What its health check said last.
    pub last_message: String,
}

pub(crate) async fn logs(
    mut client: MachineServiceClient<Channel>,
    target: &NodeTarget,
    logs: LogsRequest,
    timeout: Duration,
) -> Result<LogStream, NodeApiError> {
    let message = machine::LogsRequest {
        namespace: SYSTEM_NAMESPACE.to_string(),
        id: logs.service,
        driver: ContainerDriver::Containerd.into(),
        follow: logs.follow,
        tail_lines: logs.tail_lines.map_or(-1, |lines| i32::try_from(lines).unwrap_or(i32::MAX)),
    };
    let call = client.logs(request(target, message)?);
    let answer = tokio::time::timeout(timeout, call)
        .await
        .map_err(|_| stalled(target, timeout))?
        .map_err(status(target))?;
    Ok(chunks(answer.into_inner(), target, (!logs.follow).then_some(timeout)))
}

pub(crate) async fn dmesg(
    mut client: MachineServiceClient<Channel>,
    target: &NodeTarget,
    follow: bool,
    timeout: Duration,
) -> Result<LogStream, NodeApiError> {
    let call = client.dmesg(request(target, DmesgRequest { follow, tail: false })?);
    let answer = tokio::time::timeout(timeout, call)
        .await
        .map_err(|_| stalled(target, timeout))?
        .map_err(status(target))?;
    Ok(chunks(answer.into_inner(), target, (!follow).then_some(timeout)))
}

pub(crate) async fn service_list(
    mut client: MachineServiceClient<Channel>,
    target: &NodeTarget,
) -> Result<Vec<ServiceInfo>, NodeApiError> {
    let answer = client.service_list(request(target, ())?).await.map_err(status(target))?.into_inner();
    let message = first(target, answer.messages, |m| m.metadata.as_ref())?;
    Ok(message
        .services
        .into_iter()
        .map(|service| {
            let health = service.health.unwrap_or_default();
            ServiceInfo {
                id: service.id,
                state: service.state,
                healthy: (!health.unknown).then_some(health.healthy),
                last_message: health.last_message,
            }
        })
        .collect())
}

/// The chunks of a streamed answer; each waits at most `step`, if given.
fn chunks(chunks: tonic::Streaming<Data>, target: &NodeTarget, step: Option<Duration>) -> LogStream {
    let target = target.clone();
    let stream = futures_util::stream::unfold(Some(chunks), move |open| {
        let target = target.clone();
        async move {
            let mut chunks = open?;
            let next = match step {
                Some(step) => match tokio::time::timeout(step, chunks.next()).await {
                    Err(_) => Some(Err(stalled(&target, step))),
                    Ok(next) => next.map(|next| next.map_err(status(&target))),
                },
                None => chunks.next().await.map(|next| next.map_err(status(&target))),
            };
            let next = match next? {
                Ok(data) => first(&target, vec![data], |data| data.metadata.as_ref()).map(|data| data.bytes),
                Err(err) => Err(err),
            };
            let open = next.is_ok().then_some(chunks);
            Some((next, open))
        }
    });
    Box::pin(stream)
}

fn stalled(target: &NodeTarget, after: Duration) -> NodeApiError {
    NodeApiError::Stalled { endpoint: target.endpoint(), after }
}

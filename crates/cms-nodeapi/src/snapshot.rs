//! etcd's backup and restore over the node API: `EtcdSnapshot` streams a
//! snapshot out of a control plane as `common.Data` chunks, and
//! `EtcdRecover` streams one into a control plane whose etcd waits for its
//! bootstrap (`Bootstrap` with `recover_etcd` then starts etcd from it).
//! Neither holds a whole snapshot in memory: chunks pass through as they
//! come. Field numbers are Talos's (`docs/nodeapi-etcd.md`).
//!
//! The client's timeout does not bound a whole transfer, which may take
//! long; it bounds each wait instead: for the node to start answering, for
//! each chunk after the one before, and for the node's answer after the
//! last chunk of an upload. A transfer that stalls for longer fails as
//! [`NodeApiError::Stalled`].

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use tokio::sync::mpsc;
use tonic::transport::Channel;

use crate::client::{first, request, status};
use crate::error::NodeApiError;
use crate::proto::common::Data;
use crate::proto::machine::EtcdSnapshotRequest;
use crate::proto::machine::machine_service_client::MachineServiceClient;
use crate::target::NodeTarget;

/// A snapshot as it arrives: its chunks in order, or the error that ended
/// the transfer (after which the stream ends).
pub type SnapshotStream = Pin<Box<dyn Stream<Item = Result<Vec<u8>, NodeApiError>> + Send>>;

/// A snapshot to upload: its chunks in order. An error from the source
/// aborts the upload, so the node never keeps a truncated snapshot.
pub type UploadStream = Pin<Box<dyn Stream<Item = Result<Vec<u8>, std::io::Error>> + Send>>;

pub(crate) async fn snapshot(
    mut client: MachineServiceClient<Channel>,
    target: &NodeTarget,
    timeout: Duration,
) -> Result<SnapshotStream, NodeApiError> {
    let call = client.etcd_snapshot(request(target, EtcdSnapshotRequest {})?);
    let answer = tokio::time::timeout(timeout, call)
        .await
        .map_err(|_| stalled(target, timeout))?
        .map_err(status(target))?;
    let chunks = answer.into_inner();
    let target = target.clone();
    // The state is the open transfer; it ends after the last chunk or the
    // first error.
    let stream = futures_util::stream::unfold(Some(chunks), move |open| {
        let target = target.clone();
        async move {
            let mut chunks = open?;
            let next = match tokio::time::timeout(timeout, chunks.next()).await {
                Err(_) => Err(stalled(&target, timeout)),
                Ok(None) => return None,
                Ok(Some(Err(answer))) => Err(status(&target)(answer)),
                Ok(Some(Ok(data))) => chunk(&target, data),
            };
            let open = next.is_ok().then_some(chunks);
            Some((next, open))
        }
    });
    Ok(Box::pin(stream))
}

/// The bytes of one chunk, or the error a node reported in it.
fn chunk(target: &NodeTarget, data: Data) -> Result<Vec<u8>, NodeApiError> {
    first(target, vec![data], |data| data.metadata.as_ref()).map(|data| data.bytes)
}

fn stalled(target: &NodeTarget, after: Duration) -> NodeApiError {
    NodeApiError::Stalled { endpoint: target.endpoint(), after }
}

/// What the upload's source did, as the call pulls from it.
enum Pulled {
    /// One more chunk went out.
    Chunk,
    /// The source failed: the upload must not complete.
    Failed(std::io::Error),
    /// The source ended cleanly.
    Ended,
}

pub(crate) async fn recover(
    mut client: MachineServiceClient<Channel>,
    target: &NodeTarget,
    chunks: UploadStream,
    timeout: Duration,
) -> Result<(), NodeApiError> {
    let (events, mut pulled) = mpsc::unbounded_channel();
    let outgoing = Outgoing { source: Source::Open(chunks), events };
    let call = client.etcd_recover(request(target, outgoing)?);
    tokio::pin!(call);
    // Until the source ends: every chunk must come within `timeout`, and
    // a failed source drops the call, which resets the stream, so the node
    // sees a broken upload rather than a short one.
    loop {
        tokio::select! {
            answer = &mut call => return answered(target, answer),
            event = tokio::time::timeout(timeout, pulled.recv()) => match event {
                Err(_) => return Err(stalled(target, timeout)),
                Ok(Some(Pulled::Chunk)) => continue,
                Ok(Some(Pulled::Failed(source))) => return Err(NodeApiError::Upload(source)),
                Ok(Some(Pulled::Ended) | None) => break,
            },
        }
    }
    let answer = tokio::time::timeout(timeout, call).await.map_err(|_| stalled(target, timeout))?;
    answered(target, answer)
}

fn answered(
    target: &NodeTarget,
    answer: Result<tonic::Response<crate::proto::machine::EtcdRecoverResponse>, tonic::Status>,
) -> Result<(), NodeApiError> {
    let answer = answer.map_err(status(target))?.into_inner();
    first(target, answer.messages, |m| m.metadata.as_ref())?;
    Ok(())
}

/// The upload as the call sends it: the source's chunks as `Data`,
/// reporting each pull.
struct Outgoing {
    source: Source,
    events: mpsc::UnboundedSender<Pulled>,
}

enum Source {
    Open(UploadStream),
    /// It failed: the stream never yields again, so the call cannot end
    /// the upload cleanly.
    Failed,
    Ended,
}

impl Stream for Outgoing {
    type Item = Data;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Data>> {
        let chunks = match &mut self.source {
            Source::Open(chunks) => chunks,
            Source::Failed => return Poll::Pending,
            Source::Ended => return Poll::Ready(None),
        };
        let (next, pulled) = match chunks.as_mut().poll_next(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Some(Ok(bytes))) => {
                (Poll::Ready(Some(Data { metadata: None, bytes })), Pulled::Chunk)
            }
            Poll::Ready(Some(Err(source))) => {
                self.source = Source::Failed;
                (Poll::Pending, Pulled::Failed(source))
            }
            Poll::Ready(None) => {
                self.source = Source::Ended;
                (Poll::Ready(None), Pulled::Ended)
            }
        };
        let _ = self.events.send(pulled);
        next
    }
}

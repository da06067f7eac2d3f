//! etcd's backup and restore on the fake node: `EtcdSnapshot` streams
//! deterministic bytes ([`snapshot_bytes`]) of the configured size in
//! chunks, from a node that runs an etcd member; `EtcdRecover` takes an
//! upload on a configured control plane whose etcd waits for its bootstrap,
//! and keeps the SHA-256 of what arrived whole, so that a test can check
//! that the bytes a snapshot gave are the bytes a node got.

use std::pin::Pin;
use std::sync::PoisonError;
use std::sync::atomic::Ordering;

use crate::proto::common::Data;
use crate::proto::machine::{EtcdRecover, EtcdRecoverResponse};
use sha2::{Digest, Sha256};
use tokio_stream::Stream;
use tonic::{Status, Streaming};

use crate::service::{Behaviour, Method, Payload, Shared, Upload, metadata};

/// The size of the chunks a fake snapshot streams in (the last may be
/// shorter).
pub const SNAPSHOT_CHUNK: usize = 64 * 1024;

/// The chunks of a snapshot, as the service streams them.
pub(crate) type Chunks = Pin<Box<dyn Stream<Item = Result<Data, Status>> + Send>>;

/// The bytes a fake node's snapshot of `size` bytes holds: the same for
/// every node and every call.
pub fn snapshot_bytes(size: usize) -> Vec<u8> {
    (0..size).map(byte_at).collect()
}

fn byte_at(position: usize) -> u8 {
    ((position as u64).wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8
}

/// Reads an upload to its end (or its break), counting and hashing it.
pub(crate) async fn receive(mut chunks: Streaming<Data>) -> Upload {
    let mut hash = Sha256::new();
    let mut bytes = 0u64;
    let complete = loop {
        match chunks.message().await {
            Ok(Some(data)) => {
                hash.update(&data.bytes);
                bytes += data.bytes.len() as u64;
            }
            Ok(None) => break true,
            Err(_) => break false,
        }
    };
    Upload { bytes, sha256: hex::encode(hash.finalize()), complete }
}

/// An upload the server may still drop because its client reset the
/// stream: if dropped, it records the call as a broken upload.
pub(crate) struct Broken<'a> {
    pub(crate) shared: &'a Shared,
    pub(crate) request: &'a tonic::Request<()>,
    pub(crate) upload: &'a Upload,
}

impl Drop for Broken<'_> {
    fn drop(&mut self) {
        let upload = Upload { complete: false, ..self.upload.clone() };
        self.shared.record(Method::EtcdRecover, Payload::EtcdRecover(upload), self.request);
    }
}

impl Shared {
    /// The chunks of this node's snapshot; only a node running an etcd
    /// member has one.
    pub(crate) fn snapshot(&self, behaviour: &Behaviour) -> Result<Chunks, Status> {
        self.etcd.member_id(&behaviour.hostname)?;
        let size = behaviour.snapshot_size;
        let chunks = (0..size.div_ceil(SNAPSHOT_CHUNK)).map(move |index| {
            let start = index * SNAPSHOT_CHUNK;
            let bytes = (start..size.min(start + SNAPSHOT_CHUNK)).map(byte_at).collect();
            Ok(Data { metadata: None, bytes })
        });
        Ok(Box::pin(tokio_stream::iter(chunks)))
    }

    /// Keeps an upload that arrived whole, on a configured control plane
    /// whose etcd has not started; the node refuses it otherwise, as
    /// Talos's does.
    pub(crate) fn recover(
        &self,
        behaviour: &Behaviour,
        upload: Upload,
    ) -> Result<EtcdRecoverResponse, Status> {
        if !upload.complete {
            return Err(Status::aborted("the snapshot upload broke off"));
        }
        if !self.control_plane.load(Ordering::SeqCst) {
            return Err(Status::failed_precondition("etcd recover is only available on a control plane"));
        }
        if self.etcd.member_id(&behaviour.hostname).is_ok() {
            return Err(Status::failed_precondition("etcd is running: recovery is not possible"));
        }
        *self.recovered.lock().unwrap_or_else(PoisonError::into_inner) = Some(upload.sha256);
        Ok(EtcdRecoverResponse { messages: vec![EtcdRecover { metadata: metadata(behaviour) }] })
    }

    /// The snapshot a recovering `Bootstrap` starts etcd from.
    pub(crate) fn recovered(&self) -> Option<String> {
        self.recovered.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_are_the_same_bytes_every_time_and_not_all_alike() {
        let bytes = snapshot_bytes(1000);
        assert_eq!(bytes, snapshot_bytes(1000));
        assert_eq!(&snapshot_bytes(2000)[..1000], bytes.as_slice());
        assert!(bytes.iter().collect::<std::collections::BTreeSet<_>>().len() > 100);
    }
}

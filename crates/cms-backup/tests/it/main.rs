//! cms-backup's tests: the file format's round trip and tamper detection,
//! streaming without holding a backup, the directory store, and the S3
//! store against a real S3 API (moto), the scheduler and its lease, and
//! taking backups: from which control plane, one at a time.

mod format;
mod renewal;
mod s3;
mod schedule;
mod store;
mod take;

use bytes::Bytes;
use cms_backup::{BackupError, ByteStream};
use futures_util::StreamExt;

/// A stream of `chunks`, as a backup store or a node gives them.
fn stream_of(chunks: Vec<Vec<u8>>) -> ByteStream {
    Box::pin(futures_util::stream::iter(chunks.into_iter().map(|chunk| Ok(Bytes::from(chunk)))))
}

/// A stream that gives `chunks`, then fails.
pub(crate) fn failing(chunks: Vec<Vec<u8>>) -> ByteStream {
    let items = chunks
        .into_iter()
        .map(|chunk| Ok(Bytes::from(chunk)))
        .chain([Err(BackupError::Malformed("the source failed"))]);
    Box::pin(futures_util::stream::iter(items))
}

/// Everything `stream` gives, or its first error.
async fn collect(mut stream: ByteStream) -> Result<Vec<u8>, BackupError> {
    let mut all = Vec::new();
    while let Some(chunk) = stream.next().await {
        all.extend_from_slice(&chunk?);
    }
    Ok(all)
}

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use cms_backup::{BackupError, Binding, ByteStream, MAX_CHUNK, decrypt, encrypt};
use cms_talos::{Sealer, SealingKey};
use futures_util::StreamExt;
use sha2::{Digest, Sha256};

use crate::{collect, stream_of};

const ACME: Binding<'static> = Binding { tenant: "acme", id: "20261125t074211123z-3f9a" };

fn sealer(id: &str, byte: u8) -> Sealer {
    Sealer::new(SealingKey::new(id, [byte; 32]).unwrap())
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

async fn seal(sealer: &Sealer, binding: Binding<'_>, chunks: Vec<Vec<u8>>) -> Vec<u8> {
    collect(encrypt(sealer, binding, stream_of(chunks)).unwrap()).await.unwrap()
}

async fn open(sealer: &Sealer, binding: Binding<'_>, sealed: Vec<u8>) -> Result<Vec<u8>, BackupError> {
    collect(decrypt(sealer, binding, stream_of(vec![sealed])).await?).await
}

#[tokio::test]
async fn a_backup_opens_to_the_same_bytes_in_any_chunking() {
    let sealer = sealer("k1", 7);
    let chunks = vec![pattern(10, 1), Vec::new(), pattern(MAX_CHUNK + 5, 2), pattern(64 * 1024, 3)];
    let plain: Vec<u8> = chunks.concat();
    let sealed = seal(&sealer, ACME, chunks).await;
    assert!(!sealed.windows(32).any(|w| w == &plain[100..132]), "the file holds no plaintext");
    // Read back in odd pieces, as a store may give them.
    let pieces = sealed.chunks(777).map(<[u8]>::to_vec).collect();
    let opened = collect(decrypt(&sealer, ACME, stream_of(pieces)).await.unwrap()).await.unwrap();
    assert_eq!(opened, plain);
    assert_eq!(open(&sealer, ACME, seal(&sealer, ACME, Vec::new()).await).await.unwrap(), b"");
}

#[tokio::test]
async fn changing_any_byte_is_refused() {
    let sealer = sealer("k1", 7);
    let sealed = seal(&sealer, ACME, vec![pattern(100, 1), pattern(50, 2), pattern(3, 3)]).await;
    for index in 0..sealed.len() {
        for flip in [0x01, 0x80] {
            let mut tampered = sealed.clone();
            tampered[index] ^= flip;
            let result = open(&sealer, ACME, tampered).await;
            assert!(result.is_err(), "byte {index} changed by {flip:#x} went unnoticed");
        }
    }
}

#[tokio::test]
async fn another_tenant_or_id_or_a_cut_file_is_refused() {
    let sealer = sealer("k1", 7);
    let sealed = seal(&sealer, ACME, vec![pattern(1000, 1), pattern(1000, 2)]).await;
    let other_tenant = Binding { tenant: "acme2", ..ACME };
    let other_id = Binding { id: "20261125t074211123z-0000", ..ACME };
    assert!(matches!(open(&sealer, other_tenant, sealed.clone()).await, Err(BackupError::Tampered)));
    assert!(matches!(open(&sealer, other_id, sealed.clone()).await, Err(BackupError::Tampered)));
    // Without its last frame (5 bytes of framing, 16 of tag): truncated.
    let cut = sealed[..sealed.len() - 21].to_vec();
    assert!(matches!(open(&sealer, ACME, cut).await, Err(BackupError::Malformed("truncated"))));
    let mut longer = sealed.clone();
    longer.push(0);
    assert!(matches!(open(&sealer, ACME, longer).await, Err(BackupError::Malformed(_))));
    let other_key = self::sealer("k2", 9);
    assert!(matches!(open(&other_key, ACME, sealed.clone()).await, Err(BackupError::Key(_))));
    let same_id_other_bytes = self::sealer("k1", 8);
    assert!(matches!(open(&same_id_other_bytes, ACME, sealed).await, Err(BackupError::Tampered)));
}

#[tokio::test]
async fn a_rotated_sealer_opens_backups_of_its_previous_key() {
    let old = sealer("old", 7);
    let sealed = seal(&old, ACME, vec![pattern(10, 1)]).await;
    let rotated = Sealer::with_previous(
        SealingKey::new("new", [1; 32]).unwrap(),
        vec![SealingKey::new("old", [7; 32]).unwrap()],
    )
    .unwrap();
    assert_eq!(open(&rotated, ACME, sealed).await.unwrap(), pattern(10, 1));
}

/// 16 MiB pass through encryption and decryption while at most a few
/// chunks are ever made but not yet read back.
#[tokio::test]
async fn a_large_backup_streams_without_being_held() {
    const CHUNK: usize = 64 * 1024;
    const CHUNKS: usize = 256;
    let made = Arc::new(AtomicUsize::new(0));
    let counter = made.clone();
    let source: ByteStream = Box::pin(futures_util::stream::iter(0..CHUNKS).map(move |index| {
        counter.fetch_add(1, Ordering::SeqCst);
        Ok(Bytes::from(pattern(CHUNK, index as u8)))
    }));
    let sealer = sealer("k1", 7);
    let sealed = encrypt(&sealer, ACME, source).unwrap();
    let mut plain = decrypt(&sealer, ACME, sealed).await.unwrap();
    let (mut read, mut expected, mut actual) = (0usize, Sha256::new(), Sha256::new());
    while let Some(chunk) = plain.next().await {
        let chunk = chunk.unwrap();
        actual.update(&chunk);
        read += chunk.len();
        let outstanding = made.load(Ordering::SeqCst) * CHUNK - read;
        assert!(outstanding <= 2 * CHUNK, "{outstanding} bytes were made but not read back");
    }
    for index in 0..CHUNKS {
        expected.update(pattern(CHUNK, index as u8));
    }
    assert_eq!(read, CHUNK * CHUNKS);
    assert_eq!(actual.finalize(), expected.finalize());
}

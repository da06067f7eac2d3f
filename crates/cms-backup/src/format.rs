//! The backup file: a snapshot encrypted chunk by chunk with the STREAM
//! construction (`aead-stream`'s big-endian 32-bit counter flavour) over
//! XChaCha20-Poly1305, so that no backup is ever whole in memory.
//!
//! ```text
//! header: "cmsetcd" 0x01 | key-id length (1 byte) | key id | 19-byte nonce prefix
//! frame:  kind (1 byte: 0 more, 1 last) | length (u32, big-endian) | ciphertext and 16-byte tag
//! ```
//!
//! The key is derived from the service's sealing key `key id` with HKDF-SHA256
//! ([`cms_talos::Sealer::derive_key`]), the tenant and the backup id as info.
//! Every frame's associated data is the header followed by the tenant and
//! the backup id, each length-prefixed, so a backup moved to another tenant
//! or renamed does not open. STREAM puts the frame's position and whether
//! it is the last into the nonce: a frame dropped, repeated, reordered or
//! cut off at the end fails, and a file without its last frame is truncated.

use aead_stream::{DecryptorBE32, EncryptorBE32, Nonce, StreamBE32};
use bytes::Bytes;
use chacha20poly1305::XChaCha20Poly1305;
use chacha20poly1305::aead::Payload;
use cms_talos::Sealer;
use futures_util::StreamExt;
use secrecy::ExposeSecret;
use tokio::io::AsyncReadExt;
use tokio_util::io::StreamReader;

use crate::error::BackupError;
use crate::store::ByteStream;

const MAGIC: &[u8; 8] = b"cmsetcd\x01";
const NONCE_PREFIX_LEN: usize = 19;
const TAG_LEN: usize = 16;
/// The largest plaintext in one frame; larger chunks are split.
pub const MAX_CHUNK: usize = 1024 * 1024;
const MORE: u8 = 0;
const LAST: u8 = 1;

type Stream = StreamBE32<XChaCha20Poly1305>;

/// Which backup a file is: what its key and associated data are bound to.
#[derive(Debug, Clone, Copy)]
pub struct Binding<'a> {
    pub tenant: &'a str,
    pub id: &'a str,
}

impl Binding<'_> {
    fn fields(&self, into: &mut Vec<u8>) {
        for field in [self.tenant, self.id] {
            into.extend_from_slice(&(field.len() as u64).to_be_bytes());
            into.extend_from_slice(field.as_bytes());
        }
    }

    fn cipher(
        &self,
        sealer: &Sealer,
        key_id: &str,
        header: &[u8],
        prefix: &[u8],
    ) -> Result<Cipher, BackupError> {
        let mut context = b"cms etcd backup v1".to_vec();
        self.fields(&mut context);
        let mut aad = header.to_vec();
        self.fields(&mut aad);
        let mut nonce = Nonce::<XChaCha20Poly1305, Stream>::default();
        nonce.copy_from_slice(prefix);
        let derived = sealer.derive_key(key_id, &context).map_err(BackupError::Key)?;
        let key = chacha20poly1305::Key::from(*derived.expose_secret());
        Ok(Cipher { key, nonce, aad })
    }
}

/// What one backup is encrypted with: its key, nonce prefix and associated data.
struct Cipher {
    key: chacha20poly1305::Key,
    nonce: Nonce<XChaCha20Poly1305, Stream>,
    aad: Vec<u8>,
}

fn header(key_id: &str, prefix: &[u8]) -> Vec<u8> {
    let mut header = MAGIC.to_vec();
    header.push(key_id.len() as u8);
    header.extend_from_slice(key_id.as_bytes());
    header.extend_from_slice(prefix);
    header
}

fn frame(kind: u8, ciphertext: &[u8]) -> Bytes {
    let mut frame = Vec::with_capacity(5 + ciphertext.len());
    frame.push(kind);
    frame.extend_from_slice(&(ciphertext.len() as u32).to_be_bytes());
    frame.extend_from_slice(ciphertext);
    Bytes::from(frame)
}

/// Encrypts `plain` for `binding` with the sealer's current key, as it
/// arrives: the header first, then one frame per chunk (split at
/// [`MAX_CHUNK`]), then an empty last frame.
pub fn encrypt(
    sealer: &Sealer,
    binding: Binding<'_>,
    mut plain: ByteStream,
) -> Result<ByteStream, BackupError> {
    let key_id = sealer.current_key_id().to_string();
    let prefix: [u8; NONCE_PREFIX_LEN] = random()?;
    let header = header(&key_id, &prefix);
    let Cipher { key, nonce, aad } = binding.cipher(sealer, &key_id, &header, &prefix)?;
    let mut encryptor = EncryptorBE32::<XChaCha20Poly1305>::new(&key, &nonce);
    Ok(Box::pin(async_stream::try_stream! {
        yield Bytes::from(header);
        while let Some(chunk) = plain.next().await {
            let chunk = chunk?;
            for piece in chunk.chunks(MAX_CHUNK) {
                let sealed = encryptor
                    .encrypt_next(Payload { msg: piece, aad: &aad })
                    .map_err(|_| BackupError::Malformed("too many chunks"))?;
                yield frame(MORE, &sealed);
            }
        }
        let sealed = encryptor
            .encrypt_last(Payload { msg: &[], aad: &aad })
            .map_err(|_| BackupError::Malformed("too many chunks"))?;
        yield frame(LAST, &sealed);
    }))
}

/// Decrypts a file written by [`encrypt`] for `binding`: reads the header
/// now, then verifies each frame before its plaintext is given out. A
/// changed byte, another tenant's or backup's file, or a truncated one
/// fails with [`BackupError::Tampered`] or [`BackupError::Malformed`].
pub async fn decrypt(
    sealer: &Sealer,
    binding: Binding<'_>,
    sealed: ByteStream,
) -> Result<ByteStream, BackupError> {
    let mut reader = StreamReader::new(sealed.map(|chunk| chunk.map_err(BackupError::into_io)));
    let mut magic = [0u8; MAGIC.len()];
    read(&mut reader, &mut magic).await?;
    if &magic != MAGIC {
        return Err(BackupError::Malformed("not a backup file"));
    }
    let mut len = [0u8; 1];
    read(&mut reader, &mut len).await?;
    let mut key_id = vec![0u8; usize::from(len[0])];
    read(&mut reader, &mut key_id).await?;
    let key_id = String::from_utf8(key_id).map_err(|_| BackupError::Malformed("key id is not UTF-8"))?;
    let mut prefix = [0u8; NONCE_PREFIX_LEN];
    read(&mut reader, &mut prefix).await?;
    let Cipher { key, nonce, aad } = binding.cipher(sealer, &key_id, &header(&key_id, &prefix), &prefix)?;
    let mut decryptor = DecryptorBE32::<XChaCha20Poly1305>::new(&key, &nonce);
    Ok(Box::pin(async_stream::try_stream! {
        loop {
            let mut head = [0u8; 5];
            read(&mut reader, &mut head).await?;
            let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
            if !(TAG_LEN..=MAX_CHUNK + TAG_LEN).contains(&len) {
                Err(BackupError::Malformed("frame length out of range"))?;
            }
            let mut sealed = vec![0u8; len];
            read(&mut reader, &mut sealed).await?;
            let payload = Payload { msg: &sealed, aad: &aad };
            match head[0] {
                MORE => {
                    let plain = decryptor.decrypt_next(payload).map_err(|_| BackupError::Tampered)?;
                    yield Bytes::from(plain);
                }
                LAST => {
                    let plain = decryptor.decrypt_last(payload).map_err(|_| BackupError::Tampered)?;
                    if !plain.is_empty() {
                        yield Bytes::from(plain);
                    }
                    break;
                }
                _ => Err(BackupError::Malformed("unknown frame kind"))?,
            }
        }
        let mut rest = [0u8; 1];
        if reader.read(&mut rest).await.map_err(BackupError::from)? != 0 {
            Err(BackupError::Malformed("data after the last frame"))?;
        }
    }))
}

/// Fills `buf`, or fails as truncated when the file ends first.
async fn read<R: tokio::io::AsyncRead + Unpin>(reader: &mut R, buf: &mut [u8]) -> Result<(), BackupError> {
    match reader.read_exact(buf).await {
        Ok(_) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => {
            Err(BackupError::Malformed("truncated"))
        }
        Err(err) => Err(err.into()),
    }
}

/// `N` random bytes.
fn random<const N: usize>() -> Result<[u8; N], BackupError> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|err| BackupError::Io(std::io::Error::other(err.to_string())))?;
    Ok(bytes)
}

//! Encryption at rest: XChaCha20-Poly1305 with a key id, bound to a tenant and a purpose.
//!
//! A sealed blob is `"cms" 0x01 | key-id length (1 byte) | key id | 24-byte
//! nonce | ciphertext and tag`. The associated data binds the format version,
//! the key id, the tenant and the purpose, so a blob copied to another tenant's
//! row or used for another purpose does not open. Blobs name their key, so a
//! [`Sealer`] holding several keys opens everything any of them sealed while
//! it seals with its active key only. Activating another key (at run time,
//! [`Sealer::activate`]) and re-sealing the stored blobs is how keys rotate.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{Key, XChaCha20Poly1305, XNonce};
use secrecy::{ExposeSecret, SecretBox, SecretString};

use crate::error::{Result, TalosError};
use crate::random;

const MAGIC: &[u8; 4] = b"cms\x01";
const NONCE_LEN: usize = 24;
const TAG_LEN: usize = 16;
const CANARY_PURPOSE: &str = "cms:canary";
const CANARY_PLAINTEXT: &[u8] = b"cms sealing canary v1";

/// A 256-bit sealing key and its id.
pub struct SealingKey {
    id: String,
    key: SecretBox<[u8; 32]>,
}

impl fmt::Debug for SealingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SealingKey").field("id", &self.id).finish_non_exhaustive()
    }
}

impl SealingKey {
    /// A key from its raw bytes. The id is 1 to 64 characters of
    /// `[A-Za-z0-9._-]`; it is stored in every blob sealed with the key.
    pub fn new(id: &str, key: [u8; 32]) -> Result<SealingKey> {
        if !SealingKey::is_valid_id(id) {
            return Err(TalosError::InvalidKey(format!(
                "key id {id:?} must be 1 to 64 characters of letters, digits, '.', '_' or '-'"
            )));
        }
        Ok(SealingKey { id: id.to_string(), key: SecretBox::new(Box::new(key)) })
    }

    /// Whether `id` may name a key: 1 to 64 characters of `[A-Za-z0-9._-]`.
    pub fn is_valid_id(id: &str) -> bool {
        let valid = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-');
        !id.is_empty() && id.len() <= 64 && id.bytes().all(valid)
    }

    /// A key from standard base64 of 32 bytes, as it appears in configuration.
    pub fn from_base64(id: &str, key: &SecretString) -> Result<SealingKey> {
        let bytes = STANDARD
            .decode(key.expose_secret().trim())
            .map_err(|_| TalosError::InvalidKey(format!("key {id:?} is not valid base64")))?;
        let key: [u8; 32] = bytes.try_into().map_err(|bytes: Vec<u8>| {
            TalosError::InvalidKey(format!("key {id:?} has {} bytes; it must have 32", bytes.len()))
        })?;
        SealingKey::new(id, key)
    }

    /// A fresh random key.
    pub fn generate(id: &str) -> Result<SealingKey> {
        SealingKey::new(id, random::bytes()?)
    }

    /// The key id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The key as standard base64, for writing a key file.
    pub(crate) fn to_base64(&self) -> SecretString {
        SecretString::from(STANDARD.encode(self.key.expose_secret()))
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new(&Key::from(*self.key.expose_secret()))
    }
}

/// A keyring: seals with its active key and opens with any of its keys.
#[derive(Debug)]
pub struct Sealer {
    /// Never empty; ids are unique.
    keys: Vec<SealingKey>,
    /// The index in `keys` of the key that seals.
    active: AtomicUsize,
}

impl Sealer {
    /// A sealer with one key.
    pub fn new(current: SealingKey) -> Sealer {
        Sealer { keys: vec![current], active: AtomicUsize::new(0) }
    }

    /// A sealer with the current key and older keys that still open old blobs.
    pub fn with_previous(current: SealingKey, previous: Vec<SealingKey>) -> Result<Sealer> {
        let mut keys = vec![current];
        keys.extend(previous);
        Sealer::from_keys(keys)
    }

    /// A keyring of `keys`, the first one active. Fails when there is no key
    /// or an id appears twice.
    pub fn from_keys(keys: Vec<SealingKey>) -> Result<Sealer> {
        if keys.is_empty() {
            return Err(TalosError::InvalidKey("no sealing key is configured".into()));
        }
        for (index, key) in keys.iter().enumerate() {
            if keys[..index].iter().any(|earlier| earlier.id == key.id) {
                return Err(TalosError::InvalidKey(format!("key id {:?} is configured twice", key.id)));
            }
        }
        Ok(Sealer { keys, active: AtomicUsize::new(0) })
    }

    /// Makes the key `key_id` the one that seals from now on, for every
    /// holder of this sealer. Fails with [`TalosError::UnknownKey`] when the
    /// keyring does not hold it.
    pub fn activate(&self, key_id: &str) -> Result<()> {
        let index = self
            .keys
            .iter()
            .position(|key| key.id == key_id)
            .ok_or_else(|| TalosError::UnknownKey { key_id: key_id.to_string() })?;
        self.active.store(index, Ordering::Release);
        Ok(())
    }

    /// The keys, in configuration order, to make a larger keyring of.
    pub fn into_keys(self) -> Vec<SealingKey> {
        self.keys
    }

    /// The ids of every key, in configuration order.
    pub fn key_ids(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|key| key.id.as_str())
    }

    fn current(&self) -> &SealingKey {
        &self.keys[self.active.load(Ordering::Acquire)]
    }

    /// A sealer from a configured key: an explicit key id and base64 of 32 bytes.
    pub fn from_config(key_id: &str, key_base64: &SecretString) -> Result<Sealer> {
        Ok(Sealer::new(SealingKey::from_base64(key_id, key_base64)?))
    }

    /// The id of the key new blobs are sealed with.
    pub fn current_key_id(&self) -> &str {
        &self.current().id
    }

    /// The keys, in configuration order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &SealingKey> {
        self.keys.iter()
    }

    /// Encrypts `plaintext` for `tenant` and `purpose` with the current key.
    pub fn seal(&self, tenant: &str, purpose: &str, plaintext: &[u8]) -> Result<Vec<u8>> {
        let key = self.current();
        let nonce = random::bytes::<NONCE_LEN>()?;
        let aad = associated_data(&key.id, tenant, purpose);
        let ciphertext = key
            .cipher()
            .encrypt(&XNonce::from(nonce), Payload { msg: plaintext, aad: &aad })
            .map_err(|_| TalosError::Crypto("sealing failed".into()))?;
        let mut blob = Vec::with_capacity(MAGIC.len() + 1 + key.id.len() + NONCE_LEN + ciphertext.len());
        blob.extend_from_slice(MAGIC);
        blob.push(key.id.len() as u8);
        blob.extend_from_slice(key.id.as_bytes());
        blob.extend_from_slice(&nonce);
        blob.extend_from_slice(&ciphertext);
        Ok(blob)
    }

    /// Decrypts a blob sealed for `tenant` and `purpose` by any configured key.
    pub fn open(&self, tenant: &str, purpose: &str, sealed: &[u8]) -> Result<Vec<u8>> {
        let blob = Blob::parse(sealed)?;
        let key = self
            .keys()
            .find(|key| key.id == blob.key_id)
            .ok_or_else(|| TalosError::UnknownKey { key_id: blob.key_id.to_string() })?;
        let aad = associated_data(&key.id, tenant, purpose);
        let nonce = XNonce::try_from(blob.nonce).map_err(|_| TalosError::Corrupt("bad nonce"))?;
        key.cipher()
            .decrypt(&nonce, Payload { msg: blob.ciphertext, aad: &aad })
            .map_err(|_| TalosError::Unseal { key_id: key.id.clone() })
    }

    /// The key id a blob was sealed with: blobs whose id is not
    /// [`Sealer::current_key_id`] are due for re-sealing after a rotation.
    pub fn sealed_key_id(sealed: &[u8]) -> Result<&str> {
        Ok(Blob::parse(sealed)?.key_id)
    }

    /// `sealed` (for `tenant` and `purpose`) sealed again with the active
    /// key, or `None` when the active key sealed it already.
    pub fn reseal(&self, tenant: &str, purpose: &str, sealed: &[u8]) -> Result<Option<Vec<u8>>> {
        if Sealer::sealed_key_id(sealed)? == self.current_key_id() {
            return Ok(None);
        }
        let plaintext = secrecy::SecretSlice::from(self.open(tenant, purpose, sealed)?);
        self.seal(tenant, purpose, plaintext.expose_secret()).map(Some)
    }

    /// [`Sealer::reseal`] for the canary.
    pub fn reseal_canary(&self, sealed: &[u8]) -> Result<Option<Vec<u8>>> {
        self.reseal("", CANARY_PURPOSE, sealed)
    }

    /// A 256-bit key for data encrypted apart from sealed blobs, such as a
    /// stream too large for [`Sealer::seal`]: HKDF-SHA256 with the key
    /// `key_id` (the current one or an older one) as input keying material
    /// and `context` as info. The same key id and context give the same key;
    /// a different context gives an unrelated one. Fails with
    /// [`TalosError::UnknownKey`] when `key_id` is not configured.
    pub fn derive_key(&self, key_id: &str, context: &[u8]) -> Result<SecretBox<[u8; 32]>> {
        let key = self
            .keys()
            .find(|key| key.id == key_id)
            .ok_or_else(|| TalosError::UnknownKey { key_id: key_id.to_string() })?;
        let mut derived = Box::new([0u8; 32]);
        hkdf::Hkdf::<sha2::Sha256>::new(Some(MAGIC), key.key.expose_secret())
            .expand(context, derived.as_mut())
            .map_err(|_| TalosError::Crypto("key derivation failed".into()))?;
        Ok(SecretBox::new(derived))
    }

    /// Seals a known value, to be stored once and checked at every start.
    pub fn seal_canary(&self) -> Result<Vec<u8>> {
        self.seal("", CANARY_PURPOSE, CANARY_PLAINTEXT)
    }

    /// Checks a stored canary: fails with [`TalosError::WrongKey`] when none of
    /// the configured keys opens it, so that a misconfigured key stops the
    /// service at startup rather than at the first tenant read.
    pub fn check_canary(&self, sealed: &[u8]) -> Result<()> {
        let wrong = || TalosError::WrongKey { key_id: self.current().id.clone() };
        match self.open("", CANARY_PURPOSE, sealed) {
            Ok(plaintext) if plaintext == CANARY_PLAINTEXT => Ok(()),
            Ok(_) | Err(TalosError::UnknownKey { .. } | TalosError::Unseal { .. }) => Err(wrong()),
            Err(other) => Err(other),
        }
    }
}

/// The parts of a sealed blob.
struct Blob<'a> {
    key_id: &'a str,
    nonce: &'a [u8],
    ciphertext: &'a [u8],
}

impl<'a> Blob<'a> {
    fn parse(sealed: &'a [u8]) -> Result<Blob<'a>> {
        let rest = sealed.strip_prefix(MAGIC.as_slice()).ok_or(TalosError::Corrupt("unknown format"))?;
        let (&id_len, rest) = rest.split_first().ok_or(TalosError::Corrupt("truncated"))?;
        let id_len = usize::from(id_len);
        if rest.len() < id_len + NONCE_LEN + TAG_LEN {
            return Err(TalosError::Corrupt("truncated"));
        }
        let (id, rest) = rest.split_at(id_len);
        let key_id = std::str::from_utf8(id).map_err(|_| TalosError::Corrupt("key id is not UTF-8"))?;
        let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
        Ok(Blob { key_id, nonce, ciphertext })
    }
}

/// Length-prefixed fields, so that no two (tenant, purpose) pairs share bytes.
fn associated_data(key_id: &str, tenant: &str, purpose: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(32 + key_id.len() + tenant.len() + purpose.len());
    aad.extend_from_slice(MAGIC);
    for field in [key_id, tenant, purpose] {
        aad.extend_from_slice(&(field.len() as u64).to_be_bytes());
        aad.extend_from_slice(field.as_bytes());
    }
    aad
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealer(id: &str) -> Sealer {
        Sealer::new(SealingKey::generate(id).unwrap())
    }

    #[test]
    fn blobs_open_only_for_their_tenant_and_purpose() {
        let sealer = sealer("k1");
        let blob = sealer.seal("acme", "bundle", b"secret").unwrap();
        assert_eq!(sealer.open("acme", "bundle", &blob).unwrap(), b"secret");
        assert!(matches!(sealer.open("other", "bundle", &blob), Err(TalosError::Unseal { .. })));
        assert!(matches!(sealer.open("acme", "other", &blob), Err(TalosError::Unseal { .. })));
        assert!(matches!(sealer.open("acm", "ebundle", &blob), Err(TalosError::Unseal { .. })));
        let mut tampered = blob.clone();
        *tampered.last_mut().unwrap() ^= 1;
        assert!(sealer.open("acme", "bundle", &tampered).is_err());
        assert!(matches!(sealer.open("acme", "bundle", &blob[..20]), Err(TalosError::Corrupt(_))));
        assert!(!blob.windows(6).any(|w| w == b"secret"));
    }

    #[test]
    fn derived_keys_follow_the_key_and_the_context() {
        let old = SealingKey::new("old", [7; 32]).unwrap();
        let sealer = Sealer::with_previous(SealingKey::new("new", [9; 32]).unwrap(), vec![old]).unwrap();
        let key = |id: &str, context: &[u8]| *sealer.derive_key(id, context).unwrap().expose_secret();
        assert_eq!(key("new", b"a"), key("new", b"a"));
        assert_ne!(key("new", b"a"), key("new", b"b"));
        assert_ne!(key("new", b"a"), key("old", b"a"));
        assert_ne!(key("new", b"a"), [9; 32]);
        assert!(matches!(sealer.derive_key("gone", b"a"), Err(TalosError::UnknownKey { .. })));
    }

    #[test]
    fn rotation_opens_old_blobs_and_seals_with_the_new_key() {
        let old = SealingKey::new("old", [7; 32]).unwrap();
        let old_blob = Sealer::new(SealingKey::new("old", [7; 32]).unwrap()).seal("t", "p", b"x").unwrap();
        let rotated = Sealer::with_previous(SealingKey::generate("new").unwrap(), vec![old]).unwrap();
        assert_eq!(rotated.open("t", "p", &old_blob).unwrap(), b"x");
        let new_blob = rotated.seal("t", "p", b"x").unwrap();
        assert_eq!(Sealer::sealed_key_id(&new_blob).unwrap(), "new");
        assert_eq!(Sealer::sealed_key_id(&old_blob).unwrap(), "old");
        let without_old = sealer("new");
        assert!(matches!(without_old.open("t", "p", &old_blob), Err(TalosError::UnknownKey { .. })));
        let twice = Sealer::with_previous(
            SealingKey::generate("a").unwrap(),
            vec![SealingKey::generate("a").unwrap()],
        );
        assert!(twice.is_err());
    }

    #[test]
    fn activating_a_key_switches_sealing_and_reseal_moves_blobs_to_it() {
        let keys = vec![SealingKey::new("k1", [1; 32]).unwrap(), SealingKey::new("k2", [2; 32]).unwrap()];
        let sealer = Sealer::from_keys(keys).unwrap();
        assert_eq!(sealer.key_ids().collect::<Vec<_>>(), ["k1", "k2"]);
        let old = sealer.seal("t", "p", b"x").unwrap();
        let canary = sealer.seal_canary().unwrap();
        assert_eq!(sealer.reseal("t", "p", &old).unwrap(), None, "already under the active key");
        sealer.activate("k2").unwrap();
        assert_eq!(sealer.current_key_id(), "k2");
        let moved = sealer.reseal("t", "p", &old).unwrap().expect("re-sealed");
        assert_eq!(Sealer::sealed_key_id(&moved).unwrap(), "k2");
        assert_eq!(sealer.open("t", "p", &moved).unwrap(), b"x");
        let only_new = Sealer::new(SealingKey::new("k2", [2; 32]).unwrap());
        assert_eq!(only_new.open("t", "p", &moved).unwrap(), b"x");
        let canary = sealer.reseal_canary(&canary).unwrap().expect("re-sealed");
        only_new.check_canary(&canary).unwrap();
        assert!(sealer.reseal("other", "p", &old).is_err(), "a blob moved to another tenant stays shut");
        assert!(matches!(sealer.activate("k3"), Err(TalosError::UnknownKey { .. })));
        assert_eq!(sealer.current_key_id(), "k2");
        assert!(Sealer::from_keys(Vec::new()).is_err());
    }

    #[test]
    fn canary_detects_a_wrong_key() {
        let right = Sealer::new(SealingKey::new("k", [1; 32]).unwrap());
        let canary = right.seal_canary().unwrap();
        right.check_canary(&canary).unwrap();
        let wrong = Sealer::new(SealingKey::new("k", [2; 32]).unwrap());
        let err = wrong.check_canary(&canary).unwrap_err();
        assert!(matches!(err, TalosError::WrongKey { .. }), "{err}");
        assert!(err.to_string().contains("does not open the stored canary"));
        assert!(matches!(sealer("other").check_canary(&canary), Err(TalosError::WrongKey { .. })));
    }

    #[test]
    fn configured_keys_are_checked() {
        let good = SecretString::from(STANDARD.encode([9u8; 32]));
        assert_eq!(Sealer::from_config("prod-1", &good).unwrap().current_key_id(), "prod-1");
        let short = SecretString::from(STANDARD.encode([9u8; 16]));
        assert!(Sealer::from_config("k", &short).is_err());
        assert!(Sealer::from_config("k", &SecretString::from("not base64!")).is_err());
        assert!(Sealer::from_config("", &good).is_err());
        assert!(Sealer::from_config("a b", &good).is_err());
        assert!(!format!("{:?}", Sealer::from_config("k", &good).unwrap()).contains("CQkJ"));
    }
}

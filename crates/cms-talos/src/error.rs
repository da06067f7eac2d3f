//! The one error type of the crate.

/// What went wrong while generating, rendering, patching, sealing or issuing.
#[derive(Debug, thiserror::Error)]
pub enum TalosError {
    /// The Talos version is malformed or outside the supported range.
    #[error("unsupported Talos version {version:?}: {reason}")]
    UnsupportedVersion { version: String, reason: &'static str },
    /// A rendering input is missing or malformed.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A config patch could not be applied to the machine config.
    #[error("config patch {patch:?} does not apply: {message}")]
    Patch { patch: String, message: String },
    /// Generating or parsing a key or a certificate failed.
    #[error("certificate or key processing failed: {0}")]
    Crypto(String),
    /// A sealed blob is malformed: it was not written by [`crate::Sealer`].
    #[error("sealed data is malformed: {0}")]
    Corrupt(&'static str),
    /// A sealed blob names a key id that is not configured.
    #[error("sealed data names key id {key_id:?}, which is not configured")]
    UnknownKey { key_id: String },
    /// A sealed blob did not open: wrong key, wrong tenant or purpose, or tampered data.
    #[error(
        "sealed data does not open with key {key_id:?}: wrong key, wrong tenant or purpose, or tampered data"
    )]
    Unseal { key_id: String },
    /// The configured sealing key is not the key the stored data was sealed with.
    #[error(
        "the configured sealing key {key_id:?} does not open the stored canary: \
         the key is wrong, or the data was sealed with another key"
    )]
    WrongKey { key_id: String },
    /// A sealing key is malformed.
    #[error("invalid sealing key: {0}")]
    InvalidKey(String),
    /// The key file could not be read or created.
    #[error("key file {path}: {source}")]
    KeyFile {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A document could not be encoded as YAML or JSON.
    #[error("encoding failed: {0}")]
    Encode(String),
}

/// The result type of the crate.
pub type Result<T, E = TalosError> = std::result::Result<T, E>;

impl TalosError {
    pub(crate) fn crypto(err: impl std::fmt::Display) -> TalosError {
        TalosError::Crypto(err.to_string())
    }
}

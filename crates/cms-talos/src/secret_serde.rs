//! Serde for `SecretString` fields of stored (sealed) structures.
//!
//! `secrecy` does not serialize secrets on its own; these helpers do it for
//! the fields that must reach storage, which is sealed before it is written.

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Deserializer, Serializer};

pub(crate) fn serialize<S: Serializer>(secret: &SecretString, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(secret.expose_secret())
}

pub(crate) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<SecretString, D::Error> {
    String::deserialize(deserializer).map(SecretString::from)
}

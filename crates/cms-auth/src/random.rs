//! Random bytes from the operating system.

use crate::error::AuthError;

/// `N` random bytes.
pub(crate) fn bytes<const N: usize>() -> Result<[u8; N], AuthError> {
    let mut buffer = [0u8; N];
    getrandom::fill(&mut buffer).map_err(|err| AuthError::Crypto(format!("no randomness: {err}")))?;
    Ok(buffer)
}

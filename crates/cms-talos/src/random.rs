//! Random bytes and Talos-style tokens from the operating system's generator.

use crate::error::{Result, TalosError};

/// `n` random bytes.
pub(crate) fn bytes<const N: usize>() -> Result<[u8; N]> {
    let mut buf = [0u8; N];
    getrandom::fill(&mut buf).map_err(|err| TalosError::Crypto(format!("random source: {err}")))?;
    Ok(buf)
}

const TOKEN_ALPHABET: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";

/// A string of `len` characters from `[0-9a-z]`, drawn without modulo bias.
fn token_part(len: usize) -> Result<String> {
    let mut out = String::with_capacity(len);
    while out.len() < len {
        for byte in bytes::<32>()? {
            // 252 = 7 * 36: bytes at or above it would favour the first letters.
            if byte < 252 && out.len() < len {
                out.push(char::from(TOKEN_ALPHABET[usize::from(byte % 36)]));
            }
        }
    }
    Ok(out)
}

/// A token of the form `[0-9a-z]{6}.[0-9a-z]{16}`, as Talos uses for the
/// bootstrap token and the trustd token.
pub(crate) fn token() -> Result<String> {
    Ok(format!("{}.{}", token_part(6)?, token_part(16)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_have_the_talos_shape() {
        for _ in 0..50 {
            let token = token().unwrap();
            let (head, tail) = token.split_once('.').unwrap();
            assert_eq!((head.len(), tail.len()), (6, 16), "{token}");
            let ok = |s: &str| s.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_lowercase());
            assert!(ok(head) && ok(tail), "{token}");
        }
        assert_ne!(token().unwrap(), token().unwrap());
    }
}

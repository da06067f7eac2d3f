//! API tokens: `cms_<id>_<secret>`, where the id finds the record and only a
//! SHA-256 of the 256-bit secret is stored, compared in constant time.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::error::AuthError;

/// Every API token starts with this, so scanners and people recognise it.
pub const PREFIX: &str = "cms_";

/// A freshly made token: the value to show once, and what to store.
#[derive(Clone)]
pub struct NewToken {
    /// The whole token; shown once, never stored.
    pub value: String,
    pub id: String,
    pub secret_hash: String,
}

impl std::fmt::Debug for NewToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewToken").field("id", &self.id).finish_non_exhaustive()
    }
}

/// Makes a new token.
pub fn generate() -> Result<NewToken, AuthError> {
    let id = hex::encode(crate::random::bytes::<8>()?);
    let secret = hex::encode(crate::random::bytes::<32>()?);
    Ok(NewToken { value: format!("{PREFIX}{id}_{secret}"), secret_hash: hash(&secret), id })
}

/// Splits a token into its id and secret, if it has the token's shape.
pub fn parse(token: &str) -> Option<(&str, &str)> {
    let rest = token.strip_prefix(PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    let hexadecimal = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    (hexadecimal(id, 16) && hexadecimal(secret, 64)).then_some((id, secret))
}

/// Whether `secret` hashes to `stored`, compared in constant time.
pub fn matches(secret: &str, stored: &str) -> bool {
    hash(secret).as_bytes().ct_eq(stored.as_bytes()).into()
}

fn hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_tokens_parse_and_match() {
        let token = generate().unwrap();
        assert!(token.value.starts_with(PREFIX));
        assert_eq!(token.value.len(), PREFIX.len() + 16 + 1 + 64);
        let (id, secret) = parse(&token.value).unwrap();
        assert_eq!(id, token.id);
        assert!(matches(secret, &token.secret_hash));
        assert!(!matches(&secret.replace('a', "b").replace('0', "1"), &token.secret_hash));
        assert!(!token.secret_hash.contains(secret), "only the hash is kept");
        assert_ne!(generate().unwrap().value, token.value);
    }

    #[test]
    fn malformed_tokens_do_not_parse() {
        for bad in ["", "cms_", "cms_abc_def", "xyz_0011223344556677_00", "eyJhbGciOi.x.y"] {
            assert!(parse(bad).is_none(), "{bad}");
        }
    }
}

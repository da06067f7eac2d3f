//! An issuer's signing keys as its JWKS lists them, and the choice of the
//! key that may verify a token.

use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, JwkSet, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};

/// The algorithms a token may be signed with: asymmetric ones only, so a
/// public key can never be used as an HMAC secret, and never `none`.
pub(crate) const ALLOWED: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// The decoding key of `set` for a token signed with `alg` under `kid`:
/// the key with that id, or, when the token names none, the only key of the
/// set usable with `alg`.
pub(crate) fn select(set: &JwkSet, kid: Option<&str>, alg: Algorithm) -> Option<DecodingKey> {
    let mut usable = set.keys.iter().filter(|jwk| usable_with(jwk, alg));
    let jwk = match kid {
        Some(kid) => usable.find(|jwk| jwk.common.key_id.as_deref() == Some(kid))?,
        None => {
            let first = usable.next()?;
            if usable.next().is_some() {
                return None;
            }
            first
        }
    };
    DecodingKey::from_jwk(jwk).ok()
}

/// Whether `jwk` is a signing key of the family of `alg`, and of `alg`
/// itself when it names one.
fn usable_with(jwk: &Jwk, alg: Algorithm) -> bool {
    if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
        return false;
    }
    if let Some(named) = jwk.common.key_algorithm
        && named != KeyAlgorithm::from(alg)
    {
        return false;
    }
    match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => matches!(
            alg,
            Algorithm::RS256
                | Algorithm::RS384
                | Algorithm::RS512
                | Algorithm::PS256
                | Algorithm::PS384
                | Algorithm::PS512
        ),
        AlgorithmParameters::EllipticCurve(_) => matches!(alg, Algorithm::ES256 | Algorithm::ES384),
        AlgorithmParameters::OctetKeyPair(_) => alg == Algorithm::EdDSA,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn set(keys: serde_json::Value) -> JwkSet {
        serde_json::from_value(json!({"keys": keys})).unwrap()
    }

    #[test]
    fn a_shared_secret_is_never_a_key() {
        let keys = set(json!([{"kty": "oct", "k": "c2VjcmV0", "kid": "a"}]));
        assert!(select(&keys, Some("a"), Algorithm::RS256).is_none());
        assert!(select(&keys, Some("a"), Algorithm::ES256).is_none());
    }

    #[test]
    fn keys_are_chosen_by_id_and_family() {
        let ec = |kid: &str| {
            json!({"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig",
                "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
                "y": "x_FEzRjM62V3bGp2ejGNg-jstGbbTTJE1TD1fwgbZfw"})
        };
        let keys = set(json!([ec("one"), ec("two")]));
        assert!(select(&keys, Some("two"), Algorithm::ES256).is_some());
        assert!(select(&keys, Some("three"), Algorithm::ES256).is_none());
        assert!(select(&keys, Some("two"), Algorithm::RS256).is_none(), "an EC key never verifies RSA");
        assert!(select(&keys, None, Algorithm::ES256).is_none(), "no id, two candidates");
        assert!(select(&set(json!([ec("one")])), None, Algorithm::ES256).is_some());
    }
}

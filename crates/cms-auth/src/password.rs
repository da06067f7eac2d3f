//! Password hashing with bcrypt at cost 12, run off the async threads.

use std::sync::OnceLock;

use cms_model::validate_password;
use secrecy::{ExposeSecret, SecretString};

use crate::error::AuthError;

/// The bcrypt cost of every stored hash.
pub const COST: u32 = 12;

/// Hashes a new password after checking its length.
pub async fn hash(field: &str, password: &SecretString) -> Result<String, AuthError> {
    validate_password(field, password.expose_secret())?;
    let password = password.clone();
    blocking(move || {
        bcrypt::hash(password.expose_secret(), COST).map_err(|err| AuthError::Crypto(err.to_string()))
    })
    .await
}

/// Checks a password against a stored hash. With no hash (an unknown user),
/// it checks against a fixed hash of the same cost, so that both take the
/// same time, and answers false.
pub async fn verify(password: &SecretString, hash: Option<String>) -> Result<bool, AuthError> {
    let password = password.clone();
    blocking(move || check(&password, hash)).await
}

/// [`verify`] on the calling thread, which it blocks for the check's whole
/// cost: for callers that bound how many run at once.
pub(crate) fn check(password: &SecretString, hash: Option<String>) -> Result<bool, AuthError> {
    let known = hash.is_some();
    let hash = match hash {
        Some(hash) => hash,
        None => dummy_hash()?.to_string(),
    };
    // A password bcrypt would truncate never matches.
    if password.expose_secret().len() > cms_model::MAX_PASSWORD_BYTES {
        let _ = bcrypt::verify(b"", &hash);
        return Ok(false);
    }
    let matches = bcrypt::verify(password.expose_secret(), &hash).unwrap_or(false);
    Ok(known && matches)
}

/// A hash of a random password, made once, for unknown users.
fn dummy_hash() -> Result<&'static str, AuthError> {
    static DUMMY: OnceLock<String> = OnceLock::new();
    if let Some(hash) = DUMMY.get() {
        return Ok(hash);
    }
    let secret = hex::encode(crate::random::bytes::<16>()?);
    let hash = bcrypt::hash(secret, COST).map_err(|err| AuthError::Crypto(err.to_string()))?;
    Ok(DUMMY.get_or_init(|| hash))
}

/// Warms the fixed hash so the first unknown-user login is not slower. (A
/// login of an unknown user during the warm-up makes the hash itself, and
/// takes longer, for that moment only.)
pub async fn warm_up() -> Result<(), AuthError> {
    blocking(|| dummy_hash().map(|_| ())).await
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, AuthError> + Send + 'static,
) -> Result<T, AuthError> {
    tokio::task::spawn_blocking(work).await.map_err(|err| AuthError::Crypto(err.to_string()))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn hashes_verify_and_reject() {
        let password = SecretString::from("correct horse battery");
        let stored = hash("spec.password", &password).await.unwrap();
        assert!(stored.starts_with("$2b$12$"), "cost 12: {stored}");
        assert!(verify(&password, Some(stored.clone())).await.unwrap());
        assert!(!verify(&SecretString::from("wrong horse battery"), Some(stored)).await.unwrap());
        assert!(!verify(&password, None).await.unwrap(), "unknown users never match");
    }

    #[tokio::test]
    async fn long_passwords_are_rejected() {
        let long = SecretString::from("x".repeat(73));
        assert!(matches!(hash("spec.password", &long).await, Err(AuthError::Invalid(_))));
    }
}

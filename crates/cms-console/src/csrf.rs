//! The form token against cross-site request forgery. Every form that
//! changes something carries a hidden `csrf` field: the hex SHA-256 of a
//! fixed label and the session token. Only a page of this site, rendered for
//! this session, holds it; the hash does not give the session token back, so
//! a script that reads the page learns nothing it could sign in with. A
//! posted form without the session's token is refused with `403`.

use http::StatusCode;
use sha2::{Digest, Sha256};

use crate::failure::Failure;
use crate::form::Form;
use crate::reply::Refused;
use crate::session::Session;

/// The form field that carries the token.
pub(crate) const FIELD: &str = "csrf";

/// What the hash covers before the session token, so that the form token is
/// useful for nothing else.
const LABEL: &[u8] = b"cms-console form token v1\0";

/// The form token of the session whose token is `session_token`.
pub(crate) fn token_for(session_token: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(LABEL);
    hasher.update(session_token.as_bytes());
    hex::encode(hasher.finalize())
}

/// Fails with a `403` page unless `form` carries the session's token.
pub(crate) fn check(session: &Session, form: &Form) -> Result<(), Refused> {
    if same(form.get(FIELD).as_bytes(), session.csrf().as_bytes()) {
        return Ok(());
    }
    let message = "The form's security token is missing or does not match your session, so nothing \
                   was changed. Reload the page and try again.";
    Err(Failure::new(StatusCode::FORBIDDEN, message).page(Some(session)).into())
}

/// Compares in time that does not depend on where the values differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_follow_the_session_and_hide_it() {
        let token = token_for("eyJ.session.token");
        assert_eq!(token.len(), 64);
        assert_eq!(token, token_for("eyJ.session.token"));
        assert_ne!(token, token_for("eyJ.other.token"));
        assert!(!token.contains("session"));
    }

    #[test]
    fn comparison() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"ab"));
        assert!(!same(b"", b"a"));
    }
}

//! The first admin, created on an empty store.

use cms_model::UserRole;
use secrecy::SecretString;

use crate::authenticator::Authenticator;
use crate::error::AuthError;

/// The name of the first admin.
pub const BOOTSTRAP_ADMIN: &str = "admin";

/// Creates user `admin` when there are no users. Without a configured
/// password one is generated and returned, so the caller can show it once.
pub async fn bootstrap_admin(
    auth: &Authenticator,
    password: Option<SecretString>,
) -> Result<Option<SecretString>, AuthError> {
    if !auth.accounts().users().await?.is_empty() {
        return Ok(None);
    }
    create_first_admin(auth, FirstAdmin::prepare(password).await?).await
}

/// The first admin's password, with its hash made ahead of time: bcrypt
/// takes a while, and a first start can hash while it creates the store.
pub struct FirstAdmin {
    password: SecretString,
    generated: bool,
    hash: String,
}

impl FirstAdmin {
    /// Hashes `password`, or a generated one without it.
    pub async fn prepare(password: Option<SecretString>) -> Result<FirstAdmin, AuthError> {
        let (password, generated) = match password {
            Some(password) => (password, false),
            None => (SecretString::from(hex::encode(crate::random::bytes::<16>()?)), true),
        };
        let hash = crate::password::hash("CMS_BOOTSTRAP_ADMIN_PASSWORD", &password).await?;
        Ok(FirstAdmin { password, generated, hash })
    }
}

impl std::fmt::Debug for FirstAdmin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FirstAdmin").field("generated", &self.generated).finish_non_exhaustive()
    }
}

/// Like [`bootstrap_admin`], with a password prepared beforehand; it is
/// dropped when the store has users already.
pub async fn create_first_admin(
    auth: &Authenticator,
    first: FirstAdmin,
) -> Result<Option<SecretString>, AuthError> {
    let now = chrono::Utc::now();
    let record = cms_store::UserRecord {
        name: BOOTSTRAP_ADMIN.into(),
        role: Some(UserRole::Admin),
        password_hash: first.hash,
        resource_version: 1,
        created_at: now,
        updated_at: now,
    };
    let created = auth.accounts().create_first_user(record).await?;
    Ok((created && first.generated).then_some(first.password))
}

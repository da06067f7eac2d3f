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
    let (password, generated) = match password {
        Some(password) => (password, false),
        None => (SecretString::from(hex::encode(crate::random::bytes::<16>()?)), true),
    };
    let hash = crate::password::hash("CMS_BOOTSTRAP_ADMIN_PASSWORD", &password).await?;
    let now = chrono::Utc::now();
    let record = cms_store::UserRecord {
        name: BOOTSTRAP_ADMIN.into(),
        role: UserRole::Admin,
        password_hash: hash,
        resource_version: 1,
        created_at: now,
        updated_at: now,
    };
    let created = auth.accounts().create_first_user(record).await?;
    Ok((created && generated).then_some(password))
}

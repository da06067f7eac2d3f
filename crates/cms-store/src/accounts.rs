//! Users, API tokens and generated settings: the records authentication
//! reads. They never enter the resource cache or the event log, since they
//! hold password and token hashes.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use cms_model::{GrantSpec, UserRole};

use crate::error::StoreError;

/// A stored user.
#[derive(Clone, PartialEq, Eq)]
pub struct UserRecord {
    pub name: String,
    /// The global role; `None` for a user whose access is its grants'.
    pub role: Option<UserRole>,
    /// The bcrypt hash of the password.
    pub password_hash: String,
    pub resource_version: u64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl std::fmt::Debug for UserRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserRecord")
            .field("name", &self.name)
            .field("role", &self.role)
            .field("resource_version", &self.resource_version)
            .finish_non_exhaustive()
    }
}

/// A change to a user; `None` keeps the field.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct UserChange {
    /// The new global role, `Some(None)` for none.
    pub role: Option<Option<UserRole>>,
    pub password_hash: Option<String>,
}

impl std::fmt::Debug for UserChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserChange")
            .field("role", &self.role)
            .field("password", &self.password_hash.as_ref().map(|_| "<changed>"))
            .finish()
    }
}

/// A stored API token.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenRecord {
    /// The public part of the token, which finds the record.
    pub id: String,
    pub user: String,
    pub name: String,
    /// The SHA-256 of the secret part, hex-encoded.
    pub secret_hash: String,
    pub expires_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
}

impl std::fmt::Debug for TokenRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenRecord")
            .field("id", &self.id)
            .field("user", &self.user)
            .field("name", &self.name)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

/// A stored grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantRecord {
    pub name: String,
    pub spec: GrantSpec,
    pub resource_version: u64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// The persistence of users, tokens, grants and settings.
#[cfg_attr(any(test, feature = "testsuite"), mockall::automock)]
#[async_trait]
pub trait Accounts: Send + Sync + 'static {
    async fn user(&self, name: String) -> Result<Option<UserRecord>, StoreError>;

    /// Every user, sorted by name.
    async fn users(&self) -> Result<Vec<UserRecord>, StoreError>;

    /// Creates a user; `AlreadyExists` when the name is taken.
    async fn create_user(&self, user: UserRecord) -> Result<UserRecord, StoreError>;

    /// Creates `user` only if there are no users at all. Returns whether it did.
    async fn create_first_user(&self, user: UserRecord) -> Result<bool, StoreError>;

    /// Changes a user, checking `resourceVersion` when given. Demoting the
    /// last admin is `Refused`.
    async fn update_user(
        &self,
        name: String,
        change: UserChange,
        expected: Option<u64>,
    ) -> Result<UserRecord, StoreError>;

    /// Deletes a user and its tokens. Deleting the last admin is `Refused`.
    async fn delete_user(&self, name: String) -> Result<(), StoreError>;

    /// Stores a token; `AlreadyExists` when the user has one of that name.
    async fn create_token(&self, token: TokenRecord) -> Result<TokenRecord, StoreError>;

    /// A user's tokens, sorted by name.
    async fn tokens(&self, user: String) -> Result<Vec<TokenRecord>, StoreError>;

    /// The token with this id.
    async fn token(&self, id: String) -> Result<Option<TokenRecord>, StoreError>;

    /// Revokes a token; `NotFound` when there is none of that name.
    async fn delete_token(&self, user: String, name: String) -> Result<(), StoreError>;

    /// Records when a token was last used.
    async fn touch_token(&self, id: String, at: DateTime<Utc>) -> Result<(), StoreError>;

    /// Every grant, sorted by name.
    async fn grants(&self) -> Result<Vec<GrantRecord>, StoreError>;

    /// The grant `name`.
    async fn grant(&self, name: String) -> Result<Option<GrantRecord>, StoreError>;

    /// Creates a grant at version 1; `AlreadyExists` when the name is taken.
    async fn create_grant(&self, grant: GrantRecord) -> Result<GrantRecord, StoreError>;

    /// Replaces a grant's spec if it is still at version `expected`
    /// (`Conflict` otherwise); `NotFound` when there is none.
    async fn update_grant(
        &self,
        name: String,
        spec: GrantSpec,
        expected: u64,
    ) -> Result<GrantRecord, StoreError>;

    /// Deletes a grant; `NotFound` when there is none.
    async fn delete_grant(&self, name: String) -> Result<(), StoreError>;

    /// The setting `name`; when absent, stores `value` first. Every replica
    /// gets the same answer.
    async fn setting_or_insert(&self, name: String, value: String) -> Result<String, StoreError>;
}

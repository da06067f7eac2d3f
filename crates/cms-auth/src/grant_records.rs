//! The grants as the [`Authenticator`] keeps them: read from the store and
//! cached for `cache_ttl` (2 s by default) like users' roles, so that a
//! grant written on another replica applies there within that time; every
//! grant written through this authenticator clears the cache at once. Each
//! authenticated caller carries the grants that name it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use cms_model::{GrantSpec, UserRole};
use cms_store::GrantRecord;

use crate::authenticator::Authenticator;
use crate::error::AuthError;
use crate::grants::{Grant, Grants};
use crate::identity::{Caller, Source};
use crate::seen::Reuse;

/// Every grant, shared.
pub(crate) type AllGrants = Arc<[Arc<Grant>]>;

impl Authenticator {
    /// Every grant, from the cache while it is fresh. A stored grant that
    /// no longer reads as valid is skipped, with a warning; `reuse` learns
    /// until when they stay good.
    async fn all_grants(&self, reuse: &mut Reuse) -> Result<AllGrants, AuthError> {
        if let Some((grants, at)) = self.grants.lock().unwrap_or_else(|p| p.into_inner()).as_ref()
            && at.elapsed() < self.cache_ttl
        {
            reuse.read_at(*at, self.cache_ttl);
            return Ok(grants.clone());
        }
        let records = self.accounts().grants().await?;
        let grants: AllGrants = records
            .iter()
            .filter_map(|record| match Grant::new(&record.name, &record.spec) {
                Ok(grant) => Some(Arc::new(grant)),
                Err(err) => {
                    tracing::warn!(grant = %record.name, error = %err, "a stored grant is not valid; skipped");
                    None
                }
            })
            .collect();
        *self.grants.lock().unwrap_or_else(|p| p.into_inner()) = Some((grants.clone(), Instant::now()));
        Ok(grants)
    }

    /// `caller` with the grants that name it. An admin needs none. A caller
    /// from elsewhere (single sign-on, workload) with no global role and no
    /// grant is turned away: nothing on this server is its.
    pub(crate) async fn with_grants(&self, caller: Caller) -> Result<Caller, AuthError> {
        self.with_grants_reused(caller, &mut Reuse::within(Instant::now(), Duration::ZERO)).await
    }

    /// [`Authenticator::with_grants`], telling `reuse` until when the
    /// grants it found stay good.
    pub(crate) async fn with_grants_reused(
        &self,
        mut caller: Caller,
        reuse: &mut Reuse,
    ) -> Result<Caller, AuthError> {
        if caller.role == Some(UserRole::Admin) {
            return Ok(caller);
        }
        caller.grants = Grants::of(&self.all_grants(reuse).await?, &caller);
        if caller.role.is_some() || !caller.grants.is_empty() {
            return Ok(caller);
        }
        match caller.source {
            Source::Local => Ok(caller),
            Source::Sso { .. } => Err(AuthError::Rejected(
                "none of this user's groups grants a role or is named by a grant any more".into(),
            )),
            Source::Workload { .. } => Err(AuthError::Rejected(
                "no trust rule of this issuer matches the token's subject, and no grant names it".into(),
            )),
        }
    }

    /// Drops the cached grants, after a write.
    fn forget_grants(&self) {
        *self.grants.lock().unwrap_or_else(|p| p.into_inner()) = None;
        // After the cache is cleared: a caller worked out from it later
        // belongs to the new generation.
        self.seen.forget_all();
    }

    /// Creates grant `name`. `admin` is never granted
    /// ([`AuthError::NotGrantable`]); past the bound on grants it is
    /// [`AuthError::TooManyGrants`]. It applies to the next request.
    pub async fn create_grant(&self, name: &str, spec: GrantSpec) -> Result<GrantRecord, AuthError> {
        check(name, &spec)?;
        let _counting = self.grant_writes.lock().await;
        if self.accounts().grants().await?.len() >= self.max_grants {
            return Err(AuthError::TooManyGrants { cap: self.max_grants });
        }
        let now = Utc::now();
        let record =
            GrantRecord { name: name.into(), spec, resource_version: 1, created_at: now, updated_at: now };
        let created = self.accounts().create_grant(record).await;
        self.forget_grants();
        Ok(created?)
    }

    /// Replaces grant `name`'s spec if it is still at version `expected`.
    pub async fn update_grant(
        &self,
        name: &str,
        spec: GrantSpec,
        expected: u64,
    ) -> Result<GrantRecord, AuthError> {
        check(name, &spec)?;
        let updated = self.accounts().update_grant(name.into(), spec, expected).await;
        self.forget_grants();
        Ok(updated?)
    }

    /// Deletes grant `name`; what it gave ends with the next request.
    pub async fn delete_grant(&self, name: &str) -> Result<(), AuthError> {
        let deleted = self.accounts().delete_grant(name.into()).await;
        self.forget_grants();
        Ok(deleted?)
    }
}

/// The rules of a grant: a grantable role (400 otherwise), then every field.
fn check(name: &str, spec: &GrantSpec) -> Result<(), AuthError> {
    if let Some(message) = spec.refused_role() {
        return Err(AuthError::NotGrantable(message));
    }
    cms_model::validate_name("metadata.name", name)?;
    Ok(spec.validate()?)
}

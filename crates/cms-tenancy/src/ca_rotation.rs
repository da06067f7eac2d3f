//! The rotation of a tenant's CAs as the API begins it and the reconciler
//! carries it on (`docs/ca-rotation.md`). The sealed bundle holds it: each
//! change is a compare-and-swap of the sealed bytes, so two writers never
//! both win, and whoever reads the bundle next reads where it stands.
//! [`CaRotations`] is the seam; [`SealedRotations`] the real one.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use cms_model::FieldError;
use cms_store::{Sealed, Store};
use cms_talos::{Authority, RotationPhase, SecretsBundle};

use crate::error::TenancyError;
use crate::secrets::Secrets;

/// A rotation under way: the authorities it rotates, in one phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rotation {
    pub authorities: Vec<Authority>,
    pub phase: RotationPhase,
}

/// Reading, beginning and moving on tenants' CA rotations.
#[cfg_attr(any(test, feature = "testsuite"), mockall::automock)]
#[async_trait]
pub trait CaRotations: Send + Sync + 'static {
    /// The rotation of `tenant` under way, if any.
    async fn rotation(&self, tenant: &str) -> Result<Option<Rotation>, TenancyError>;

    /// Begins rotating `authorities` (none twice, at least one): new CAs
    /// sealed beside the old at [`RotationPhase::Generated`].
    /// [`TenancyError::Conflict`] while a rotation is under way.
    async fn begin(&self, tenant: &str, authorities: &[Authority]) -> Result<Rotation, TenancyError>;

    /// Moves the rotation from `from` to its next phase; `None` when it
    /// ended, the old CAs gone from the bundle. A rotation no longer at
    /// `from` (another writer moved it) is [`TenancyError::Conflict`].
    async fn advance(&self, tenant: &str, from: RotationPhase)
    -> Result<Option<RotationPhase>, TenancyError>;
}

/// [`CaRotations`] on each tenant's sealed bundle.
pub struct SealedRotations {
    store: Arc<dyn Store>,
    sealed: Arc<dyn Sealed>,
    secrets: Arc<Secrets>,
}

impl SealedRotations {
    pub fn new(store: Arc<dyn Store>, sealed: Arc<dyn Sealed>, secrets: Arc<Secrets>) -> SealedRotations {
        SealedRotations { store, sealed, secrets }
    }

    /// The sealed bytes of `tenant`'s bundle, and the bundle.
    async fn read(&self, tenant: &str) -> Result<(Vec<u8>, SecretsBundle), TenancyError> {
        let sealed = self
            .store
            .secrets(tenant.to_string())
            .await?
            .ok_or_else(|| TenancyError::NoSecrets(tenant.to_string()))?;
        let bundle = self.secrets.sealer().open_bundle(tenant, &sealed)?;
        Ok((sealed, bundle))
    }

    /// Seals `bundle` in place of `old`: [`TenancyError::Conflict`] when
    /// the bytes changed meanwhile.
    async fn replace(&self, tenant: &str, old: Vec<u8>, bundle: &SecretsBundle) -> Result<(), TenancyError> {
        let new = self.secrets.sealer().seal_bundle(tenant, bundle)?;
        match self.sealed.replace_secrets(tenant.to_string(), old, new).await? {
            true => Ok(()),
            false => Err(TenancyError::Conflict(format!(
                "the secrets of tenant {tenant:?} changed meanwhile; try again"
            ))),
        }
    }
}

impl fmt::Debug for SealedRotations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SealedRotations").finish_non_exhaustive()
    }
}

/// The rotation a bundle records, if any.
pub fn rotation_of(bundle: &SecretsBundle) -> Option<Rotation> {
    let authorities: Vec<Authority> = [Authority::Os, Authority::Kubernetes]
        .into_iter()
        .filter(|authority| bundle.rotation(*authority).is_some())
        .collect();
    let phase = authorities.iter().filter_map(|authority| bundle.rotation_phase(*authority)).min()?;
    Some(Rotation { authorities, phase })
}

#[async_trait]
impl CaRotations for SealedRotations {
    async fn rotation(&self, tenant: &str) -> Result<Option<Rotation>, TenancyError> {
        Ok(rotation_of(&self.read(tenant).await?.1))
    }

    async fn begin(&self, tenant: &str, authorities: &[Authority]) -> Result<Rotation, TenancyError> {
        if authorities.is_empty() {
            return Err(FieldError::new("authorities", "name at least one authority to rotate").into());
        }
        let (old, mut bundle) = self.read(tenant).await?;
        if let Some(under_way) = rotation_of(&bundle) {
            return Err(TenancyError::Conflict(format!(
                "a rotation of the tenant's CAs is under way (phase {})",
                phase_name(Some(under_way.phase))
            )));
        }
        let mut begun = Vec::new();
        for authority in authorities {
            if begun.contains(authority) {
                continue;
            }
            // Generating keys takes milliseconds: off the async workers.
            let (authority, mut taken) = (*authority, bundle);
            bundle = tokio::task::spawn_blocking(move || taken.begin_rotation(authority).map(|()| taken))
                .await
                .map_err(|err| TenancyError::Task(err.to_string()))??;
            begun.push(authority);
        }
        self.replace(tenant, old, &bundle).await?;
        tracing::info!(tenant, ?begun, "began rotating the tenant's CAs");
        Ok(Rotation { authorities: begun, phase: RotationPhase::Generated })
    }

    async fn advance(
        &self,
        tenant: &str,
        from: RotationPhase,
    ) -> Result<Option<RotationPhase>, TenancyError> {
        let (old, mut bundle) = self.read(tenant).await?;
        let Some(rotation) = rotation_of(&bundle) else {
            return Err(TenancyError::Conflict(format!(
                "no rotation of tenant {tenant:?}'s CAs is under way"
            )));
        };
        if rotation.phase != from {
            return Err(TenancyError::Conflict(format!(
                "the rotation of tenant {tenant:?}'s CAs is at {}, not {}",
                phase_name(Some(rotation.phase)),
                phase_name(Some(from))
            )));
        }
        let mut reached = None;
        for authority in &rotation.authorities {
            reached = bundle.advance_rotation(*authority)?;
        }
        self.replace(tenant, old, &bundle).await?;
        tracing::info!(
            tenant,
            from = phase_name(Some(from)),
            to = phase_name(reached),
            "moved the CA rotation on"
        );
        Ok(reached)
    }
}

/// A phase as the status names it: `done` for `None`.
pub fn phase_name(phase: Option<RotationPhase>) -> &'static str {
    match phase {
        Some(RotationPhase::Generated) => "generated",
        Some(RotationPhase::Accepting) => "accepting",
        Some(RotationPhase::Switched) => "switched",
        Some(RotationPhase::Swapping) => "swapping",
        Some(RotationPhase::Dropping) => "dropping",
        None => "done",
    }
}

/// An authority as the API names it.
pub fn authority_name(authority: Authority) -> &'static str {
    match authority {
        Authority::Os => "os",
        Authority::Kubernetes => "kubernetes",
    }
}

#[cfg(test)]
mod tests;

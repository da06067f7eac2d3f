//! An administrator's request to rotate a tenant's CAs, as the API's
//! `POST /tenants/{name}/rotate-ca` and the console's form make it
//! (`docs/ca-rotation.md`, Asking for a rotation): the new CAs sealed beside
//! the old ([`CaRotations::begin`], a compare-and-swap, so a second request
//! while one runs is [`TenancyError::Conflict`]), the tenant's
//! [`CA_ROTATION_ANNOTATION`] set to the time of the request, which wakes
//! the reconciler that carries the rotation on, and `status.caRotation` at
//! `generated`.

use chrono::{DateTime, SecondsFormat, Utc};
use cms_model::{CA_ROTATION_ANNOTATION, CaRotationStatus, FieldError};
use cms_store::{Draft, Key, StoreError, update_tenant_status};
use cms_talos::{Authority, RotationPhase};

use crate::ca_rotation::{CaRotations, authority_name, phase_name};
use crate::error::TenancyError;
use crate::tenancy::Tenancy;

/// The authorities a request may name, as the API names them.
pub const AUTHORITY_NAMES: [&str; 2] = ["os", "kubernetes"];

/// How many times the annotation's write is tried while the tenant keeps
/// changing.
const ATTEMPTS: usize = 10;

/// The authorities `names` name: at least one, each `os` or `kubernetes`,
/// none twice. A refusal names the field `authorities`. They come in the
/// order the sealed bundle lists them (`os` first), whatever the request's.
pub fn authorities_named(names: &[String]) -> Result<Vec<Authority>, FieldError> {
    if names.is_empty() {
        return Err(FieldError::new("authorities", "name at least one authority: os, kubernetes or both"));
    }
    let mut authorities = Vec::with_capacity(names.len());
    for (index, name) in names.iter().enumerate() {
        let field = format!("authorities[{index}]");
        let authority = match name.as_str() {
            "os" => Authority::Os,
            "kubernetes" => Authority::Kubernetes,
            _ => {
                let shown: String = name.chars().take(32).collect();
                return Err(FieldError::new(field, format!("{shown:?} is no authority: os or kubernetes")));
            }
        };
        if authorities.contains(&authority) {
            return Err(FieldError::new(field, format!("{name} is named twice")));
        }
        authorities.push(authority);
    }
    authorities.sort_by_key(|authority| *authority != Authority::Os);
    Ok(authorities)
}

/// Begins rotating `authorities` of tenant `name` at `now`: the new CAs
/// sealed, the reconciler woken, `status.caRotation` at `generated`, which
/// this answers. [`TenancyError::NotFound`] for no such tenant,
/// [`TenancyError::Conflict`] for one being deleted or a rotation under way.
pub async fn request_rotation(
    tenancy: &Tenancy,
    rotations: &dyn CaRotations,
    name: &str,
    authorities: &[Authority],
    now: DateTime<Utc>,
) -> Result<CaRotationStatus, TenancyError> {
    let tenant = tenancy.tenant(name)?;
    if tenant.metadata.deletion_timestamp.is_some() {
        return Err(TenancyError::Conflict(format!(
            "tenant {name:?} is being deleted: its CAs are not rotated"
        )));
    }
    let rotation = rotations.begin(name, authorities).await?;
    // Begun: the reconciler finds it in the bundle at its next pass even
    // when this wake-up does not go through.
    if let Err(err) = wake(tenancy, name, now).await {
        tracing::warn!(tenant = name, %err, "the CA rotation is begun; the reconciler takes it up at its next pass");
    }
    let status = CaRotationStatus {
        authorities: rotation
            .authorities
            .iter()
            .map(|authority| authority_name(*authority).to_string())
            .collect(),
        phase: phase_name(Some(RotationPhase::Generated)).to_string(),
        since: now,
        message: None,
    };
    let written = status.clone();
    // The reconciler, woken, may have recorded a later phase already.
    let recorded = update_tenant_status(tenancy.store().as_ref(), name, move |current| {
        let later = current.ca_rotation.as_ref().is_some_and(|recorded| recorded.phase != "done");
        if !later {
            current.ca_rotation = Some(written.clone());
        }
    })
    .await;
    if let Err(err) = recorded {
        tracing::warn!(tenant = name, %err, "the CA rotation is begun; its status is written at the next pass");
    }
    Ok(status)
}

/// Sets the tenant's [`CA_ROTATION_ANNOTATION`] to `now`, its other
/// annotations, labels and spec kept; tried again while the tenant changes.
async fn wake(tenancy: &Tenancy, name: &str, now: DateTime<Utc>) -> Result<(), TenancyError> {
    let key = Key::tenant(name);
    let asked = now.to_rfc3339_opts(SecondsFormat::Secs, true);
    for _ in 0..ATTEMPTS {
        let object = tenancy.find(&key)?;
        let raw: serde_json::Value =
            serde_json::from_slice(&object.json).map_err(TenancyError::corrupt(&key))?;
        let mut draft = Draft::tenant_as_stored(&raw);
        draft.annotations.insert(CA_ROTATION_ANNOTATION.to_string(), asked.clone());
        match tenancy.store().update(key.clone(), draft, object.resource_version).await {
            Ok(_) => return Ok(()),
            Err(StoreError::Conflict { .. }) => continue,
            Err(err) => return Err(err.into()),
        }
    }
    Err(TenancyError::Conflict(format!("tenant {name:?} kept changing; try again")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| name.to_string()).collect()
    }

    #[test]
    fn authorities_are_os_or_kubernetes_once_each() {
        assert_eq!(authorities_named(&names(&["os"])).unwrap(), [Authority::Os]);
        assert_eq!(
            authorities_named(&names(&["kubernetes", "os"])).unwrap(),
            [Authority::Os, Authority::Kubernetes]
        );
        assert_eq!(authorities_named(&[]).unwrap_err().field, "authorities");
        let twice = authorities_named(&names(&["os", "os"])).unwrap_err();
        assert_eq!(twice.field, "authorities[1]");
        let unknown = authorities_named(&names(&["os", "etcd"])).unwrap_err();
        assert_eq!(unknown.field, "authorities[1]");
        assert!(unknown.message.contains("etcd"), "{}", unknown.message);
        let long = "x".repeat(10_000);
        assert!(authorities_named(&[long]).unwrap_err().message.len() < 100, "a hostile name is clipped");
    }
}

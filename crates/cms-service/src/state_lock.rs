//! `DELETE /api/v1/tenants/{name}/state-lock[?force=true]`: an
//! administrator's release of a tenant's tool state lock.
//!
//! The replica answering may not be the one reconciling the tenant, and
//! only that one may touch the tool's state: the release is a request
//! recorded on the tenant (its `service.io/release-state-lock` annotation),
//! which the reconciling replica carries out as it next takes the tenant
//! up, a few seconds later, with an audit record of its own. 404 when the
//! tenant's status shows no lock; 409 when its holder is alive (it holds
//! the tenant's lease; on SQLite, it is this server), `force` or not: that
//! replica is mid-run, its own take-up never releases its own lock, and
//! its run must end first (by itself, or at `CMS_TOFU_TIMEOUT`); else 202
//! with the lock to be released, `force` recorded with the request.

use std::sync::Arc;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use cms_model::{RELEASE_STATE_LOCK_ANNOTATION, StateLock, Tenant};
use cms_store::{Draft, Key, StateLocks, StoreError};
use serde::Serialize;

use crate::error::ApiError;
use crate::query::boolean;
use crate::reply;
use crate::state::AppState;

/// What a release request answers.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StateLockRelease {
    /// The lock to be released, as the tenant's status showed it.
    lock: StateLock,
    /// Whether the request was made with `force=true` (recorded with it;
    /// a holder that is alive is never overridden).
    force: bool,
}

fn locks(state: &AppState) -> Result<&Arc<dyn StateLocks>, ApiError> {
    state.state_locks.as_ref().ok_or_else(|| ApiError::Unavailable("provisioning is not configured".into()))
}

/// Whether the query asks to force: `force=true`, `force=1` or `force`;
/// anything else but `false` or `0` is refused.
fn force(req: &HttpRequest) -> Result<bool, ApiError> {
    let mut force = false;
    for pair in req.query_string().split('&').filter(|pair| !pair.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        match (name, value) {
            ("force", _) => force = boolean(pair, "force", Some(value))?,
            _ => return Err(ApiError::BadRequest("unknown query parameter: only force is taken".into())),
        }
    }
    Ok(force)
}

/// `DELETE /tenants/{name}/state-lock`.
pub(crate) async fn release(
    req: HttpRequest,
    state: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let force = force(&req)?;
    let locks = locks(&state)?;
    let key = Key::tenant(name.as_str());
    let not_found = || ApiError::NotFound(format!("tenant {name:?} holds no tool state lock"));
    for _ in 0..10 {
        let object = state
            .store()
            .get(&key)
            .ok_or_else(|| ApiError::NotFound(format!("tenant {name:?} not found")))?;
        let tenant: Tenant =
            object.parse().map_err(|err| ApiError::Internal(format!("tenant {name:?}: {err}")))?;
        let lock = tenant.status.state_lock.clone().ok_or_else(not_found)?;
        let alive = locks.holds_lease(format!("tenant/{name}"), lock.holder.clone()).await?;
        if alive {
            return Err(ApiError::Conflict(format!(
                "the tool state lock of tenant {name:?} is held by {}, which is alive and running the tool \
                 (it holds the tenant): its run must end first (by itself, or at the tool's timeout), \
                 even with force=true",
                lock.holder
            )));
        }
        let raw: serde_json::Value = serde_json::from_slice(&object.json)
            .map_err(|err| ApiError::Internal(format!("tenant {name:?}: {err}")))?;
        let mut draft = Draft::tenant_as_stored(&raw);
        let asked = if force { "force" } else { "stale" };
        draft.annotations.insert(RELEASE_STATE_LOCK_ANNOTATION.to_string(), asked.to_string());
        match state.store().update(key.clone(), draft, object.resource_version).await {
            Ok(_) => {
                tracing::info!(tenant = %name, holder = %lock.holder, force, "asked to release the tool state lock");
                return reply::serialized(StatusCode::ACCEPTED, &StateLockRelease { lock, force });
            }
            Err(StoreError::Conflict { .. }) => continue,
            Err(err) => return Err(err.into()),
        }
    }
    Err(ApiError::Conflict(format!("tenant {name:?} kept changing; try again")))
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::*;

    #[test]
    fn force_is_the_only_query_parameter() {
        let parse =
            |query: &str| force(&TestRequest::default().uri(&format!("/x?{query}")).to_http_request());
        assert!(parse("force=true").unwrap());
        assert!(parse("force").unwrap());
        assert!(!parse("").unwrap());
        assert!(!parse("force=false").unwrap());
        assert!(parse("force=yes").is_err());
        assert!(parse("force=").is_err(), "an empty value is not the bare flag");
        assert!(parse("other=1").is_err());
    }
}

//! Reads that answer 404 in the API's words: a missing object, or the
//! missing tenant it would belong to.

use std::sync::Arc;

use cms_store::{Key, Object, Store};

use crate::error::ApiError;

/// The object at `key`, or a 404 that names the tenant when that is what is missing.
pub(crate) fn find(store: &dyn Store, key: &Key) -> Result<Arc<Object>, ApiError> {
    if let Some(object) = store.get(key) {
        return Ok(object);
    }
    let owner = key.owner();
    if owner != *key && store.get(&owner).is_none() {
        return Err(missing(&owner));
    }
    Err(missing(key))
}

/// Checks that a tenant exists before listing what it holds.
pub(crate) fn require_tenant(store: &dyn Store, tenant: &str) -> Result<(), ApiError> {
    find(store, &Key::tenant(tenant)).map(|_| ())
}

fn missing(key: &Key) -> ApiError {
    ApiError::NotFound(format!("{key} not found"))
}

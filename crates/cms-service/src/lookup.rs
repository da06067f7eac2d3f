//! Reads that answer 404 in the API's words: a missing object, or the
//! missing tenant it would belong to (`cms_tenancy::find`).

use std::sync::Arc;

use cms_store::{Key, Object, Store};

use crate::error::ApiError;

/// The object at `key`, or a 404 that names the tenant when that is what is missing.
pub(crate) fn find(store: &dyn Store, key: &Key) -> Result<Arc<Object>, ApiError> {
    Ok(cms_tenancy::find(store, key)?)
}

/// Checks that a tenant exists before listing what it holds.
pub(crate) fn require_tenant(store: &dyn Store, tenant: &str) -> Result<(), ApiError> {
    find(store, &Key::tenant(tenant)).map(|_| ())
}

//! What a caller whose global role does not read every tenant sees: the
//! tenants its grants give it (`cms_auth::Caller::role_on_tenant`). Lists
//! across tenants and the tenant watch are narrowed to them here; a route
//! of one tenant checks that tenant in `auth.rs`; writes that name a tenant
//! in their body check it in their handler ([`require_on_new`]).

use std::collections::HashSet;
use std::sync::Arc;

use cms_auth::{Caller, Permission};
use cms_model::{Kind, Page, UserRole};
use cms_store::{Listing, Object, Store};

use crate::error::ApiError;
use crate::watch::{Predicate, WatchFilter};

/// The tenants `caller` reads, by name; `None` when it reads them all.
pub(crate) fn tenant_names(store: &dyn Store, caller: &Caller) -> Option<HashSet<String>> {
    if caller.holds_everywhere(Permission::Read) {
        return None;
    }
    let tenants = store.all(Kind::Tenant, None);
    caller.tenants_holding(Permission::Read, tenants.iter().map(|tenant| tenant.as_ref()))
}

/// `filter`, narrowed to the tenants `caller` reads, judged on each tenant
/// as it is when the filter looks at it: a tenant whose labels stop matching
/// the caller's grants leaves a watch (`DELETED`), one that starts matching
/// joins it (`ADDED`). The grants are those the caller held when it asked.
pub(crate) fn narrow_tenants(filter: WatchFilter, caller: &Caller) -> WatchFilter {
    if caller.holds_everywhere(Permission::Read) {
        return filter;
    }
    let caller = caller.clone();
    let sees: Predicate = Arc::new(move |tenant: &Object| caller.holds_on(Permission::Read, tenant));
    filter.with_predicate(sees)
}

/// `filter`, narrowed to the objects that live in the tenants `caller`
/// reads (machines, for the list across tenants).
pub(crate) fn narrow_children(filter: WatchFilter, store: &dyn Store, caller: &Caller) -> WatchFilter {
    match tenant_names(store, caller) {
        None => filter,
        Some(names) => {
            let within: Predicate = Arc::new(move |object: &Object| names.contains(&object.key.tenant));
            filter.with_predicate(within)
        }
    }
}

/// A page of the objects of `kind` that pass `filter`, in the store's order,
/// with the total that pass.
pub(crate) fn filtered_page(store: &dyn Store, kind: Kind, filter: &WatchFilter, page: Page) -> Listing {
    let passing: Vec<Arc<Object>> =
        store.all(kind, None).into_iter().filter(|object| filter.matches(object)).collect();
    let total = passing.len() as u64;
    Listing { items: passing.into_iter().skip(page.offset).take(page.limit).collect(), total }
}

/// Fails unless `caller` may give a tenant named `name` and labelled
/// `labels` the change `permission` needs: for a create, the new tenant;
/// for a replacement, its new labels too, so that a grant's holder cannot
/// move a tenant out of what it may change. The refusal is 403 whether or
/// not such a tenant exists: it says nothing of other tenants.
pub(crate) fn require_on_new(
    caller: &Caller,
    permission: Permission,
    name: &str,
    labels: &cms_auth::Labels,
) -> Result<(), ApiError> {
    if caller.holds_everywhere(permission) {
        return Ok(());
    }
    match caller.role_on(name, labels) {
        Some(role) if permission.allows(role) => Ok(()),
        role => Err(refused_on_new(role, permission, name)),
    }
}

/// [`require_on_new`] for a create: also refused, with the same 403, when a
/// tenant of that name exists that the caller may not see, so that its 409
/// never tells a hidden tenant's name.
pub(crate) fn require_on_create(
    store: &dyn Store,
    caller: &Caller,
    name: &str,
    labels: &cms_auth::Labels,
) -> Result<(), ApiError> {
    require_on_new(caller, Permission::Write, name, labels)?;
    if caller.holds_everywhere(Permission::Read) {
        return Ok(());
    }
    match store.get(&cms_store::Key::tenant(name)) {
        Some(existing) if caller.role_on_tenant(&existing).is_none() => {
            Err(refused_on_new(caller.role_on(name, labels), Permission::Write, name))
        }
        _ => Ok(()),
    }
}

fn refused_on_new(role: Option<UserRole>, permission: Permission, name: &str) -> ApiError {
    ApiError::Forbidden(format!(
        "role {} may not {} on a tenant named {name:?} with these labels: no grant of the caller covers it",
        UserRole::global_name(role),
        permission.action()
    ))
}

/// `caller`'s role on tenant `name`, which the route's guard let it reach;
/// 404 as for a missing tenant when it has none there (or no such tenant).
pub(crate) fn role_on(store: &dyn Store, caller: &Caller, name: &str) -> Result<UserRole, ApiError> {
    let tenant = store.get(&cms_store::Key::tenant(name));
    let role = match (caller.role, tenant) {
        (Some(UserRole::Admin), _) => Some(UserRole::Admin),
        (_, Some(tenant)) => caller.role_on_tenant(&tenant),
        (role, None) => role,
    };
    role.ok_or_else(|| cms_auth::AuthError::TenantNotFound { tenant: name.to_string() }.into())
}

//! The route table: every route of the API with the access it needs, kept
//! as data in one place. Routes are registered from it, so a route cannot
//! exist without stating its permission, and tests walk it.

use actix_web::http::Method;
use actix_web::middleware::from_fn;
use actix_web::web;
use cms_auth::Permission::{
    Delete, DeleteTenant, DownloadAutoscalerIdentity, ManageUsers, OwnTokens, Read, ReadAudit,
    ReadClientConfig, ReadLogs, ReadMachineConfig, ReadSecrets, ReleaseStateLock, RestoreBackup, RotateCa,
    Write, WriteMachineStatus,
};

use crate::auth::{Access, guard};
use crate::children::{self, ConfigPatches, NodeGroups};
use crate::fallback::resource;
use crate::{
    audit_log, autoscaler_identity, backups, downloads, grants, health, login, machine_config, machine_logs,
    machines, metrics, openapi, ops, projected, rotate_ca, state_lock, support, tenants, tokens, users,
};

/// One route: its method, its path pattern (under [`crate::API_PREFIX`]
/// unless it starts at the root) and what it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteInfo {
    pub method: &'static str,
    pub path: &'static str,
    /// Whether the path is under the API prefix.
    pub api: bool,
    pub access: Access,
}

/// The route the router matched, as the table names it: kept in the
/// request by its guard, so that the metrics need not match the path again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Routed {
    /// Whether the path is under [`crate::API_PREFIX`].
    pub(crate) api: bool,
    pub(crate) path: &'static str,
}

impl Routed {
    /// The whole pattern, as `HttpRequest::match_pattern` gives it.
    pub(crate) fn pattern(self) -> String {
        match self.api {
            true => format!("{}{}", crate::API_PREFIX, self.path),
            false => self.path.to_string(),
        }
    }
}

macro_rules! table {
    ($( $scope:ident $path:literal { $( $method:ident => $handler:path, $access:expr; )* } )*) => {
        /// Every route the application serves.
        pub const ROUTES: &[RouteInfo] = &[
            $( $( RouteInfo {
                method: stringify!($method),
                path: $path,
                api: table!(@api $scope),
                access: $access,
            }, )* )*
        ];

        /// Registers the routes of one scope: the API's or the root's.
        fn register(cfg: &mut web::ServiceConfig, api: bool) {
            $( if table!(@api $scope) == api {
                cfg.service(resource($path, table!(@allow $($method)*))
                    $( .route(web::method(Method::$method).to($handler)
                        .wrap(from_fn(|req, next| {
                            guard($access, Routed { api: table!(@api $scope), path: $path }, req, next)
                        }))) )*);
            } )*
        }
    };
    (@allow $first:ident $($rest:ident)*) => { concat!(stringify!($first) $(, ", ", stringify!($rest))*) };
    (@api api) => { true };
    (@api root) => { false };
}

/// The pattern of the route that serves `path`, as the router would find
/// it (the root's routes, the API's, then the console's, each in order; a
/// parameter matches one non-empty segment), by comparing segments.
pub(crate) fn pattern_of(path: &str) -> Option<String> {
    let root = ROUTES.iter().filter(|route| !route.api).map(|route| route.path);
    if let Some(pattern) = root.clone().find(|pattern| same_shape(pattern, path)) {
        return Some(pattern.to_string());
    }
    if let Some(rest) = path.strip_prefix(crate::API_PREFIX) {
        let api = ROUTES.iter().filter(|route| route.api).map(|route| route.path);
        if let Some(pattern) = api.clone().find(|pattern| same_shape(pattern, rest)) {
            return Some(format!("{}{pattern}", crate::API_PREFIX));
        }
    }
    cms_console::PATHS.iter().find(|pattern| same_shape(pattern, path)).map(|pattern| pattern.to_string())
}

/// Whether `path` has the segments of `pattern`.
fn same_shape(pattern: &str, path: &str) -> bool {
    let (mut wanted, mut given) = (pattern.split('/'), path.split('/'));
    loop {
        match (wanted.next(), given.next()) {
            (None, None) => return true,
            (Some(want), Some(segment)) if want.starts_with('{') && !segment.is_empty() => {}
            (Some(want), Some(segment)) if want == segment => {}
            _ => return false,
        }
    }
}

const PUBLIC: Access = Access::Public;

const fn needs(permission: cms_auth::Permission) -> Access {
    Access::Requires(permission)
}

/// The permission on the tenant the path names.
const fn on_tenant(permission: cms_auth::Permission) -> Access {
    Access::OnTenant(permission)
}

/// The permission on some tenant; the handler narrows to those.
const fn on_tenants(permission: cms_auth::Permission) -> Access {
    Access::OnTenants(permission)
}

table! {
    root "/healthz" { GET => ops::healthz, PUBLIC; }
    root "/readyz" { GET => ops::readyz, PUBLIC; }
    root "/metrics" { GET => metrics::render, PUBLIC; }
    root "/version" { GET => ops::version, PUBLIC; }
    root "/openapi.json" { GET => openapi::serve_document, PUBLIC; }
    root "/docs" { GET => openapi::serve_page, PUBLIC; }
    api "/auth/login" { POST => login::login, PUBLIC; }
    api "/auth/sso/start" { POST => login::sso_start, PUBLIC; }
    api "/auth/sso/token" { POST => login::sso_token, PUBLIC; }
    api "/tenants" {
        GET => tenants::list, on_tenants(Read);
        POST => tenants::create, on_tenants(Write);
    }
    api "/tenants/{name}" {
        GET => tenants::get, on_tenant(Read);
        PUT => tenants::update, on_tenant(Write);
        DELETE => tenants::delete, on_tenant(DeleteTenant);
    }
    api "/tenants/{name}/kubeconfig" { GET => downloads::kubeconfig, on_tenant(ReadClientConfig); }
    api "/tenants/{name}/talosconfig" { GET => downloads::talosconfig, on_tenant(ReadClientConfig); }
    api "/tenants/{name}/secrets" { GET => downloads::secrets, on_tenant(ReadSecrets); }
    api "/tenants/{name}/autoscaler-identity" {
        GET => autoscaler_identity::download, on_tenant(DownloadAutoscalerIdentity);
    }
    api "/tenants/{name}/support" { GET => support::bundle, on_tenant(ReadLogs); }
    api "/tenants/{name}/health" { GET => health::tenant, on_tenant(Read); }
    api "/tenants/{name}/state-lock" { DELETE => state_lock::release, on_tenant(ReleaseStateLock); }
    api "/tenants/{name}/rotate-ca" { POST => rotate_ca::rotate, on_tenant(RotateCa); }
    api "/health" { GET => health::all, on_tenants(Read); }
    api "/tenants/{name}/backups" {
        GET => backups::list, on_tenant(Read);
        POST => backups::take, on_tenant(Write);
    }
    api "/tenants/{name}/backups/{id}" {
        GET => backups::get, on_tenant(Read);
        DELETE => backups::delete, on_tenant(RestoreBackup);
    }
    // The snapshot holds every Secret of the tenant's cluster.
    api "/tenants/{name}/backups/{id}/download" { GET => backups::download, on_tenant(ReadSecrets); }
    api "/tenants/{name}/backups/{id}/restore" { POST => backups::restore, on_tenant(RestoreBackup); }
    api "/tenants/{tenant}/node-groups" {
        GET => children::list::<NodeGroups>, on_tenant(Read);
        POST => children::create::<NodeGroups>, on_tenant(Write);
    }
    api "/tenants/{tenant}/node-groups/{name}" {
        GET => children::get::<NodeGroups>, on_tenant(Read);
        PUT => children::update::<NodeGroups>, on_tenant(Write);
        DELETE => children::delete::<NodeGroups>, on_tenant(Delete);
    }
    api "/tenants/{tenant}/configpatches" {
        GET => children::list::<ConfigPatches>, on_tenant(Read);
        POST => children::create::<ConfigPatches>, on_tenant(Write);
    }
    api "/tenants/{tenant}/configpatches/{name}" {
        GET => children::get::<ConfigPatches>, on_tenant(Read);
        PUT => children::update::<ConfigPatches>, on_tenant(Write);
        DELETE => children::delete::<ConfigPatches>, on_tenant(Delete);
    }
    api "/machines" { GET => machines::list_all, on_tenants(Read); }
    api "/tenants/{tenant}/machines" { GET => machines::list, on_tenant(Read); }
    api "/tenants/{tenant}/machines/{id}" {
        GET => machines::get, on_tenant(Read);
        DELETE => machines::delete, on_tenant(Delete);
    }
    api "/tenants/{tenant}/machines/{id}/config" { GET => machine_config::get, on_tenant(ReadMachineConfig); }
    api "/tenants/{tenant}/machines/{id}/logs" { GET => machine_logs::logs, on_tenant(ReadLogs); }
    api "/tenants/{tenant}/machines/{id}/dmesg" { GET => machine_logs::dmesg, on_tenant(ReadLogs); }
    api "/tenants/{tenant}/machines/{id}/status" { PUT => machines::update_status, on_tenant(WriteMachineStatus); }
    api "/projected" { GET => projected::list_all, on_tenants(Read); }
    api "/tenants/{tenant}/projected" { GET => projected::list, on_tenant(Read); }
    api "/tenants/{tenant}/projected/{kind}" { GET => projected::list_kind, on_tenant(Read); }
    api "/users" {
        GET => users::list, needs(ManageUsers);
        POST => users::create, needs(ManageUsers);
    }
    api "/users/{name}" {
        GET => users::get, needs(ManageUsers);
        PUT => users::update, needs(ManageUsers);
        DELETE => users::delete, needs(ManageUsers);
    }
    api "/users/{name}/tokens" {
        GET => tokens::list, needs(OwnTokens);
        POST => tokens::create, needs(OwnTokens);
    }
    api "/users/{name}/tokens/{tokenName}" { DELETE => tokens::revoke, needs(OwnTokens); }
    api "/grants" {
        GET => grants::list, needs(ManageUsers);
        POST => grants::create, needs(ManageUsers);
    }
    api "/grants/{name}" {
        GET => grants::get, needs(ManageUsers);
        PUT => grants::update, needs(ManageUsers);
        DELETE => grants::delete, needs(ManageUsers);
    }
    api "/audit" { GET => audit_log::list, needs(ReadAudit); }
}

/// Registers the routes at the root: the operational endpoints.
pub(crate) fn root(cfg: &mut web::ServiceConfig) {
    register(cfg, false);
}

/// Registers the routes under the API prefix.
pub(crate) fn api(cfg: &mut web::ServiceConfig) {
    register(cfg, true);
}

#[cfg(test)]
mod tests {
    use actix_web::dev::ResourceDef;

    use super::*;

    /// Every pattern the router knows, whole, in the router's order.
    fn patterns() -> Vec<String> {
        let root = ROUTES.iter().filter(|route| !route.api).map(|route| route.path.to_string());
        let api = ROUTES
            .iter()
            .filter(|route| route.api)
            .map(|route| format!("{}{}", crate::API_PREFIX, route.path));
        root.chain(api).chain(cms_console::PATHS.iter().map(|path| path.to_string())).collect()
    }

    #[test]
    fn the_pattern_of_a_path_is_the_one_the_router_matches() {
        let patterns = patterns();
        let mut paths: Vec<String> = patterns
            .iter()
            .map(|pattern| {
                pattern
                    .split('/')
                    .map(|segment| if segment.starts_with('{') { "x-1" } else { segment })
                    .collect::<Vec<_>>()
                    .join("/")
            })
            .collect();
        paths.extend(
            ["/nowhere", "/api/v1/tenants/a/b/c/d/e", "/api/v1/tenants//configpatches", "/api/v1"]
                .map(String::from),
        );
        for path in paths {
            let router = patterns.iter().find(|pattern| ResourceDef::new(pattern.as_str()).is_match(&path));
            assert_eq!(pattern_of(&path).as_ref(), router, "{path}");
        }
    }
}

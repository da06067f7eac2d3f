//! The console's paths and the dispatch of a request to its page or action.
//! [`PATHS`] is what the mounting server registers; [`Route::parse`] reads
//! the same shapes back, and a test holds the two together.

use http::{Method, StatusCode};

use crate::failure::Failure;
use crate::reply::Outcome;
use crate::{Console, Request, Response};
use crate::{actions, assets, create, downloads, events, login, tenant, tenants};
use crate::{audit, autoscaler, grants, machines, probe, tokens, upgrade, users};
use crate::{backups, editor, logs, machine, patches, rotate_ca, sso};

/// Every path the console serves, as route patterns in the mounting
/// server's syntax, in the order to register them (`/tenants/new` before
/// `/tenants/{name}`). None is under `/api/v1`, and none shadows the
/// server's own root paths (`/healthz`, `/readyz`, `/metrics`, `/version`,
/// `/openapi.json`, `/docs`).
pub const PATHS: [&str; 43] = [
    "/",
    "/login",
    "/logout",
    "/sso/login",
    "/sso/callback",
    "/events",
    "/tenants",
    "/tenants/new",
    "/tenants/new/yaml",
    "/tenants/{name}",
    "/tenants/{name}/kubeconfig",
    "/tenants/{name}/talosconfig",
    "/tenants/{name}/autoscaler-identity",
    "/tenants/{name}/delete",
    "/tenants/{name}/rotate-ca",
    "/tenants/{name}/node-groups/{group}/scale",
    "/tenants/{name}/edit",
    "/tenants/{name}/configpatches/new",
    "/tenants/{name}/configpatches/{patch}/edit",
    "/tenants/{name}/configpatches/{patch}/enable",
    "/tenants/{name}/configpatches/{patch}/delete",
    "/tenants/{name}/resume",
    "/tenants/{name}/probe",
    "/tenants/{name}/machines/{id}",
    "/tenants/{name}/machines/{id}/logs",
    "/tenants/{name}/machines/{id}/replace",
    "/tenants/{name}/backups",
    "/tenants/{name}/backups/new",
    "/tenants/{name}/backups/{id}/download",
    "/tenants/{name}/backups/{id}/restore",
    "/tenants/{name}/backups/{id}/delete",
    "/assets/{file}",
    "/audit",
    "/users",
    "/users/new",
    "/users/{name}/role",
    "/users/{name}/delete",
    "/tokens",
    "/tokens/new",
    "/tokens/{name}/revoke",
    "/grants",
    "/grants/new",
    "/grants/{name}/delete",
];

/// A console path with its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route<'a> {
    Tenants,
    Login,
    Logout,
    SsoLogin,
    SsoCallback,
    Events,
    NewTenant,
    Tenant(&'a str),
    Kubeconfig(&'a str),
    Talosconfig(&'a str),
    AutoscalerIdentity(&'a str),
    Delete(&'a str),
    RotateCa(&'a str),
    Scale(&'a str, &'a str),
    NewTenantYaml,
    EditTenant(&'a str),
    NewPatch(&'a str),
    EditPatch(&'a str, &'a str),
    EnablePatch(&'a str, &'a str),
    DeletePatch(&'a str, &'a str),
    Resume(&'a str),
    Probe(&'a str),
    ReplaceMachine(&'a str, &'a str),
    Machine(&'a str, &'a str),
    MachineLogs(&'a str, &'a str),
    Backups(&'a str),
    TakeBackup(&'a str),
    DownloadBackup(&'a str, &'a str),
    RestoreBackup(&'a str, &'a str),
    DeleteBackup(&'a str, &'a str),
    Asset(&'a str),
    Audit,
    Users,
    NewUser,
    UserRole(&'a str),
    DeleteUser(&'a str),
    Tokens,
    NewToken,
    RevokeToken(&'a str),
    Grants,
    NewGrant,
    DeleteGrant(&'a str),
}

impl<'a> Route<'a> {
    /// The route of `path`, or `None` when the console serves no such path.
    pub(crate) fn parse(path: &'a str) -> Option<Route<'a>> {
        let segments: Vec<&str> = path.strip_prefix('/')?.split('/').collect();
        let route = match segments.as_slice() {
            [""] | ["tenants"] => Route::Tenants,
            ["login"] => Route::Login,
            ["logout"] => Route::Logout,
            ["sso", "login"] => Route::SsoLogin,
            ["sso", "callback"] => Route::SsoCallback,
            ["events"] => Route::Events,
            ["tenants", "new"] => Route::NewTenant,
            ["tenants", "new", "yaml"] => Route::NewTenantYaml,
            ["tenants", name] => Route::Tenant(name),
            ["tenants", name, "kubeconfig"] => Route::Kubeconfig(name),
            ["tenants", name, "talosconfig"] => Route::Talosconfig(name),
            ["tenants", name, "autoscaler-identity"] => Route::AutoscalerIdentity(name),
            ["tenants", name, "delete"] => Route::Delete(name),
            ["tenants", name, "rotate-ca"] => Route::RotateCa(name),
            ["tenants", name, "edit"] => Route::EditTenant(name),
            ["tenants", name, "configpatches", "new"] => Route::NewPatch(name),
            ["tenants", name, "configpatches", patch, action] if !patch.is_empty() => match *action {
                "edit" => Route::EditPatch(name, patch),
                "enable" => Route::EnablePatch(name, patch),
                "delete" => Route::DeletePatch(name, patch),
                _ => return None,
            },
            ["tenants", name, "node-groups", group, "scale"] if !group.is_empty() => {
                Route::Scale(name, group)
            }
            ["tenants", name, "resume"] => Route::Resume(name),
            ["tenants", name, "probe"] => Route::Probe(name),
            ["tenants", name, "machines", id, "replace"] if !id.is_empty() => Route::ReplaceMachine(name, id),
            ["tenants", name, "machines", id] if !id.is_empty() => Route::Machine(name, id),
            ["tenants", name, "machines", id, "logs"] if !id.is_empty() => Route::MachineLogs(name, id),
            ["tenants", name, "backups"] => Route::Backups(name),
            ["tenants", name, "backups", "new"] => Route::TakeBackup(name),
            ["tenants", name, "backups", id, action] if !id.is_empty() => match *action {
                "download" => Route::DownloadBackup(name, id),
                "restore" => Route::RestoreBackup(name, id),
                "delete" => Route::DeleteBackup(name, id),
                _ => return None,
            },
            ["assets", file] => Route::Asset(file),
            ["audit"] => Route::Audit,
            ["users"] => Route::Users,
            ["users", "new"] => Route::NewUser,
            ["users", name, "role"] => Route::UserRole(name),
            ["users", name, "delete"] => Route::DeleteUser(name),
            ["tokens"] => Route::Tokens,
            ["tokens", "new"] => Route::NewToken,
            ["tokens", name, "revoke"] => Route::RevokeToken(name),
            ["grants"] => Route::Grants,
            ["grants", "new"] => Route::NewGrant,
            ["grants", name, "delete"] => Route::DeleteGrant(name),
            _ => return None,
        };
        let named = match route {
            Route::Tenant(name)
            | Route::Kubeconfig(name)
            | Route::Talosconfig(name)
            | Route::AutoscalerIdentity(name)
            | Route::Delete(name)
            | Route::RotateCa(name)
            | Route::Scale(name, _)
            | Route::EditTenant(name)
            | Route::NewPatch(name)
            | Route::EditPatch(name, _)
            | Route::EnablePatch(name, _)
            | Route::DeletePatch(name, _)
            | Route::Resume(name)
            | Route::Probe(name)
            | Route::ReplaceMachine(name, _)
            | Route::Machine(name, _)
            | Route::MachineLogs(name, _)
            | Route::Backups(name)
            | Route::TakeBackup(name)
            | Route::DownloadBackup(name, _)
            | Route::RestoreBackup(name, _)
            | Route::DeleteBackup(name, _)
            | Route::Asset(name)
            | Route::UserRole(name)
            | Route::DeleteUser(name)
            | Route::RevokeToken(name)
            | Route::DeleteGrant(name) => !name.is_empty(),
            _ => true,
        };
        named.then_some(route)
    }

    /// The methods the route serves, for `Allow`.
    fn allow(self) -> &'static str {
        match self {
            Route::Login | Route::NewTenant => "GET, POST",
            Route::NewTenantYaml | Route::EditTenant(_) => "GET, POST",
            Route::NewPatch(_) | Route::EditPatch(..) | Route::EnablePatch(..) | Route::DeletePatch(..) => {
                "POST"
            }
            Route::Logout | Route::Delete(_) | Route::RotateCa(_) | Route::Scale(..) => "POST",
            Route::Resume(_) | Route::Probe(_) | Route::ReplaceMachine(..) => "POST",
            Route::TakeBackup(_) | Route::RestoreBackup(..) | Route::DeleteBackup(..) => "POST",
            Route::NewUser | Route::UserRole(_) | Route::DeleteUser(_) => "POST",
            Route::NewToken | Route::RevokeToken(_) => "POST",
            Route::NewGrant | Route::DeleteGrant(_) => "POST",
            _ => "GET",
        }
    }
}

/// Runs the page or action that serves the request.
pub(crate) async fn dispatch(console: &Console, request: &Request) -> Response {
    let Some(route) = Route::parse(request.uri().path()) else {
        return Failure::new(StatusCode::NOT_FOUND, "There is no page here.").page(None);
    };
    let outcome: Outcome = match (route, request.method()) {
        (Route::Asset(file), &Method::GET) => assets::serve(file),
        (Route::Login, &Method::GET) => login::page(console, request).await,
        (Route::Login, &Method::POST) => login::submit(console, request).await,
        (Route::Logout, &Method::POST) => login::logout(console, request).await,
        (Route::SsoLogin, &Method::GET) => sso::begin(console, request).await,
        (Route::SsoCallback, &Method::GET) => sso::finish(console, request).await,
        (Route::Tenants, &Method::GET) => tenants::page(console, request).await,
        (Route::Events, &Method::GET) => events::stream(console, request).await,
        (Route::NewTenant, &Method::GET) => create::form(console, request).await,
        (Route::NewTenant, &Method::POST) => create::submit(console, request).await,
        (Route::Tenant(name), &Method::GET) => tenant::page(console, request, name).await,
        (Route::Kubeconfig(name), &Method::GET) => downloads::kubeconfig(console, request, name).await,
        (Route::Talosconfig(name), &Method::GET) => downloads::talosconfig(console, request, name).await,
        (Route::AutoscalerIdentity(name), &Method::GET) => autoscaler::identity(console, request, name).await,
        (Route::Delete(name), &Method::POST) => actions::delete(console, request, name).await,
        (Route::RotateCa(name), &Method::POST) => rotate_ca::rotate(console, request, name).await,
        (Route::Scale(name, group), &Method::POST) => actions::scale(console, request, name, group).await,
        (Route::NewTenantYaml, &Method::GET) => editor::create_form(console, request).await,
        (Route::NewTenantYaml, &Method::POST) => editor::create(console, request).await,
        (Route::EditTenant(name), &Method::GET) => editor::edit_form(console, request, name).await,
        (Route::EditTenant(name), &Method::POST) => editor::save(console, request, name).await,
        (Route::NewPatch(name), &Method::POST) => patches::create(console, request, name).await,
        (Route::EditPatch(name, patch), &Method::POST) => patches::edit(console, request, name, patch).await,
        (Route::EnablePatch(name, patch), &Method::POST) => {
            patches::enable(console, request, name, patch).await
        }
        (Route::DeletePatch(name, patch), &Method::POST) => {
            patches::delete(console, request, name, patch).await
        }
        (Route::Resume(name), &Method::POST) => upgrade::resume(console, request, name).await,
        (Route::Probe(name), &Method::POST) => probe::probe(console, request, name).await,
        (Route::ReplaceMachine(name, id), &Method::POST) => {
            machines::confirm_replacement(console, request, name, id).await
        }
        (Route::Machine(name, id), &Method::GET) => machine::page(console, request, name, id).await,
        (Route::MachineLogs(name, id), &Method::GET) => logs::stream(console, request, name, id).await,
        (Route::Backups(name), &Method::GET) => backups::page(console, request, name).await,
        (Route::TakeBackup(name), &Method::POST) => backups::take(console, request, name).await,
        (Route::DownloadBackup(name, id), &Method::GET) => {
            backups::download(console, request, name, id).await
        }
        (Route::RestoreBackup(name, id), &Method::POST) => backups::restore(console, request, name, id).await,
        (Route::DeleteBackup(name, id), &Method::POST) => backups::delete(console, request, name, id).await,
        (Route::Audit, &Method::GET) => audit::page(console, request).await,
        (Route::Users, &Method::GET) => users::page(console, request).await,
        (Route::NewUser, &Method::POST) => users::create(console, request).await,
        (Route::UserRole(name), &Method::POST) => users::change_role(console, request, name).await,
        (Route::DeleteUser(name), &Method::POST) => users::delete(console, request, name).await,
        (Route::Tokens, &Method::GET) => tokens::page(console, request).await,
        (Route::NewToken, &Method::POST) => tokens::create(console, request).await,
        (Route::RevokeToken(name), &Method::POST) => tokens::revoke(console, request, name).await,
        (Route::Grants, &Method::GET) => grants::page(console, request).await,
        (Route::NewGrant, &Method::POST) => grants::create(console, request).await,
        (Route::DeleteGrant(name), &Method::POST) => grants::delete(console, request, name).await,
        (route, method) => Err(method_not_allowed(method, route.allow()).into()),
    };
    outcome.unwrap_or_else(|refused| *refused)
}

fn method_not_allowed(method: &Method, allow: &'static str) -> Response {
    let message = format!("This page does not take {method} requests.");
    let mut response = Failure::new(StatusCode::METHOD_NOT_ALLOWED, message).page(None);
    response.headers_mut().insert(http::header::ALLOW, http::HeaderValue::from_static(allow));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_parses_with_its_parameters_filled_in() {
        for pattern in PATHS {
            let path = pattern
                .replace("{name}", "demo")
                .replace("{group}", "cp")
                .replace("{file}", "x.js")
                .replace("{patch}", "p")
                .replace("{id}", "m-1");
            assert!(Route::parse(&path).is_some(), "{pattern}");
        }
        assert_eq!(Route::parse("/tenants/new"), Some(Route::NewTenant));
        assert_eq!(Route::parse("/tenants/demo"), Some(Route::Tenant("demo")));
        assert_eq!(Route::parse("/tenants/demo/node-groups/cp/scale"), Some(Route::Scale("demo", "cp")));
        assert_eq!(Route::parse("/tenants/new/yaml"), Some(Route::NewTenantYaml));
        assert_eq!(Route::parse("/tenants/demo/edit"), Some(Route::EditTenant("demo")));
        assert_eq!(Route::parse("/tenants/demo/configpatches/new"), Some(Route::NewPatch("demo")));
        assert_eq!(
            Route::parse("/tenants/demo/configpatches/p/enable"),
            Some(Route::EnablePatch("demo", "p"))
        );
        assert_eq!(Route::parse("/tenants/demo/configpatches/p/other"), None);
        assert_eq!(
            Route::parse("/tenants/demo/machines/m-1/replace"),
            Some(Route::ReplaceMachine("demo", "m-1"))
        );
        assert_eq!(Route::parse("/tenants/demo/machines//replace"), None);
        assert_eq!(Route::parse("/tenants/demo/machines/m-1"), Some(Route::Machine("demo", "m-1")));
        assert_eq!(Route::parse("/tenants/demo/machines/m-1/logs"), Some(Route::MachineLogs("demo", "m-1")));
        assert_eq!(Route::parse("/tenants/demo/machines/"), None);
        assert_eq!(Route::parse("/tenants/demo/backups"), Some(Route::Backups("demo")));
        assert_eq!(Route::parse("/tenants/demo/backups/new"), Some(Route::TakeBackup("demo")));
        assert_eq!(
            Route::parse("/tenants/demo/backups/b-1/restore"),
            Some(Route::RestoreBackup("demo", "b-1"))
        );
        assert_eq!(Route::parse("/tenants/demo/backups/b-1/other"), None);
        assert_eq!(Route::parse("/tenants/demo/backups//delete"), None);
        assert_eq!(Route::parse("/users/new"), Some(Route::NewUser));
        assert_eq!(Route::parse("/users/alice/role"), Some(Route::UserRole("alice")));
        assert_eq!(Route::parse("/tokens/ci/revoke"), Some(Route::RevokeToken("ci")));
    }

    #[test]
    fn other_paths_are_not_the_console_s() {
        for path in
            ["/api/v1/tenants", "/healthz", "/tenants/", "/tenants/a/b", "/assets/", "", "x", "/users//role"]
        {
            assert_eq!(Route::parse(path), None, "{path}");
        }
    }
}

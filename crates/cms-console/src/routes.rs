//! The console's paths and the dispatch of a request to its page or action.
//! [`PATHS`] is what the mounting server registers; [`Route::parse`] reads
//! the same shapes back, and a test holds the two together.

use http::{Method, StatusCode};

use crate::failure::Failure;
use crate::reply::Outcome;
use crate::{Console, Request, Response};
use crate::{actions, assets, create, downloads, events, login, tenant, tenants};

/// Every path the console serves, as route patterns in the mounting
/// server's syntax, in the order to register them (`/tenants/new` before
/// `/tenants/{name}`). None is under `/api/v1`, and none shadows the
/// server's own root paths (`/healthz`, `/readyz`, `/metrics`, `/version`,
/// `/openapi.json`, `/docs`).
pub const PATHS: [&str; 12] = [
    "/",
    "/login",
    "/logout",
    "/events",
    "/tenants",
    "/tenants/new",
    "/tenants/{name}",
    "/tenants/{name}/kubeconfig",
    "/tenants/{name}/talosconfig",
    "/tenants/{name}/delete",
    "/tenants/{name}/node-groups/{group}/scale",
    "/assets/{file}",
];

/// A console path with its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route<'a> {
    Tenants,
    Login,
    Logout,
    Events,
    NewTenant,
    Tenant(&'a str),
    Kubeconfig(&'a str),
    Talosconfig(&'a str),
    Delete(&'a str),
    Scale(&'a str, &'a str),
    Asset(&'a str),
}

impl<'a> Route<'a> {
    /// The route of `path`, or `None` when the console serves no such path.
    pub(crate) fn parse(path: &'a str) -> Option<Route<'a>> {
        let segments: Vec<&str> = path.strip_prefix('/')?.split('/').collect();
        let route = match segments.as_slice() {
            [""] | ["tenants"] => Route::Tenants,
            ["login"] => Route::Login,
            ["logout"] => Route::Logout,
            ["events"] => Route::Events,
            ["tenants", "new"] => Route::NewTenant,
            ["tenants", name] => Route::Tenant(name),
            ["tenants", name, "kubeconfig"] => Route::Kubeconfig(name),
            ["tenants", name, "talosconfig"] => Route::Talosconfig(name),
            ["tenants", name, "delete"] => Route::Delete(name),
            ["tenants", name, "node-groups", group, "scale"] if !group.is_empty() => {
                Route::Scale(name, group)
            }
            ["assets", file] => Route::Asset(file),
            _ => return None,
        };
        let named = match route {
            Route::Tenant(name)
            | Route::Kubeconfig(name)
            | Route::Talosconfig(name)
            | Route::Delete(name)
            | Route::Scale(name, _)
            | Route::Asset(name) => !name.is_empty(),
            _ => true,
        };
        named.then_some(route)
    }

    /// The methods the route serves, for `Allow`.
    fn allow(self) -> &'static str {
        match self {
            Route::Login | Route::NewTenant => "GET, POST",
            Route::Logout | Route::Delete(_) | Route::Scale(..) => "POST",
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
        (Route::Tenants, &Method::GET) => tenants::page(console, request).await,
        (Route::Events, &Method::GET) => events::stream(console, request).await,
        (Route::NewTenant, &Method::GET) => create::form(console, request).await,
        (Route::NewTenant, &Method::POST) => create::submit(console, request).await,
        (Route::Tenant(name), &Method::GET) => tenant::page(console, request, name).await,
        (Route::Kubeconfig(name), &Method::GET) => downloads::kubeconfig(console, request, name).await,
        (Route::Talosconfig(name), &Method::GET) => downloads::talosconfig(console, request, name).await,
        (Route::Delete(name), &Method::POST) => actions::delete(console, request, name).await,
        (Route::Scale(name, group), &Method::POST) => actions::scale(console, request, name, group).await,
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
            let path = pattern.replace("{name}", "demo").replace("{group}", "cp").replace("{file}", "x.js");
            assert!(Route::parse(&path).is_some(), "{pattern}");
        }
        assert_eq!(Route::parse("/tenants/new"), Some(Route::NewTenant));
        assert_eq!(Route::parse("/tenants/demo"), Some(Route::Tenant("demo")));
        assert_eq!(Route::parse("/tenants/demo/node-groups/cp/scale"), Some(Route::Scale("demo", "cp")));
    }

    #[test]
    fn other_paths_are_not_the_console_s() {
        for path in ["/api/v1/tenants", "/healthz", "/tenants/", "/tenants/a/b", "/assets/", "", "x"] {
            assert_eq!(Route::parse(path), None, "{path}");
        }
    }
}

//! The session: a login token in the `cms_session` cookie, authenticated
//! exactly as a bearer token (`Authenticator::authenticate`), so a session
//! ends when its token expires or its user is deleted. The cookie is
//! `HttpOnly` (page scripts never read it), `SameSite=Strict` (other sites'
//! pages never send it) and `Secure` when the console is set up for HTTPS.
//!
//! A page asked for without a valid session redirects to
//! `/login?next=<path and query>`; [`safe_next`] keeps `next` to paths on
//! this site.

use cms_auth::{AuthError, Caller, Permission};
use cms_model::UserRole;
use cms_store::Key;
use cms_tenancy::TenancyError;
use http::header::{self, HeaderMap};
use http::{Method, StatusCode};

use crate::failure::Failure;
use crate::form::Form;
use crate::reply::{self, Outcome, Refused};
use crate::{Console, Request, Response, csrf};

/// The session cookie's name.
pub const COOKIE: &str = "cms_session";

/// Someone signed in, with the token that proves it.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    pub(crate) caller: Caller,
    token: String,
    /// On a page or form of one tenant, the caller's role there: its global
    /// role joined with its grants on that tenant.
    tenant_role: Option<UserRole>,
}

impl Session {
    /// The form token of this session (`csrf.rs`).
    pub(crate) fn csrf(&self) -> String {
        csrf::token_for(&self.token)
    }

    /// Whether the caller's role holds `permission`, to show or hide a
    /// control: on a tenant's page its role on that tenant, elsewhere its
    /// global role.
    pub(crate) fn may(&self, permission: Permission) -> bool {
        match self.tenant_role {
            Some(role) => permission.allows(role),
            None => self.caller.holds_everywhere(permission),
        }
    }

    /// Whether the caller holds `permission` on some tenant, by its global
    /// role or a grant: the tenants list and create pages.
    pub(crate) fn may_somewhere(&self, permission: Permission) -> bool {
        self.caller.holds_somewhere(permission)
    }

    /// Fails with the permission table's answer, as a page, unless the
    /// caller's role holds `permission` (as [`Session::may`] judges it).
    pub(crate) fn require(&self, permission: Permission) -> Result<(), Refused> {
        let refused = match self.tenant_role {
            Some(role) if permission.allows(role) => return Ok(()),
            Some(role) => AuthError::Forbidden { role: role.as_str(), action: permission.action() },
            None => match self.caller.require(permission) {
                Ok(()) => return Ok(()),
                Err(err) => err,
            },
        };
        Err(Failure::from(refused).page(Some(self)).into())
    }

    /// Fails as [`Session::require`] unless the caller holds `permission`
    /// on some tenant ([`Session::may_somewhere`]).
    pub(crate) fn require_somewhere(&self, permission: Permission) -> Result<(), Refused> {
        self.caller.require_somewhere(permission).map_err(|err| Failure::from(err).page(Some(self)).into())
    }

    /// Whether the caller holds `permission` on a tenant named `name` and
    /// labelled `labels`, as it would be after a create or an edit: a grant's
    /// holder may not create a tenant its grants do not cover, nor move one
    /// out of them. `None` when it may; else why not, for the form.
    pub(crate) fn refusal_on(
        &self,
        permission: Permission,
        name: &str,
        labels: &cms_auth::Labels,
    ) -> Option<String> {
        if self.caller.holds_everywhere(permission) {
            return None;
        }
        match self.caller.role_on(name, labels) {
            Some(role) if permission.allows(role) => None,
            _ => Some(uncovered(permission, name)),
        }
    }

    /// [`Session::refusal_on`] for a create: also refused, in the same
    /// words, when a tenant of that name exists that the caller may not see,
    /// so that the form's conflict never tells a hidden tenant's name.
    pub(crate) fn refusal_on_create(
        &self,
        store: &dyn cms_store::Store,
        name: &str,
        labels: &cms_auth::Labels,
    ) -> Option<String> {
        let refusal = self.refusal_on(Permission::Write, name, labels);
        if refusal.is_some() || self.caller.holds_everywhere(Permission::Read) {
            return refusal;
        }
        let existing = store.get(&cms_store::Key::tenant(name))?;
        self.caller.role_on_tenant(&existing).is_none().then(|| uncovered(Permission::Write, name))
    }

    /// On a tenant's page, the caller's role on that tenant.
    pub(crate) fn tenant_role(&self) -> Result<UserRole, Refused> {
        self.tenant_role.ok_or_else(|| {
            Failure::new(http::StatusCode::INTERNAL_SERVER_ERROR, crate::failure::INTERNAL_MESSAGE)
                .page(Some(self))
                .into()
        })
    }

    /// The role shown beside the user's name: on a tenant's page its role
    /// there, elsewhere its global role (`none` for a caller whose access
    /// is its grants').
    pub(crate) fn role_shown(&self) -> &'static str {
        match self.tenant_role {
            Some(role) => role.as_str(),
            None => self.caller.role_name(),
        }
    }

    /// Names the caller in `response`'s extensions, for the audit record.
    pub(crate) fn mark(&self, mut response: Response) -> Response {
        response.extensions_mut().insert(self.caller.clone());
        response
    }

    /// Checks the session token again, for a stream that outlives a request.
    pub(crate) async fn still_valid(&self, console: &Console) -> bool {
        console.auth.authenticate(&self.token).await.is_ok()
    }
}

/// The session the request's cookie holds, when its token is valid.
pub(crate) async fn current(console: &Console, headers: &HeaderMap) -> Option<Session> {
    let token = cookie(headers)?;
    match console.auth.authenticate(&token).await {
        Ok(caller) => Some(Session { caller, token, tenant_role: None }),
        Err(err) => {
            tracing::debug!(error = %err, "console session refused");
            None
        }
    }
}

/// The session of a request for a page, or the redirect to the sign-in
/// page that comes back to it. On a page or form of one tenant
/// (`/tenants/{name}/...`), the session holds the caller's role there, and
/// a tenant the caller has no access to at all is the page of a tenant that
/// does not exist (404), with the same message.
pub(crate) async fn require(console: &Console, request: &Request) -> Result<Session, Refused> {
    let Some(mut session) = current(console, request.headers()).await else {
        return Err(to_login(request).into());
    };
    let Some(name) = tenant_of(request.uri().path()) else { return Ok(session) };
    let tenant = console.store().get(&Key::tenant(name));
    session.tenant_role = match (session.caller.role, tenant) {
        (Some(UserRole::Admin), _) => Some(UserRole::Admin),
        (_, Some(tenant)) => session.caller.role_on_tenant(&tenant),
        // A missing tenant: its page says so, to a caller who sees every tenant.
        (role, None) => role,
    };
    if session.tenant_role.is_none() {
        let missing = Failure::from(TenancyError::NotFound(Key::tenant(name).to_string()));
        return Err(missing.page(Some(&session)).into());
    }
    Ok(session)
}

/// The tenant a console path belongs to: `/tenants/{name}` and below, but
/// for the create pages under `/tenants/new`.
fn tenant_of(path: &str) -> Option<&str> {
    let mut segments = path.strip_prefix("/tenants/")?.split('/');
    segments.next().filter(|name| !name.is_empty() && *name != "new")
}

/// Why a grant's holder may not give a tenant named `name` the change
/// `permission` needs; the same words whether or not such a tenant exists.
fn uncovered(permission: Permission, name: &str) -> String {
    format!(
        "None of your grants lets you {} on a tenant named {name:?} with these labels.",
        permission.action()
    )
}

/// The session and the fields of a posted form, checked in order: the
/// session, the form token, then `permission`, which is the permission of
/// the API's route for the same change.
pub(crate) async fn posted(
    console: &Console,
    request: &Request,
    permission: Permission,
) -> Result<(Session, Form), Refused> {
    let session = require(console, request).await?;
    let form = Form::posted(request)?;
    csrf::check(&session, &form)?;
    session.require(permission)?;
    Ok((session, form))
}

/// As [`posted`], for a form that creates a tenant: `permission` is needed
/// on some tenant ([`Session::require_somewhere`]); the form then checks
/// that the caller holds it on the tenant it creates ([`Session::refusal_on`]).
pub(crate) async fn posted_somewhere(
    console: &Console,
    request: &Request,
    permission: Permission,
) -> Result<(Session, Form), Refused> {
    let session = require(console, request).await?;
    let form = Form::posted(request)?;
    csrf::check(&session, &form)?;
    session.require_somewhere(permission)?;
    Ok((session, form))
}

/// `303` to the sign-in page. A page asked for with GET is where the
/// operator lands after signing in; a form posted without a session lands
/// on the tenants page.
pub(crate) fn to_login(request: &Request) -> Response {
    let wanted = request.uri().path_and_query().map(|path| path.as_str()).unwrap_or("/");
    if request.method() != Method::GET || wanted == "/" {
        return reply::redirect("/login");
    }
    let next: String = form_urlencoded::byte_serialize(wanted.as_bytes()).collect();
    reply::redirect(&format!("/login?next={next}"))
}

/// The `cms_session` cookie of the request, when it has one.
fn cookie(headers: &HeaderMap) -> Option<String> {
    cookie_named(headers, COOKIE)
}

/// The cookie `name` of the request, when it has a non-empty one.
pub(crate) fn cookie_named(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(cookie, _)| *cookie == name)
        .map(|(_, value)| value.trim().to_string())
        .filter(|value| !value.is_empty())
}

/// The `Set-Cookie` value that starts a session with `token`.
pub(crate) fn set_cookie(console: &Console, token: &str) -> String {
    let secure = if console.options.secure_cookies { "; Secure" } else { "" };
    format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/{secure}")
}

/// The `Set-Cookie` value that ends the session.
pub(crate) fn clear_cookie(console: &Console) -> String {
    let secure = if console.options.secure_cookies { "; Secure" } else { "" };
    format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0{secure}")
}

/// `next` when it is a path on this site: it starts with one `/`, holds
/// printable ASCII only, and no `\` (which some browsers read as `/`, making
/// `/\evil.example` another site). Anything else lands on the tenants page.
pub(crate) fn safe_next(next: &str) -> &str {
    let on_this_site = next.starts_with('/')
        && !next.starts_with("//")
        && next.bytes().all(|byte| byte.is_ascii_graphic() && byte != b'\\');
    if on_this_site { next } else { "/" }
}

/// The answer to a request for the event stream without a valid session:
/// `401`, which stops the browser's reconnecting.
pub(crate) fn unauthorized() -> Outcome {
    Err(reply::text(StatusCode::UNAUTHORIZED, "session expired: sign in again").into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn next_stays_on_this_site() {
        for good in ["/", "/tenants/demo", "/?q=a&page=2"] {
            assert_eq!(safe_next(good), good);
        }
        for bad in ["", "https://evil.example/", "//evil.example", "/\\evil.example", "tenants", "/a b", "/é"]
        {
            assert_eq!(safe_next(bad), "/", "{bad:?}");
        }
    }

    #[test]
    fn tenant_pages_name_their_tenant() {
        assert_eq!(tenant_of("/tenants/demo"), Some("demo"));
        assert_eq!(tenant_of("/tenants/demo/node-groups/cp/scale"), Some("demo"));
        assert_eq!(tenant_of("/tenants/demo/backups/b-1/restore"), Some("demo"));
        for other in
            ["/", "/tenants", "/tenants/", "/tenants/new", "/tenants/new/yaml", "/users/demo", "/grants"]
        {
            assert_eq!(tenant_of(other), None, "{other}");
        }
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.append(header::COOKIE, HeaderValue::from_static("theme=dark"));
        headers.append(header::COOKIE, HeaderValue::from_static("a=b; cms_session=tok.en; c=d"));
        assert_eq!(cookie(&headers).as_deref(), Some("tok.en"));
        let mut empty = HeaderMap::new();
        empty.append(header::COOKIE, HeaderValue::from_static("cms_session="));
        assert_eq!(cookie(&empty), None);
    }
}

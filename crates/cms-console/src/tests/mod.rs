//! The console over a real store: SQLite in a temporary directory, an
//! authenticator with an admin and a viewer (and single sign-on, whose
//! sessions tests make directly), and the real `Tenancy`.
//! Requests go straight to [`Console::handle`]; `cms-service`'s tests cover
//! the same console mounted in the application.

mod accounts;
mod autoscaler;
mod backups;
mod editing;
mod events;
mod grants;
mod logs;
mod machines;
mod operations;
mod pages;
mod rotate_ca;
mod session;
mod tenants;

use std::sync::Arc;

use bytes::Bytes;
use cms_auth::sso::{RoleMap, SsoOptions};
use cms_auth::{AuthOptions, Authenticator, LoginTokens, SsoClaims};
use cms_model::{Kind, UserRole};
use cms_prober::{Prober, ProberOptions, SystemClock};
use cms_store::{Draft, Key, SqlStore, Store, StoreOptions};
use cms_talos::{Sealer, SealingKey};
use cms_tenancy::{SealedCredentials, Secrets, SecretsOptions, Tenancy};
use futures_util::StreamExt;
use http::header::{CONTENT_TYPE, COOKIE, LOCATION, SET_COOKIE};
use http::{HeaderMap, Method, StatusCode};
use secrecy::SecretString;
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio_util::sync::CancellationToken;

use crate::{Body, Console, ConsoleOptions, Response};

pub(crate) const ADMIN: &str = "admin";
pub(crate) const VIEWER: &str = "viewer";
/// The identity provider of the fixture's single sign-on.
pub(crate) const SSO_ISSUER: &str = "https://idp.test";
/// The key that signs the fixture's login tokens.
const SIGNING_KEY: &[u8; 32] = b"console-tests-signing-key-012345";

/// The console, its store and authenticator, and the database's directory.
pub(crate) struct Fixture {
    pub(crate) console: Console,
    pub(crate) store: Arc<SqlStore>,
    pub(crate) auth: Arc<Authenticator>,
    _dir: TempDir,
}

/// What a test sees of an answer.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: String,
}

impl Reply {
    pub(crate) fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|value| value.to_str().ok()).unwrap_or_default()
    }

    /// The session token the answer's cookie sets.
    pub(crate) fn session_cookie(&self) -> Option<String> {
        let cookie = self.headers.get(SET_COOKIE)?.to_str().ok()?;
        let (value, _) = cookie.strip_prefix("cms_session=")?.split_once(';')?;
        Some(value.to_string()).filter(|value| !value.is_empty())
    }

    /// The value of the first hidden `csrf` field of the page.
    pub(crate) fn csrf(&self) -> String {
        let start = self.body.find("name=\"csrf\" value=\"").map(|at| at + "name=\"csrf\" value=\"".len());
        start.and_then(|start| self.body[start..].split('"').next()).unwrap_or_default().to_string()
    }
}

/// The health prober on the real node API client, over the fixture's
/// store and secrets.
fn prober(store: Arc<SqlStore>, secrets: Arc<Secrets>) -> Arc<Prober> {
    let options = ProberOptions::default();
    let credentials = Arc::new(SealedCredentials::new(store.clone(), secrets));
    let client = cms_tenancy::talos_node_api(options.deadline);
    Arc::new(Prober::new(store, credentials, client, Arc::new(SystemClock), options))
}

impl Fixture {
    pub(crate) async fn new() -> Fixture {
        Fixture::with_options(ConsoleOptions::default()).await
    }

    pub(crate) async fn with_options(options: ConsoleOptions) -> Fixture {
        let store_options = |url: String| StoreOptions::new(url);
        Fixture::build(options, store_options, cms_tenancy::DEFAULT_MAX_GROUP_COUNT).await
    }

    /// A fixture whose node groups hold at most `max_group_count` machines
    /// each and whose tenants at most `max_machines_per_tenant`.
    pub(crate) async fn with_caps(max_group_count: u32, max_machines_per_tenant: u64) -> Fixture {
        let store_options = |url: String| StoreOptions { max_machines_per_tenant, ..StoreOptions::new(url) };
        Fixture::build(ConsoleOptions::default(), store_options, max_group_count).await
    }

    async fn build(
        options: ConsoleOptions,
        store_options: impl FnOnce(String) -> StoreOptions,
        max_group_count: u32,
    ) -> Fixture {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let url = format!("sqlite://{}/cms.db?mode=rwc", dir.path().display());
        let store = SqlStore::open(&store_options(url)).await.expect("the store opens");
        let auth_options = AuthOptions {
            signing_key: Some(SIGNING_KEY.to_vec().into()),
            sso: Some(sso()),
            ..AuthOptions::default()
        };
        let auth = Arc::new(Authenticator::new(store.clone(), auth_options).await.expect("an authenticator"));
        for (name, role) in [(ADMIN, UserRole::Admin), (VIEWER, UserRole::View)] {
            auth.create_user(name, role, &password(name)).await.expect("a user");
        }
        let sealer =
            Sealer::new(SealingKey::new("test", *b"sealing-key-of-the-console-tests").expect("a key"));
        let secrets = Secrets::new(sealer, SecretsOptions { key_pool: 0, ..SecretsOptions::default() });
        let secrets = secrets.expect("secrets");
        let prober = prober(store.clone(), secrets.clone());
        let tenancy = Tenancy::new(store.clone(), secrets).with_max_group_count(max_group_count);
        let console =
            Console::new(tenancy, auth.clone(), store.clone(), prober, options, CancellationToken::new());
        Fixture { console, store, auth, _dir: dir }
    }

    /// The session token of `user` signed in at [`SSO_ISSUER`] with
    /// `groups`, as the sign-in at the provider would make it.
    pub(crate) fn sso_session(&self, user: &str, groups: &[&str]) -> String {
        let tokens = LoginTokens::new(&SIGNING_KEY.to_vec().into(), std::time::Duration::from_secs(600));
        let claims = SsoClaims {
            iss: SSO_ISSUER.into(),
            sub: format!("subject-of-{user}"),
            groups: groups.iter().map(|group| group.to_string()).collect(),
        };
        tokens.expect("login tokens").issue_with(user, Some(claims)).expect("a login token").0
    }

    /// Signs `user` in with the form and returns the session cookie's token.
    pub(crate) async fn sign_in(&self, user: &str) -> String {
        let reply =
            self.post("/login", None, &[("username", user), ("password", &format!("{user}-password"))]).await;
        assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
        reply.session_cookie().expect("a session cookie")
    }

    /// The answer to `request`, its body read when it is whole.
    pub(crate) async fn send(&self, request: crate::Request) -> Reply {
        let response = self.console.handle(request).await;
        let (parts, body) = response.into_parts();
        let body = match body {
            Body::Full(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Body::Stream(_) | Body::Fallible(_) => String::new(),
        };
        Reply { status: parts.status, headers: parts.headers, body }
    }

    /// The whole answer, its stream unread.
    pub(crate) async fn open(&self, path: &str, session: &str) -> Response {
        self.console.handle(request(Method::GET, path, Some(session), Bytes::new())).await
    }

    pub(crate) async fn get(&self, path: &str, session: Option<&str>) -> Reply {
        self.send(request(Method::GET, path, session, Bytes::new())).await
    }

    pub(crate) async fn post(&self, path: &str, session: Option<&str>, fields: &[(&str, &str)]) -> Reply {
        let body: String = form_urlencoded::Serializer::new(String::new()).extend_pairs(fields).finish();
        self.send(request(Method::POST, path, session, Bytes::from(body))).await
    }

    /// Posts `fields` with the form token of `session`'s pages.
    pub(crate) async fn submit(&self, path: &str, session: &str, fields: &[(&str, &str)]) -> Reply {
        let token = crate::csrf::token_for(session);
        let mut fields = fields.to_vec();
        fields.push(("csrf", &token));
        self.post(path, Some(session), &fields).await
    }

    /// Writes tenant `name` straight to the store, without secrets.
    pub(crate) async fn tenant(&self, name: &str, labels: Value, phase: &str) {
        let labels = serde_json::from_value(labels).expect("labels");
        let draft = Draft {
            labels,
            spec: json!({"kubernetesVersion": "1.31.0", "podNetwork": ["10.244.0.0/16"], "nodeGroups": [{
                "name": "cp", "role": "controlplane", "count": 1, "providerClass": "metal:bare",
                "providerConfig": {"hosts": [{"address": "10.0.0.1"}, {"address": "10.0.0.2"}]}
            }]}),
            status: Some(json!({"phase": phase})),
            ..Draft::default()
        };
        self.store.create(Key::tenant(name), draft).await.expect("tenant created");
    }

    /// Writes machine `id` of `tenant`.
    pub(crate) async fn machine(&self, tenant: &str, id: &str, ready: bool) {
        let draft = Draft {
            spec: json!({"managementAddress": "10.0.0.1:50000", "nodeGroup": "cp"}),
            status: Some(json!({"stage": "ready", "ready": ready, "talosVersion": "1.11.0"})),
            ..Draft::default()
        };
        self.store.create(Key::child(Kind::Machine, tenant, id), draft).await.expect("machine created");
    }
}

/// Single sign-on at [`SSO_ISSUER`]: group `devs` grants edit, `platform`
/// admin. No test reaches the provider: sessions are made by
/// [`Fixture::sso_session`].
fn sso() -> SsoOptions {
    SsoOptions {
        issuer: SSO_ISSUER.into(),
        client_id: "cms".into(),
        client_secret: SecretString::from("client-secret"),
        scopes: Vec::new(),
        username_claim: "email".into(),
        groups_claim: "groups".into(),
        roles: RoleMap {
            groups: vec![("devs".into(), UserRole::Edit), ("platform".into(), UserRole::Admin)],
            default: None,
        },
    }
}

pub(crate) fn password(user: &str) -> SecretString {
    SecretString::from(format!("{user}-password"))
}

/// A request with the session cookie, when given, and a form body.
pub(crate) fn request(method: Method, path: &str, session: Option<&str>, body: Bytes) -> crate::Request {
    let mut request = http::Request::new(body);
    *request.method_mut() = method;
    *request.uri_mut() = path.parse().expect("a path");
    let headers = request.headers_mut();
    headers.insert(CONTENT_TYPE, http::HeaderValue::from_static("application/x-www-form-urlencoded"));
    if let Some(session) = session {
        let cookie = format!("theme=dark; cms_session={session}");
        headers.insert(COOKIE, http::HeaderValue::from_str(&cookie).expect("a cookie"));
    }
    request
}

/// The next chunk of a streamed answer, waiting at most five seconds.
pub(crate) async fn next_chunk(response: &mut Response) -> String {
    let Body::Stream(stream) = response.body_mut() else { panic!("the answer is not a stream") };
    let chunk = tokio::time::timeout(std::time::Duration::from_secs(5), stream.next()).await;
    let chunk = chunk.expect("a chunk within five seconds").expect("the stream goes on");
    String::from_utf8_lossy(&chunk).into_owned()
}

/// The `Location` of a redirect.
pub(crate) fn location(reply: &Reply) -> &str {
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    reply.header(LOCATION.as_str())
}

//! The real application over a real `SqlStore` on a temporary SQLite file.

mod accounts;
mod audit;
mod autoscaler;
mod backups;
mod console;
mod downloads;
mod errors;
mod grants;
mod health;
mod machine_config;
mod machine_logs;
mod machines;
mod matrix;
mod metrics;
mod projected;
mod rotate_ca;
mod state_lock;
mod support;
mod tenants;
mod user_data;

use std::sync::Arc;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{Service, ServiceResponse};
use actix_web::http::StatusCode;
use actix_web::test::{self, TestRequest};
use bytes::Bytes;
use cms_auth::{AuthOptions, Authenticator, bootstrap_admin};
use cms_backup::{Backups, DirStore};
use cms_model::UserRole;
use cms_prober::{Clock, Prober, ProberOptions, SystemClock};
use cms_service::{AppState, ServiceOptions, app};
use cms_store::{SqlStore, StoreOptions};
use cms_talos::{Sealer, SealingKey};
use cms_tenancy::{SealedCredentials, Secrets, SecretsOptions, Tenancy, TenantNodeClient};
use secrecy::SecretString;
use serde_json::Value;
use tempfile::TempDir;

/// The login signing key of the test application.
pub(crate) const SIGNING_KEY: &[u8; 32] = b"0123456789abcdef0123456789abcdef";
/// The key that seals tenant secrets in the test application; tests that
/// need a tenant's CA open its bundle with it.
pub(crate) const SEALING_KEY: [u8; 32] = *b"sealing-key-of-the-service-tests";

/// The identity provider of the test application's single sign-on.
pub(crate) const SSO_ISSUER: &str = "https://idp.test";
/// The trusted workload issuer of the test application, and the audience
/// its tokens must name.
pub(crate) const WORKLOAD_ISSUER: &str = "https://ci.test";
pub(crate) const WORKLOAD_AUDIENCE: &str = "https://cms.test";

/// The bootstrap admin's password.
pub(crate) const ADMIN_PASSWORD: &str = "admin-password";

/// A running application, its store and the directory that holds the database.
pub(crate) struct Harness<S> {
    pub(crate) service: S,
    pub(crate) store: Arc<SqlStore>,
    pub(crate) state: AppState,
    /// A login token of the bootstrap admin, sent with every request.
    pub(crate) token: String,
    /// The key the trusted workload issuer signs with.
    pub(crate) workload_key: cms_oidc::testing::TestKey,
    _dir: TempDir,
}

/// What a test sees of a response.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) headers: actix_web::http::header::HeaderMap,
    pub(crate) request_id: Option<String>,
    pub(crate) body: Bytes,
}

impl Reply {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// The body as text.
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// A header's value, or an empty string.
    pub(crate) fn header(&self, name: &str) -> String {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string()
    }

    /// A YAML body, parsed; checks that it is served as a YAML file download.
    pub(crate) fn yaml(&self, file_name: &str) -> Value {
        assert_eq!(self.status, StatusCode::OK, "{}", self.text());
        assert_eq!(self.header("content-type"), "application/yaml");
        assert_eq!(self.header("content-disposition"), format!("attachment; filename=\"{file_name}\""));
        assert_eq!(self.header("cache-control"), "no-store");
        serde_saphyr::from_str(&self.text()).expect("a YAML document")
    }

    /// Checks the error shape and returns the message.
    pub(crate) fn error(&self, status: u16, code: &str) -> String {
        let body = self.json();
        assert_eq!(self.status.as_u16(), status, "{body}");
        assert_eq!(body["code"], code, "{body}");
        assert_eq!(body["status"], status, "{body}");
        assert!(body["error"].is_string(), "{body}");
        body["error"].as_str().map(str::to_string).unwrap_or_default()
    }
}

pub(crate) async fn harness_with(
    options: ServiceOptions,
) -> Harness<impl Service<actix_http::Request, Response = ServiceResponse<BoxBody>, Error = actix_web::Error>>
{
    harness_keeping(options, StoreOptions::new(String::new()).audit_retention).await
}

/// The application with `options` over a store that keeps `audit_retention`
/// audit records.
pub(crate) async fn harness_keeping(
    options: ServiceOptions,
    audit_retention: u64,
) -> Harness<impl Service<actix_http::Request, Response = ServiceResponse<BoxBody>, Error = actix_web::Error>>
{
    let dir = tempfile::tempdir().expect("temporary directory");
    let url = format!("sqlite://{}/cms.db?mode=rwc", dir.path().display());
    let store_options = StoreOptions { audit_retention, ..StoreOptions::new(url) };
    let store = SqlStore::open(&store_options).await.expect("store opens");
    let workload_key = cms_oidc::testing::TestKey::generate("ci-1");
    let auth_options =
        AuthOptions { signing_key: Some(SIGNING_KEY.to_vec().into()), ..federated_options(&workload_key) };
    let auth = Arc::new(Authenticator::new(store.clone(), auth_options).await.expect("authenticator"));
    bootstrap_admin(&auth, Some(SecretString::from(ADMIN_PASSWORD))).await.expect("bootstrap");
    let (token, _) =
        auth.login("admin", &SecretString::from(ADMIN_PASSWORD), None).await.expect("admin login");
    let sealer = Sealer::new(SealingKey::new("test", SEALING_KEY).expect("a sealing key"));
    // Keys are made on demand: a pool's thread would compete with parallel tests.
    let secrets = Secrets::new(sealer, SecretsOptions { key_pool: 0, ..SecretsOptions::default() });
    let tenancy = Tenancy::new(store.clone(), secrets.expect("secrets"));
    let prober = prober(&tenancy, Arc::new(SystemClock), ProberOptions::default());
    let state = AppState::new(tenancy.clone(), auth, store.clone(), prober, options)
        .with_backups(backups(&tenancy, &dir))
        .with_nodes(Arc::new(quiet_nodes()))
        .with_state_locks(store.clone())
        .with_autoscaler(autoscaler::access())
        .with_rotations(Arc::new(cms_tenancy::SealedRotations::new(
            store.clone(),
            store.clone(),
            tenancy.secrets().clone(),
        )));
    let service = test::init_service(app(state.clone())).await;
    Harness { service, store, state, token, workload_key, _dir: dir }
}

/// Single sign-on at [`SSO_ISSUER`] (groups `viewers`, `devs` and
/// `platform` grant view, edit and admin) and the workload issuer
/// [`WORKLOAD_ISSUER`] (`repo:acme/*:ref:refs/heads/main` edits, other
/// `repo:acme/*:ref:refs/heads/*` subjects view), both served from memory.
fn federated_options(workload_key: &cms_oidc::testing::TestKey) -> AuthOptions {
    use cms_auth::sso::{RoleMap, SsoOptions, WorkloadTrust, parse_grants};
    use cms_oidc::testing::{FakeIssuer, FakeIssuers};
    let idp = FakeIssuer::new(SSO_ISSUER, vec![cms_oidc::testing::TestKey::generate("idp-1")]);
    let ci = FakeIssuer::new(WORKLOAD_ISSUER, vec![workload_key.clone()]);
    let sso = SsoOptions {
        issuer: SSO_ISSUER.into(),
        client_id: "cms".into(),
        client_secret: SecretString::from("client-secret"),
        scopes: vec!["email".into()],
        username_claim: "email".into(),
        groups_claim: "groups".into(),
        roles: RoleMap {
            groups: parse_grants("test", "viewers=view,devs=edit,platform=admin").unwrap(),
            default: None,
        },
    };
    let subjects =
        parse_grants("test", "repo:acme/*:ref:refs/heads/main=edit,repo:acme/*:ref:refs/heads/*=view")
            .unwrap();
    let trust = WorkloadTrust {
        issuer: WORKLOAD_ISSUER.into(),
        audience: WORKLOAD_AUDIENCE.into(),
        jwks_url: None,
        subjects,
    };
    AuthOptions {
        sso: Some(sso),
        workloads: vec![trust],
        transport: Some(Arc::new(FakeIssuers(vec![idp, ci]))),
        ..AuthOptions::default()
    }
}

/// Backups in the harness's directory, over the real node API client.
fn backups(tenancy: &Tenancy, dir: &TempDir) -> Backups {
    let store = tenancy.store().clone();
    let credentials = Arc::new(SealedCredentials::new(store.clone(), tenancy.secrets().clone()));
    let nodes =
        TenantNodeClient::new(cms_tenancy::talos_node_api(std::time::Duration::from_secs(2)), credentials);
    let objects = Arc::new(DirStore::new(dir.path().join("backups")));
    Backups::new(store, Arc::new(nodes), tenancy.secrets().clone(), objects)
}

/// A node client whose nodes have empty logs and no services, so that
/// the routes that read machines' logs answer rather than 503.
fn quiet_nodes() -> cms_tenancy::MockNodeClient {
    let mut nodes = cms_tenancy::MockNodeClient::new();
    nodes.expect_logs().returning(|_, _| Ok(Box::pin(futures_util::stream::empty())));
    nodes.expect_dmesg().returning(|_, _| Ok(Box::pin(futures_util::stream::empty())));
    nodes.expect_services().returning(|_| Ok(Vec::new()));
    nodes
}

/// A prober on the real node API client over `tenancy`'s store and secrets.
pub(crate) fn prober(tenancy: &Tenancy, clock: Arc<dyn Clock>, options: ProberOptions) -> Arc<Prober> {
    let store = tenancy.store().clone();
    let credentials = Arc::new(SealedCredentials::new(store.clone(), tenancy.secrets().clone()));
    let client = cms_tenancy::talos_node_api(options.deadline);
    Arc::new(Prober::new(store, credentials, client, clock, options))
}

pub(crate) async fn harness()
-> Harness<impl Service<actix_http::Request, Response = ServiceResponse<BoxBody>, Error = actix_web::Error>> {
    harness_with(ServiceOptions::default()).await
}

impl<S> Harness<S>
where
    S: Service<actix_http::Request, Response = ServiceResponse<BoxBody>, Error = actix_web::Error>,
{
    pub(crate) async fn send(&self, request: TestRequest) -> Reply {
        self.send_as(request.insert_header(("authorization", format!("Bearer {}", self.token)))).await
    }

    /// Sends a request with whatever credentials it already carries.
    pub(crate) async fn send_as(&self, request: TestRequest) -> Reply {
        let response = test::call_service(&self.service, request.to_request()).await;
        let status = response.status();
        let headers = response.headers().clone();
        let request_id =
            response.headers().get("x-request-id").and_then(|v| v.to_str().ok()).map(str::to_string);
        let body = test::read_body(response).await;
        Reply { status, headers, request_id, body }
    }

    pub(crate) async fn get(&self, uri: &str) -> Reply {
        self.send(TestRequest::get().uri(uri)).await
    }

    pub(crate) async fn post(&self, uri: &str, body: &str) -> Reply {
        self.send(json(TestRequest::post().uri(uri), body)).await
    }

    pub(crate) async fn put(&self, uri: &str, body: &str) -> Reply {
        self.send(json(TestRequest::put().uri(uri), body)).await
    }

    pub(crate) async fn delete(&self, uri: &str) -> Reply {
        self.send(TestRequest::delete().uri(uri)).await
    }

    /// Creates tenant `name` through the API.
    pub(crate) async fn tenant(&self, name: &str) -> Value {
        let body = format!(r#"{{"metadata":{{"name":"{name}"}},"spec":{{"kubernetesVersion":"1.31.0"}}}}"#);
        let reply = self.post("/api/v1/tenants", &body).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{:?}", reply.body);
        reply.json()
    }

    /// Creates a user of `role` and returns a login token of it.
    pub(crate) async fn user(&self, name: &str, role: UserRole) -> String {
        let password = SecretString::from(format!("{name}-password"));
        self.state.auth.create_user(name, role, &password).await.expect("user created");
        self.state.auth.login(name, &password, None).await.expect("login").0
    }

    /// A GET with `token`.
    pub(crate) async fn get_as(&self, uri: &str, token: &str) -> Reply {
        self.send_as(TestRequest::get().uri(uri).insert_header(("authorization", format!("Bearer {token}"))))
            .await
    }

    /// Sends a request as it is and hands back the response with its body unread.
    pub(crate) async fn open_as(&self, request: TestRequest) -> ServiceResponse<BoxBody> {
        test::call_service(&self.service, request.to_request()).await
    }

    /// The directory that holds the database files.
    pub(crate) fn dir(&self) -> &std::path::Path {
        self._dir.path()
    }

    /// Sends a request and hands back the response with its body unread.
    pub(crate) async fn open(&self, request: TestRequest) -> ServiceResponse<BoxBody> {
        let request = request.insert_header(("authorization", format!("Bearer {}", self.token)));
        test::call_service(&self.service, request.to_request()).await
    }
}

pub(crate) fn json(request: TestRequest, body: &str) -> TestRequest {
    request.insert_header(("content-type", "application/json")).set_payload(body.to_string())
}

/// The next chunk of a streaming body, or `None` when it ends or stays
/// silent for five seconds.
pub(crate) async fn next_chunk(body: &mut BoxBody) -> Option<Bytes> {
    let next = std::future::poll_fn(|cx| std::pin::Pin::new(&mut *body).poll_next(cx));
    match tokio::time::timeout(std::time::Duration::from_secs(5), next).await {
        Ok(Some(Ok(chunk))) => Some(chunk),
        _ => None,
    }
}

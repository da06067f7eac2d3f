//! Handler tests over a `MockStore`: each runs the real application, so
//! routing, extractors, error shaping and request ids are all exercised.

mod errors;
mod resources;
mod tenants;
mod watches;

use std::sync::Arc;

use actix_web::http::StatusCode;
use actix_web::http::header::HeaderMap;
use actix_web::test::{self, TestRequest};
use bytes::Bytes;
use cms_model::Kind;
use cms_store::{Key, MockStore, Object};
use serde_json::Value;

use crate::{AppState, ServiceOptions, app};

/// What a test sees of a response.
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

impl Reply {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// Checks the error shape and returns the message.
    pub(crate) fn error(&self, status: u16, code: &str) -> String {
        let body = self.json();
        assert_eq!(self.status.as_u16(), status, "{body}");
        assert_eq!(body["code"], code, "{body}");
        assert_eq!(body["status"], status, "{body}");
        assert_eq!(self.headers.get("content-type").map(|v| v.as_bytes()), Some(&b"application/json"[..]));
        body["error"].as_str().map(str::to_string).unwrap_or_default()
    }
}

pub(crate) async fn call(store: MockStore, req: TestRequest) -> Reply {
    call_with(store, ServiceOptions::default(), req).await
}

/// Handler tests run without authentication, which the route-table tests
/// over a real store cover; the authenticator answers nothing.
pub(crate) async fn state(store: Arc<dyn cms_store::Store>, options: ServiceOptions) -> AppState {
    let key = secrecy::SecretSlice::from(vec![7u8; 32]);
    let auth_options = cms_auth::AuthOptions { signing_key: Some(key), ..cms_auth::AuthOptions::default() };
    let accounts = Arc::new(cms_store::MockAccounts::new());
    let auth = cms_auth::Authenticator::new(accounts, auth_options).await.expect("authenticator");
    let sealer = cms_talos::Sealer::new(cms_talos::SealingKey::generate("test").expect("a sealing key"));
    let secrets_options =
        cms_tenancy::SecretsOptions { key_pool: 0, ..cms_tenancy::SecretsOptions::default() };
    let secrets = cms_tenancy::Secrets::new(sealer, secrets_options).expect("secrets");
    let mut audit = cms_store::MockAudit::new();
    audit.expect_record().returning(|_| Ok(1));
    let options = ServiceOptions { insecure_disable_auth: true, ..options };
    let prober = prober(&store, &secrets);
    // Rotations open bundles the mock store holds; none is sealed anew.
    let rotations = cms_tenancy::SealedRotations::new(
        store.clone(),
        Arc::new(cms_store::MockSealed::new()),
        secrets.clone(),
    );
    let tenancy = cms_tenancy::Tenancy::new(store, secrets);
    AppState::new(tenancy, Arc::new(auth), Arc::new(audit), prober, options)
        .with_rotations(Arc::new(rotations))
}

/// A prober on the real node API client and clock.
fn prober(store: &Arc<dyn cms_store::Store>, secrets: &Arc<cms_tenancy::Secrets>) -> Arc<cms_prober::Prober> {
    let options = cms_prober::ProberOptions::default();
    let credentials = Arc::new(cms_tenancy::SealedCredentials::new(store.clone(), secrets.clone()));
    let client = cms_tenancy::talos_node_api(options.deadline);
    Arc::new(cms_prober::Prober::new(
        store.clone(),
        credentials,
        client,
        Arc::new(cms_prober::SystemClock),
        options,
    ))
}

pub(crate) async fn call_with(store: MockStore, options: ServiceOptions, req: TestRequest) -> Reply {
    let service = test::init_service(app(state(Arc::new(store), options).await)).await;
    let response = test::call_service(&service, req.to_request()).await;
    let status = response.status();
    let headers = response.headers().clone();
    let body = test::read_body(response).await;
    Reply { status, headers, body }
}

/// A stored object whose JSON names it and its version.
pub(crate) fn object(key: Key, resource_version: u64) -> Arc<Object> {
    let json = format!(
        r#"{{"metadata":{{"name":"{}","resourceVersion":{resource_version}}},"spec":{{}},"status":{{}}}}"#,
        key.name
    );
    Arc::new(Object { key, resource_version, generation: 1, deleting: false, json: Bytes::from(json) })
}

/// A store that holds the tenant `t1` and nothing else.
pub(crate) fn store_with_tenant() -> MockStore {
    let mut store = MockStore::new();
    store.expect_get().returning(|key| (*key == Key::tenant("t1")).then(|| object(key.clone(), 1)));
    store
}

pub(crate) fn json_request(req: TestRequest, body: &str) -> TestRequest {
    req.insert_header(("content-type", "application/json")).set_payload(body.to_string())
}

pub(crate) const TENANT: &str = r#"{"metadata":{"name":"t1"},"spec":{"kubernetesVersion":"v1.31.0"}}"#;

pub(crate) fn machine_key(id: &str) -> Key {
    Key::child(Kind::Machine, "t1", id)
}

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::*;
use crate::testing::{FakeIssuer, TestKey, claims};

const URL: &str = "https://issuer.example";
const AUDIENCE: &str = "https://cms.example";

fn expected() -> Expected {
    Expected { audience: AUDIENCE.into(), nonce: None }
}

fn setup() -> (Arc<FakeIssuer>, TestKey, Issuer) {
    let key = TestKey::generate("k1");
    let fake = FakeIssuer::new(URL, vec![key.clone()]);
    let issuer = Issuer::new(URL, fake.clone());
    (fake, key, issuer)
}

#[tokio::test]
async fn a_good_token_verifies_and_its_claims_are_read() {
    let (_, key, issuer) = setup();
    let mut payload = claims(URL, AUDIENCE, "repo:acme/infra:ref:refs/heads/main", 300);
    payload["groups"] = json!(["a", "b"]);
    let claims = issuer.verify(&key.sign(&payload), &expected()).await.unwrap();
    assert_eq!(claims.subject(), "repo:acme/infra:ref:refs/heads/main");
    assert_eq!(claims.strings("groups"), ["a", "b"]);
}

#[tokio::test]
async fn every_check_refuses_what_it_should() {
    let (_, key, issuer) = setup();
    let refused = async |payload: serde_json::Value, key: &TestKey| {
        issuer.verify(&key.sign(&payload), &expected()).await.unwrap_err().to_string()
    };
    assert!(refused(claims(URL, "other", "s", 300), &key).await.contains("audience"));
    assert_eq!(refused(claims(URL, AUDIENCE, "s", -120), &key).await, "token expired");
    assert!(refused(claims("https://evil.example", AUDIENCE, "s", 300), &key).await.contains("issuer"));
    let mut early = claims(URL, AUDIENCE, "s", 600);
    early["nbf"] = json!(jsonwebtoken::get_current_timestamp() + 300);
    assert!(refused(early, &key).await.contains("not valid yet"));
    let mut no_subject = claims(URL, AUDIENCE, "s", 300);
    no_subject.as_object_mut().unwrap().remove("sub");
    assert!(refused(no_subject, &key).await.contains("required claim"));
    let stranger = TestKey::generate("k1");
    assert!(refused(claims(URL, AUDIENCE, "s", 300), &stranger).await.contains("signature"));
    let unknown = TestKey::generate("k9");
    assert!(refused(claims(URL, AUDIENCE, "s", 300), &unknown).await.contains("k9"));
}

#[tokio::test]
async fn a_nonce_must_match_when_expected() {
    let (_, key, issuer) = setup();
    let mut payload = claims(URL, AUDIENCE, "s", 300);
    payload["nonce"] = json!("n1");
    let token = key.sign(&payload);
    let with = |nonce: &str| Expected { audience: AUDIENCE.into(), nonce: Some(nonce.into()) };
    assert!(issuer.verify(&token, &with("n1")).await.is_ok());
    assert!(issuer.verify(&token, &with("n2")).await.unwrap_err().to_string().contains("nonce"));
}

#[tokio::test]
async fn symmetric_and_unsigned_tokens_are_refused() {
    let (_, _, issuer) = setup();
    let payload = claims(URL, AUDIENCE, "s", 300);
    let hmac = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &payload,
        &jsonwebtoken::EncodingKey::from_secret(b"secret"),
    )
    .unwrap();
    assert!(issuer.verify(&hmac, &expected()).await.unwrap_err().to_string().contains("HS256"));
    assert!(issuer.verify("not.a.token", &expected()).await.is_err());
}

#[tokio::test]
async fn a_rollover_is_picked_up_and_a_retired_key_refused() {
    let (fake, old, issuer) = setup();
    let issuer = issuer.with_min_refetch(Duration::from_millis(200));
    assert!(issuer.verify(&old.sign(&claims(URL, AUDIENCE, "s", 300)), &expected()).await.is_ok());
    assert_eq!(fake.key_fetches(), 1);
    // The issuer rolls over to a new key and retires the old one.
    tokio::time::sleep(Duration::from_millis(250)).await;
    let new = TestKey::generate("k2");
    fake.publish(vec![new.clone()]);
    assert!(issuer.verify(&new.sign(&claims(URL, AUDIENCE, "s", 300)), &expected()).await.is_ok());
    assert_eq!(fake.key_fetches(), 2, "an unknown key id fetches the set again");
    let err = issuer.verify(&old.sign(&claims(URL, AUDIENCE, "s", 300)), &expected()).await.unwrap_err();
    assert!(err.to_string().contains("k1"), "{err}");
    // Forged key ids do not make every request fetch the keys.
    for kid in ["x1", "x2", "x3"] {
        let forged = TestKey::generate(kid).sign(&claims(URL, AUDIENCE, "s", 300));
        assert!(issuer.verify(&forged, &expected()).await.is_err());
    }
    assert_eq!(fake.key_fetches(), 2);
}

#[tokio::test]
async fn a_discovery_document_for_another_issuer_is_refused() {
    let key = TestKey::generate("k1");
    let fake = FakeIssuer::new(URL, vec![key.clone()]);
    let issuer = Issuer::new("https://issuer.example/tenant", Arc::new(Redirected(fake)));
    let err = issuer.metadata().await.unwrap_err();
    assert!(err.to_string().contains("names the issuer"), "{err}");
}

/// Serves the fake issuer's documents under any URL.
struct Redirected(Arc<FakeIssuer>);

#[async_trait::async_trait]
impl Transport for Redirected {
    async fn send(&self, _request: http::Request<Vec<u8>>) -> Result<http::Response<Vec<u8>>, String> {
        let body = serde_json::to_vec(&self.0.discovery()).unwrap();
        Ok(http::Response::builder().status(200).body(body).unwrap())
    }
}

#[tokio::test]
async fn an_unreachable_issuer_is_unavailable() {
    let mut transport = crate::MockTransport::new();
    transport.expect_send().returning(|_| Err("connection refused".into()));
    let issuer = Issuer::new(URL, Arc::new(transport));
    let key = TestKey::generate("k1");
    let err = issuer.verify(&key.sign(&claims(URL, AUDIENCE, "s", 300)), &expected()).await.unwrap_err();
    assert!(err.is_unavailable(), "{err}");
}

//! [`TenantNodeClient::apply_config`] on a mocked node API: which ways a
//! config is sent, and that a configured host never gets the insecure one.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cms_model::UserRole;
use cms_nodeapi::{ApplyOutcome, MockNodeApi, NodeApiError, NodeCredentials};
use cms_talos::SecretsBundle;

use super::*;
use crate::credentials::MockTenantCredentials;

/// A client whose node API answers `ApplyConfiguration` with `answer`,
/// given whether the call came in maintenance mode, and records that.
fn client(
    answer: fn(bool) -> Result<ApplyOutcome, NodeApiError>,
) -> (TenantNodeClient, Arc<Mutex<Vec<bool>>>) {
    let bundle = SecretsBundle::generate("1.14.0").expect("a bundle");
    let mut credentials = MockTenantCredentials::new();
    credentials.expect_credentials().returning(move |_| {
        Ok(NodeCredentials::for_tenant(&bundle, UserRole::Admin, Duration::from_secs(600))
            .expect("credentials"))
    });
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let mut api = MockNodeApi::new();
    api.expect_apply_configuration().returning(move |_, credentials, _| {
        record.lock().unwrap().push(credentials.is_maintenance());
        answer(credentials.is_maintenance())
    });
    (TenantNodeClient::new(Arc::new(api), Arc::new(credentials)), seen)
}

fn node() -> NodeRef {
    NodeRef { tenant: "acme".into(), machine: "m-1".into(), management_address: "10.0.0.5:50000".into() }
}

fn refused(_maintenance: bool) -> Result<ApplyOutcome, NodeApiError> {
    Err(NodeApiError::Node { hostname: "m-1".into(), message: "tls: bad certificate".into() })
}

fn accepted(_maintenance: bool) -> Result<ApplyOutcome, NodeApiError> {
    Ok(ApplyOutcome { mode: ApplyMode::NoReboot, warnings: Vec::new(), mode_details: String::new() })
}

#[tokio::test]
async fn a_configured_host_is_never_asked_in_maintenance_mode() {
    let (nodes, seen) = client(refused);
    let err = nodes.apply_config(&node(), "version: v1alpha1\n", true).await.expect_err("the node refused");
    assert_eq!(*seen.lock().unwrap(), vec![false], "only the tenant's way was tried");
    assert!(!matches!(err, NodeError::Apply { .. }), "{err}");
    assert!(err.to_string().contains("tls: bad certificate"), "{err}");
}

#[tokio::test]
async fn a_host_without_a_config_is_asked_in_maintenance_mode_first() {
    let (nodes, seen) = client(accepted);
    nodes.apply_config(&node(), "version: v1alpha1\n", false).await.expect("applied");
    assert_eq!(*seen.lock().unwrap(), vec![true]);

    let (nodes, seen) = client(|maintenance| if maintenance { refused(true) } else { accepted(false) });
    nodes.apply_config(&node(), "version: v1alpha1\n", false).await.expect("applied the tenant's way");
    assert_eq!(*seen.lock().unwrap(), vec![true, false], "then the tenant's way, which checks the node");
}

fn silent(_maintenance: bool) -> Result<ApplyOutcome, NodeApiError> {
    Err(NodeApiError::Stalled { endpoint: "10.0.0.5:50000".into(), after: Duration::from_secs(5) })
}

#[tokio::test]
async fn a_host_reached_neither_way_is_unreachable_and_says_so_once() {
    let (nodes, _) = client(silent);
    let err = nodes.apply_config(&node(), "version: v1alpha1\n", false).await.expect_err("no answer");
    assert!(err.is_unreachable(), "{err}");
    let summary = err.summary();
    assert_eq!(summary, "10.0.0.5:50000 stalled: nothing moved for 5s");

    // A node that answered one way was reached: both ways are named.
    let (nodes, _) = client(|maintenance| if maintenance { refused(true) } else { silent(false) });
    let err = nodes.apply_config(&node(), "version: v1alpha1\n", false).await.expect_err("refused");
    assert!(!err.is_unreachable(), "{err}");
    let summary = err.summary();
    assert!(
        summary.starts_with("in maintenance mode: node \"m-1\" reported: tls: bad certificate; "),
        "{summary}"
    );
    assert!(
        summary.ends_with("with the tenant's credentials: 10.0.0.5:50000 stalled: nothing moved for 5s"),
        "{summary}"
    );
}

#[tokio::test]
async fn logs_pass_through_with_the_tenant_s_credentials() {
    let bundle = SecretsBundle::generate("1.14.0").expect("a bundle");
    let mut credentials = MockTenantCredentials::new();
    credentials.expect_credentials().returning(move |_| {
        Ok(NodeCredentials::for_tenant(&bundle, UserRole::Admin, Duration::from_secs(600))
            .expect("credentials"))
    });
    let mut api = MockNodeApi::new();
    api.expect_logs()
        .withf(|target, credentials, request| {
            target.endpoint() == "10.0.0.5:50000"
                && !credentials.is_maintenance()
                && request.service == "etcd"
                && request.tail_lines == Some(3)
        })
        .returning(|_, _, _| {
            let chunks = vec![
                Ok(b"one\n".to_vec()),
                Err(NodeApiError::Stalled {
                    endpoint: "10.0.0.5:50000".into(),
                    after: Duration::from_secs(5),
                }),
            ];
            Ok(Box::pin(futures_util::stream::iter(chunks)))
        });
    let client = TenantNodeClient::new(Arc::new(api), Arc::new(credentials));
    let request = LogsRequest { service: "etcd".into(), follow: true, tail_lines: Some(3) };
    let chunks: Vec<_> = client.logs(&node(), request).await.expect("a log").collect().await;
    assert_eq!(chunks[0].as_ref().expect("a chunk"), b"one\n");
    assert!(chunks[1].as_ref().expect_err("it broke off").is_unreachable());
}

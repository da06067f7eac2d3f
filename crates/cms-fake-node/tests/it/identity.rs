//! The node's TLS identity follows Talos's: a CA of its own in maintenance
//! mode, the config's OS CA once it takes a config, a new CA of its own once
//! reset; and `ApplyConfiguration` in maintenance mode answers as Talos's
//! maintenance service.

use cms_fake_node::{FakeNode, FakeNodeOptions, Method};
use cms_model::Role;
use cms_nodeapi::{
    ApplyMode, ApplyOutcome, ApplyRequest, NodeApi, NodeApiError, NodeCredentials, ResetRequest, WipeMode,
};
use cms_talos::{RenderInput, SecretsBundle};

use crate::{admin, bundle, client, target};

/// A machine config of `role` rendered from the tenant's `bundle`, as the
/// service renders it.
fn config(bundle: &SecretsBundle, role: Role) -> Vec<u8> {
    let input = RenderInput {
        cluster_name: "acme".into(),
        role,
        talos_version: "1.14.0".into(),
        kubernetes_version: "1.32.0".into(),
        kubelet_version: None,
        control_plane_endpoint: None,
        control_plane_addresses: vec!["127.0.0.1".into()],
        pod_networks: vec![],
        service_networks: vec![],
        cert_sans: vec![],
        install_image: None,
        bundle,
        patches: vec![],
    };
    cms_talos::render(&input).expect("a config").into_bytes()
}

/// Applies `config` with `credentials` in `mode`.
async fn apply(
    node: &FakeNode,
    credentials: &NodeCredentials,
    config: Vec<u8>,
    mode: ApplyMode,
    dry_run: bool,
) -> Result<ApplyOutcome, NodeApiError> {
    client().apply_configuration(&target(node), credentials, ApplyRequest { config, mode, dry_run }).await
}

/// Whether the connection failed because the client refused the node's
/// certificate. rustls's error travels inside an `io::Error`, whose
/// `source` skips it, so each `io::Error` of the chain is opened too.
fn untrusted(err: &NodeApiError) -> bool {
    fn refused(err: &(dyn std::error::Error + 'static)) -> bool {
        let mut next = Some(err);
        while let Some(err) = next {
            if let Some(rustls::Error::InvalidCertificate(_)) = err.downcast_ref::<rustls::Error>() {
                return true;
            }
            if let Some(inner) = err.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref())
                && refused(inner)
            {
                return true;
            }
            next = err.source();
        }
        false
    }
    matches!(err, NodeApiError::Connect { source, .. } if refused(source))
}

/// Whether `pem` is a self-signed CA certificate.
fn self_signed_ca(pem: &str) -> bool {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).expect("PEM");
    let cert = pem.parse_x509().expect("a certificate");
    cert.subject() == cert.issuer() && cert.is_ca()
}

fn code(err: NodeApiError) -> (tonic::Code, String) {
    match err {
        NodeApiError::Status { status, .. } => (status.code(), status.message().to_string()),
        other => panic!("expected a gRPC status, got {other}"),
    }
}

#[tokio::test]
async fn a_host_serves_its_own_ca_until_it_takes_a_config_and_again_once_reset() {
    let (bundle, stranger) = (bundle(), bundle());
    let node = FakeNode::start(FakeNodeOptions::new(bundle.os_ca().clone()).maintenance()).await.unwrap();
    let (client, tenant, maintenance) = (client(), admin(&bundle), NodeCredentials::maintenance());
    assert!(node.in_maintenance());
    let own = node.server_ca();
    assert!(self_signed_ca(&own) && own != bundle.os_ca().cert_pem(), "a CA of its own");
    let err = client.version(&target(&node), &tenant).await.unwrap_err();
    assert!(untrusted(&err), "the tenant's OS CA did not sign it: {err:?}");
    client.version(&target(&node), &maintenance).await.expect("maintenance credentials work");

    let outcome = apply(&node, &maintenance, config(&bundle, Role::ControlPlane), ApplyMode::Auto, false)
        .await
        .expect("the config is taken");
    assert_eq!(outcome.mode, ApplyMode::Reboot, "it installs and reboots");
    assert!(!node.in_maintenance());
    assert_eq!(node.server_ca(), bundle.os_ca().cert_pem(), "apid's certificate is the OS CA's");
    client.version(&target(&node), &tenant).await.expect("the tenant's credentials work");
    assert!(client.version(&target(&node), &maintenance).await.is_err(), "a client certificate is required");
    let err = client.version(&target(&node), &admin(&stranger)).await.unwrap_err();
    assert!(untrusted(&err), "{err:?}");

    let reset = ResetRequest { graceful: true, reboot: true, wipe: WipeMode::All };
    client.reset(&target(&node), &tenant, reset).await.expect("the reset");
    assert!(node.in_maintenance());
    let again = node.server_ca();
    assert!(self_signed_ca(&again) && again != own && again != bundle.os_ca().cert_pem(), "a new CA");
    let err = client.version(&target(&node), &tenant).await.unwrap_err();
    assert!(untrusted(&err), "{err:?}");
    client.version(&target(&node), &maintenance).await.expect("maintenance credentials work again");

    let seen: Vec<_> = node.calls().iter().map(|call| (call.method, call.client_certificate)).collect();
    assert_eq!(
        seen,
        [
            (Method::Version, false),
            (Method::ApplyConfiguration, false),
            (Method::Version, true),
            (Method::Reset, true),
            (Method::Version, false),
        ]
    );
}

#[tokio::test]
async fn the_config_decides_whatever_ca_the_host_was_given() {
    let (tenant, stranger) = (bundle(), bundle());
    let host = || FakeNodeOptions::new(stranger.os_ca().clone());
    let (client, admin, maintenance) = (client(), admin(&tenant), NodeCredentials::maintenance());

    let cp = FakeNode::start(host().maintenance()).await.unwrap();
    apply(&cp, &maintenance, config(&tenant, Role::ControlPlane), ApplyMode::Reboot, false).await.unwrap();
    client.version(&target(&cp), &admin).await.expect("a control plane issues from the config's key");

    // A worker's config has the CA's certificate only: a control plane's
    // trustd signs its certificate.
    let worker = FakeNode::start(host().maintenance()).await.unwrap();
    apply(&worker, &maintenance, config(&tenant, Role::Worker), ApplyMode::Try, false).await.unwrap();
    assert_eq!(worker.server_ca(), tenant.os_ca().cert_pem());
    client.version(&target(&worker), &admin).await.expect("the worker's certificate is the tenant's");

    let booted = FakeNode::start(host().booted(String::from_utf8(config(&tenant, Role::Worker)).unwrap()))
        .await
        .unwrap();
    client.version(&target(&booted), &admin).await.expect("a booted node serves as its config says");
    let err = client.version(&target(&booted), &crate::admin(&stranger)).await.unwrap_err();
    assert!(untrusted(&err), "{err:?}");

    // A configured node that takes another tenant's config follows it.
    let moved = FakeNode::start(FakeNodeOptions::new(tenant.os_ca().clone())).await.unwrap();
    client.version(&target(&moved), &admin).await.expect("the CA given, before any config");
    let stranger_admin = crate::admin(&stranger);
    apply(&moved, &admin, config(&stranger, Role::ControlPlane), ApplyMode::NoReboot, false).await.unwrap();
    client.version(&target(&moved), &stranger_admin).await.expect("the new config's CA");
    assert!(untrusted(&client.version(&target(&moved), &admin).await.unwrap_err()));
}

#[tokio::test]
async fn an_explicit_client_ca_outlives_the_config() {
    let (tenant, operator) = (bundle(), bundle());
    let options =
        FakeNodeOptions::new(tenant.os_ca().clone()).client_ca(operator.os_ca().clone()).maintenance();
    let node = FakeNode::start(options).await.unwrap();
    let maintenance = NodeCredentials::maintenance();
    apply(&node, &maintenance, config(&tenant, Role::ControlPlane), ApplyMode::Auto, false).await.unwrap();
    assert_eq!(node.server_ca(), tenant.os_ca().cert_pem());
    assert!(client().version(&target(&node), &admin(&tenant)).await.is_err(), "not the client CA");
    // The tenant's OS CA signed the node; the operator's, the client.
    let cert = cms_talos::issue_client_cert(operator.os_ca(), None, &["os:admin"], crate::TTL).unwrap();
    let mixed = NodeCredentials::from_pem(tenant.os_ca().cert_pem(), &cert.cert_pem, &cert.key_pem).unwrap();
    client().version(&target(&node), &mixed).await.expect("the client CA's certificate works");
}

#[tokio::test]
async fn maintenance_mode_takes_reboot_auto_and_try_and_refuses_the_other_modes() {
    let bundle = bundle();
    let node = FakeNode::start(FakeNodeOptions::new(bundle.os_ca().clone()).maintenance()).await.unwrap();
    let maintenance = NodeCredentials::maintenance();
    for (mode, name) in [(ApplyMode::NoReboot, "no-reboot"), (ApplyMode::Staged, "staged")] {
        let err = apply(&node, &maintenance, config(&bundle, Role::Worker), mode, false).await.unwrap_err();
        let (code, message) = code(err);
        assert_eq!(code, tonic::Code::Unimplemented);
        assert_eq!(
            message,
            format!("apply configuration --mode='{name}' is not supported in maintenance mode")
        );
    }
    let dry = apply(&node, &maintenance, config(&bundle, Role::Worker), ApplyMode::Auto, true).await.unwrap();
    assert_eq!(dry.mode, ApplyMode::Reboot);
    assert_eq!(
        dry.mode_details,
        "Dry run summary:\nNode is running in maintenance mode and does not have a config yet."
    );
    assert!(node.in_maintenance() && node.config().is_none(), "nothing was applied");

    let taken =
        apply(&node, &maintenance, config(&bundle, Role::Worker), ApplyMode::Try, false).await.unwrap();
    assert_eq!((taken.mode, taken.mode_details.as_str()), (ApplyMode::Reboot, ""));
    assert!(!node.in_maintenance() && node.config().is_some());
}

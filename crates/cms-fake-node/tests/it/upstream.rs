//! The fake serves Talos's own definitions of the node API: a client built
//! from them reads its answers, and a call it does not implement answers
//! `Unimplemented` without reaching its record.

use std::sync::Arc;

use cms_fake_node::proto::machine::{HostnameResponse, VersionResponse};
use cms_fake_node::{FakeNode, FakeNodeOptions, Method};
use hyper_util::rt::TokioIo;
use rustls::ClientConfig;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tonic::client::Grpc;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint, Uri};
use tonic_prost::ProstCodec;

use crate::bundle;

/// A gRPC channel to a node in maintenance mode: TLS that trusts the CA
/// the node made itself, without a client certificate.
async fn channel(node: &FakeNode) -> Channel {
    let mut roots = rustls::RootCertStore::empty();
    let der = pem::parse(node.server_ca()).expect("a PEM certificate").into_contents();
    roots.add(CertificateDer::from(der)).expect("a root");
    let mut config = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let connector = TlsConnector::from(Arc::new(config));
    let addr = node.addr();
    let connect = tower::service_fn(move |_: Uri| {
        let connector = connector.clone();
        async move {
            let tcp = TcpStream::connect(addr).await?;
            let tls = connector.connect(ServerName::from(addr.ip()), tcp).await?;
            Ok::<_, std::io::Error>(TokioIo::new(tls))
        }
    });
    Endpoint::from_shared(format!("https://{addr}"))
        .expect("an endpoint")
        .connect_with_connector(connect)
        .await
        .expect("a channel")
}

/// Calls `MachineService/<method>` with an empty request.
async fn call<T>(grpc: &mut Grpc<Channel>, method: &'static str) -> Result<T, tonic::Status>
where
    T: prost::Message + Default + Send + 'static,
{
    grpc.ready().await.expect("a ready channel");
    let path = PathAndQuery::try_from(format!("/machine.MachineService/{method}")).expect("a path");
    let answer = grpc.unary(tonic::Request::new(()), path, ProstCodec::<(), T>::default()).await?;
    Ok(answer.into_inner())
}

#[tokio::test]
async fn talos_definitions_are_served_and_the_rest_is_unimplemented() {
    let bundle = bundle();
    let options = FakeNodeOptions::new(bundle.os_ca().clone()).version("v1.13.2").maintenance();
    let node = FakeNode::start(options).await.unwrap();
    let mut grpc = Grpc::new(channel(&node).await);

    let version: VersionResponse = call(&mut grpc, "Version").await.unwrap();
    assert_eq!(version.messages[0].version.as_ref().map(|info| info.tag.as_str()), Some("v1.13.2"));

    let status = call::<HostnameResponse>(&mut grpc, "Hostname").await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unimplemented, "{status:?}");
    let methods: Vec<Method> = node.calls().iter().map(|call| call.method).collect();
    assert_eq!(methods, vec![Method::Version]);
}

//! The cluster autoscaler's whole conversation with `cms`, on metal with
//! fake nodes and the real engine, through a client generated from the
//! upstream `externalgrpc.proto` and the identity an admin downloads: the
//! group is listed, a Node mapped, scaled up by 2, a named node deleted
//! (drained and reset, and no other), growth past `maxCount` and shrinking
//! under `minCount` refused; another tenant's identity sees none of it; and
//! the autoscaler's writes are in the audit log under its identity.

use std::collections::BTreeSet;
use std::sync::Arc;

use cms_e2e::cluster::{FakeCluster, hostname};
use cms_e2e::nodes::StoreWriter;
use cms_e2e::{Api, Server};
use prost::Message;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::{Value, json};
use tonic::Code;
use tonic::transport::{Channel, Endpoint, Uri};

use super::cluster::fake_hosts;
use super::{CONVERGE, Engine, converged, eventually, machine_ids, metal_tenant};

#[allow(unreachable_pub, clippy::all)]
mod proto {
    pub mod externalgrpc {
        tonic::include_proto!("clusterautoscaler.cloudprovider.v1.externalgrpc");
    }
    pub mod k8s {
        tonic::include_proto!("k8s.io.api.core.v1");
    }
}

use proto::externalgrpc::cloud_provider_client::CloudProviderClient;
use proto::externalgrpc::instance_status::InstanceState;
use proto::externalgrpc::*;

type Client = CloudProviderClient<Channel>;

/// A free loopback port for the autoscaler service.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The identity an admin downloads for `tenant`: the Secret's `stringData`.
async fn identity(api: &Api, tenant: &str) -> Value {
    let reply = api.get(&format!("/api/v1/tenants/{tenant}/autoscaler-identity")).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let secret: Value = serde_saphyr::from_str(&reply.body).expect("a YAML Secret");
    assert_eq!(secret["kind"], "Secret", "{secret}");
    secret["stringData"].clone()
}

/// A client that speaks as the autoscaler holding `identity`.
async fn client(identity: &Value) -> Client {
    let key = identity["tls.key"].as_str().unwrap();
    let tls = tls(identity, Some((identity["tls.crt"].as_str().unwrap(), key)));
    CloudProviderClient::new(
        channel(identity, tls).await.expect("the service answers the downloaded identity"),
    )
}

/// The PEM blocks of `text`, as DER.
fn pems(text: &str) -> Vec<Vec<u8>> {
    let mut reader = std::io::BufReader::new(text.as_bytes());
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in std::io::BufRead::lines(&mut reader).map(Result::unwrap) {
        match (&mut current, line.starts_with("-----BEGIN"), line.starts_with("-----END")) {
            (None, true, _) => current = Some(String::new()),
            (Some(body), _, true) => {
                use base64::Engine;
                blocks.push(base64::engine::general_purpose::STANDARD.decode(body.as_bytes()).unwrap());
                current = None;
            }
            (Some(body), _, _) => body.push_str(line.trim()),
            _ => {}
        }
    }
    blocks
}

/// The TLS of the autoscaler's side: the CA the Secret names as the only
/// root, and the client certificate and key when given.
fn tls(identity: &Value, client: Option<(&str, &str)>) -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for ca in pems(identity["ca.crt"].as_str().unwrap()) {
        roots.add(CertificateDer::from(ca)).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let mut config = match client {
        Some((cert, key)) => {
            let chain = pems(cert).into_iter().map(CertificateDer::from).collect();
            let key = PrivateKeyDer::try_from(pems(key).remove(0)).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    Arc::new(config)
}

/// A channel to the address of the Secret's cloud config, over `tls`.
async fn channel(
    identity: &Value,
    tls: Arc<rustls::ClientConfig>,
) -> Result<Channel, tonic::transport::Error> {
    let config: Value = serde_saphyr::from_str(identity["cloud-config"].as_str().unwrap()).unwrap();
    let address = config["address"].as_str().expect("the cloud config names an address").to_string();
    let host = address.rsplit_once(':').unwrap().0.to_string();
    let server_name = ServerName::try_from(host).unwrap();
    let connector = tokio_rustls::TlsConnector::from(tls);
    let dial = address.clone();
    let connect = tower::service_fn(move |_: Uri| {
        let (connector, dial, server_name) = (connector.clone(), dial.clone(), server_name.clone());
        async move {
            let tcp = tokio::net::TcpStream::connect(dial).await?;
            let tls = connector.connect(server_name, tcp).await?;
            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(tls))
        }
    });
    // The scheme is the connector's business: it speaks TLS whatever it says.
    Endpoint::from_shared(format!("http://{address}")).unwrap().connect_with_connector(connect).await
}

fn node(name: &str) -> ExternalGrpcNode {
    ExternalGrpcNode { name: name.into(), ..ExternalGrpcNode::default() }
}

async fn target_size(client: &mut Client, id: &str) -> i32 {
    client
        .node_group_target_size(NodeGroupTargetSizeRequest { id: id.into() })
        .await
        .unwrap()
        .into_inner()
        .target_size
}

async fn instances(client: &mut Client) -> Vec<Instance> {
    client
        .node_group_nodes(NodeGroupNodesRequest { id: "workers".into() })
        .await
        .unwrap()
        .into_inner()
        .instances
}

/// `acme` of one control plane and two workers autoscaled within 1..=4,
/// converged, with the fake cluster on its hosts.
async fn autoscaled_acme(engine: &Engine) -> (Server, FakeCluster) {
    let port = free_port();
    let server = engine.options().env("CMS_AUTOSCALER_LISTEN", format!("127.0.0.1:{port}")).start().await;
    let mut tenant = metal_tenant("acme", 1, 2);
    tenant["spec"]["nodeGroups"][1]["autoscaling"] =
        json!({"minCount": 1, "maxCount": 4, "pricePerHour": 0.5});
    server.api().post("/api/v1/tenants", &tenant).await.expect(201);
    let bundle = StoreWriter::open(server.data_dir()).await.bundle("acme").await;
    let cluster = FakeCluster::start(&bundle, &fake_hosts(1, 4), |_, options| options).await;
    converged(&server.api(), "acme").await;
    (server, cluster)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_autoscaler_scales_a_group_through_cms_and_deletes_the_node_it_names() {
    let engine = Engine::new();
    let (server, cluster) = autoscaled_acme(&engine).await;
    let api = server.api();
    let mut autoscaler = client(&identity(&api, "acme").await).await;

    // The group, and not the control planes.
    let groups = autoscaler.node_groups(NodeGroupsRequest {}).await.unwrap().into_inner().node_groups;
    let ids: Vec<(&str, i32, i32)> = groups.iter().map(|g| (g.id.as_str(), g.min_size, g.max_size)).collect();
    assert_eq!(ids, [("workers", 1, 4)]);
    let group_of = |name: String| NodeGroupForNodeRequest { node: Some(node(&name)) };
    let found = autoscaler.node_group_for_node(group_of(hostname("workers-0"))).await.unwrap().into_inner();
    assert_eq!(found.node_group.unwrap().id, "workers", "a Node is mapped by its addresses");
    let found = autoscaler.node_group_for_node(group_of(hostname("cp-0"))).await.unwrap().into_inner();
    assert_eq!(found.node_group.unwrap().id, "", "a control plane is in no autoscaled group");
    assert_eq!(target_size(&mut autoscaler, "workers").await, 2);

    // Refresh gives the workers' Nodes, which Talos registers without one,
    // their machines' provider ids: the instances' ids.
    autoscaler.refresh(RefreshRequest {}).await.unwrap();
    let mut ids: Vec<String> = instances(&mut autoscaler).await.into_iter().map(|i| i.id).collect();
    ids.sort();
    let mut carried: Vec<String> =
        cluster.kube.nodes().into_iter().map(|n| n.provider_id).filter(|id| !id.is_empty()).collect();
    carried.sort();
    assert_eq!(ids.len(), 2);
    assert_eq!(carried, ids, "each instance's id is on its Node, and no control plane's is set");
    let mut machines = Vec::new();
    for machine in ["workers-0", "workers-1"] {
        let machine = api.get(&format!("/api/v1/tenants/acme/machines/{machine}")).await.expect(200);
        machines.push(machine["spec"]["providerId"].as_str().unwrap().to_string());
    }
    machines.sort();
    assert_eq!(ids, machines, "the machines' provider ids");
    let template = autoscaler
        .node_group_template_node_info(NodeGroupTemplateNodeInfoRequest { id: "workers".into() })
        .await
        .unwrap()
        .into_inner();
    let template = proto::k8s::Node::decode(template.node_bytes.as_slice()).unwrap();
    let capacity = &template.status.as_ref().unwrap().capacity;
    assert_eq!(capacity["cpu"].string.as_deref(), Some("2"), "resources from a running Node: {template:?}");
    let price = autoscaler
        .pricing_node_price(PricingNodePriceRequest {
            node: Some(node(&hostname("workers-0"))),
            start_timestamp: Some(prost_types::Timestamp { seconds: 0, nanos: 0 }),
            end_timestamp: Some(prost_types::Timestamp { seconds: 7200, nanos: 0 }),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(price.price, 1.0, "two hours at 0.5");

    // Up by 2: the group's count follows, and so do its machines.
    autoscaler
        .node_group_increase_size(NodeGroupIncreaseSizeRequest { delta: 2, id: "workers".into() })
        .await
        .unwrap();
    assert_eq!(target_size(&mut autoscaler, "workers").await, 4);
    let group = api.get("/api/v1/tenants/acme/node-groups/workers").await.expect(200);
    assert_eq!(group["spec"]["count"], 4, "{group}");
    eventually("four workers running", CONVERGE, || async {
        let all = instances(&mut autoscaler.clone()).await;
        let running = all
            .iter()
            .filter(|i| i.status.as_ref().unwrap().instance_state() == InstanceState::InstanceRunning);
        (all.len() == 4 && running.count() == 4).then_some(())
    })
    .await;
    assert_eq!(machine_ids(&api, "acme").await, ["cp-0", "workers-0", "workers-1", "workers-2", "workers-3"]);
    converged(&api, "acme").await;

    // Past maxCount: refused, and nothing changes.
    let refused = autoscaler
        .node_group_increase_size(NodeGroupIncreaseSizeRequest { delta: 1, id: "workers".into() })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    assert!(refused.message().contains("maxCount is 4"), "{refused:?}");

    // The named node goes, drained and reset; no other one does.
    let before = cluster.kube.requests().len();
    autoscaler
        .node_group_delete_nodes(NodeGroupDeleteNodesRequest {
            nodes: vec![node(&hostname("workers-1"))],
            id: "workers".into(),
        })
        .await
        .unwrap();
    assert_eq!(target_size(&mut autoscaler, "workers").await, 3);
    let group = api.get("/api/v1/tenants/acme/node-groups/workers").await.expect(200);
    assert_eq!(group["spec"]["removedMachines"], json!(["workers-1"]), "{group}");
    eventually("workers-1 to go", CONVERGE, || async {
        (machine_ids(&api, "acme").await == ["cp-0", "workers-0", "workers-2", "workers-3"]).then_some(())
    })
    .await;
    assert_eq!(cluster.kube.deleted_nodes(), [hostname("workers-1")]);
    let reset: BTreeSet<String> = cluster.calls_of("Reset").into_iter().map(|(machine, _)| machine).collect();
    assert_eq!(reset, BTreeSet::from(["workers-1".to_string()]), "only the named machine is reset");
    let cordoned = cluster
        .kube
        .requests()
        .into_iter()
        .skip(before)
        .filter(|r| r.method == "PATCH")
        .map(|r| r.path)
        .collect::<Vec<_>>();
    let named = format!("/api/v1/nodes/{}", hostname("workers-1"));
    let only_named = cordoned.iter().all(|path| path.split('?').next() == Some(named.as_str()));
    assert!(only_named && !cordoned.is_empty(), "it is cordoned, no other: {cordoned:?}");
    converged(&api, "acme").await;

    // Under minCount: refused, naming the limit; nothing is removed.
    let all: Vec<ExternalGrpcNode> =
        ["workers-0", "workers-2", "workers-3"].iter().map(|m| node(&hostname(m))).collect();
    let refused = autoscaler
        .node_group_delete_nodes(NodeGroupDeleteNodesRequest { nodes: all, id: "workers".into() })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    assert!(refused.message().contains("minCount is 1"), "{refused:?}");
    let refused = autoscaler
        .node_group_decrease_target_size(NodeGroupDecreaseTargetSizeRequest {
            delta: -1,
            id: "workers".into(),
        })
        .await
        .unwrap_err();
    assert!(
        refused.message().contains("existing nodes"),
        "a running machine is never dropped unnamed: {refused:?}"
    );
    assert_eq!(target_size(&mut autoscaler, "workers").await, 3);

    // Another tenant's identity sees none of this, and is told of none.
    api.post(
        "/api/v1/tenants",
        &json!({"metadata": {"name": "other"}, "spec": {"kubernetesVersion": "1.31.1"}}),
    )
    .await
    .expect(201);
    let mut other = client(&identity(&api, "other").await).await;
    assert!(other.node_groups(NodeGroupsRequest {}).await.unwrap().into_inner().node_groups.is_empty());
    for err in [
        other.node_group_target_size(NodeGroupTargetSizeRequest { id: "workers".into() }).await.unwrap_err(),
        other
            .node_group_increase_size(NodeGroupIncreaseSizeRequest { delta: 1, id: "workers".into() })
            .await
            .unwrap_err(),
        other.node_group_nodes(NodeGroupNodesRequest { id: "workers".into() }).await.unwrap_err(),
    ] {
        assert_eq!(err.code(), Code::NotFound, "{err:?}");
        assert!(!err.message().contains("acme"), "names no group of acme: {err:?}");
    }
    let found = other.node_group_for_node(group_of(hostname("workers-0"))).await.unwrap().into_inner();
    assert_eq!(found.node_group.unwrap().id, "", "acme's node is none of other's");
    assert_eq!(target_size(&mut autoscaler, "workers").await, 3, "acme's group is as it was");

    // Without a client certificate there is no conversation at all.
    let acme = identity(&api, "acme").await;
    let refused = match channel(&acme, tls(&acme, None)).await {
        Ok(channel) => CloudProviderClient::new(channel).node_groups(NodeGroupsRequest {}).await.is_err(),
        Err(_) => true,
    };
    assert!(refused, "a caller without a certificate is refused");

    // The autoscaler's writes are on the audit log under its identity.
    let audit = api.get("/api/v1/audit?actor=autoscaler:acme").await.expect(200);
    let records: Vec<(String, String)> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["path"].as_str().unwrap().rsplit('/').next().unwrap().to_string(),
                r["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for expected in [
        ("NodeGroupIncreaseSize", "succeeded"),
        ("NodeGroupIncreaseSize", "failed"),
        ("NodeGroupDeleteNodes", "succeeded"),
        ("NodeGroupDeleteNodes", "failed"),
        ("NodeGroupDecreaseTargetSize", "failed"),
    ] {
        assert!(
            records.contains(&(expected.0.to_string(), expected.1.to_string())),
            "{expected:?} in {records:?}"
        );
    }
    let record = &audit["items"][0];
    assert_eq!(
        record["target"],
        json!({"kind": "NodeGroup", "tenant": "acme", "name": "workers"}),
        "{record}"
    );
    assert_eq!(record["actorSource"], "autoscaler", "{record}");
}

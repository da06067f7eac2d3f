//! The fake Kubernetes API over real HTTPS: client certificates from the
//! tenant's Kubernetes CA only, Nodes, cordons, evictions a disruption
//! budget refuses, deletions, and the etcd it waits for.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use bytes::Bytes;
use cms_fake_node::{
    FakeEtcd, FakeKube, FakeKubeNode, FakeKubeOptions, FakeNode, FakeNodeOptions, FakePod, PodKind,
};
use cms_nodeapi::{ApplyMode, ApplyRequest, BootstrapRequest, NodeApi, ResetRequest, WipeMode};
use cms_talos::{CertificateAuthority, SecretsBundle};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rustls::ClientConfig;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::{TTL, admin, bundle, client, target};

const LOCAL: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

fn der(pem_text: &str) -> CertificateDer<'static> {
    CertificateDer::from(pem::parse(pem_text).expect("a PEM certificate").into_contents())
}

/// A TLS client that trusts `server_ca` and presents a certificate for
/// `name` from `client_ca`, or none.
fn tls(
    server_ca: &CertificateAuthority,
    client_ca: Option<&CertificateAuthority>,
    name: &str,
) -> Arc<ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der(server_ca.cert_pem())).expect("a root");
    let builder = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots);
    let config = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let cert =
                cms_talos::issue_client_cert(ca, Some(name), &["system:masters"], TTL).expect("a cert");
            let key = cms_nodeapi::load_private_key(&cert.key_pem).expect("a key");
            builder.with_client_auth_cert(vec![der(&cert.cert_pem)], key).expect("client auth")
        }
    };
    Arc::new(config)
}

/// The tenant's admin, as kubectl with its kubeconfig would be.
pub(crate) fn admin_tls(bundle: &SecretsBundle) -> Arc<ClientConfig> {
    tls(bundle.kubernetes_ca(), Some(bundle.kubernetes_ca()), "admin")
}

/// One request on a fresh connection: the status and the body.
pub(crate) async fn call(
    kube: &FakeKube,
    tls: Arc<ClientConfig>,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Result<(u16, String), String> {
    let tcp = TcpStream::connect(kube.addr()).await.map_err(|err| err.to_string())?;
    let stream = TlsConnector::from(tls)
        .connect(ServerName::from(kube.addr().ip()), tcp)
        .await
        .map_err(|err| format!("handshake: {err}"))?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|err| err.to_string())?;
    tokio::spawn(connection);
    let mut request = hyper::Request::builder().method(method).uri(path).header("host", "localhost");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(Full::new(Bytes::from(body.to_string()))).map_err(|err| err.to_string())?;
    let response = sender.send_request(request).await.map_err(|err| format!("request: {err}"))?;
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.map_err(|err| err.to_string())?.to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

/// A GET as the tenant's admin: the status and the JSON.
async fn get(kube: &FakeKube, bundle: &SecretsBundle, path: &str) -> (u16, Value) {
    let (status, body) = call(kube, admin_tls(bundle), "GET", path, &[], "").await.expect("an answer");
    (status, serde_json::from_str(&body).unwrap_or_else(|err| panic!("{path}: {err}: {body}")))
}

async fn start(bundle: &SecretsBundle) -> FakeKube {
    FakeKube::start(FakeKubeOptions::new(bundle.kubernetes_ca().clone())).await.expect("a fake API")
}

#[tokio::test]
async fn only_clients_of_the_kubernetes_ca_get_in() {
    let (ours, theirs) = (bundle(), bundle());
    let kube = start(&ours).await;
    let none = tls(ours.kubernetes_ca(), None, "");
    assert!(call(&kube, none, "GET", "/version", &[], "").await.is_err(), "no client certificate");
    let other = tls(ours.kubernetes_ca(), Some(theirs.kubernetes_ca()), "admin");
    assert!(call(&kube, other, "GET", "/version", &[], "").await.is_err(), "a certificate of another CA");
    let os = tls(ours.kubernetes_ca(), Some(ours.os_ca()), "admin");
    assert!(
        call(&kube, os, "GET", "/version", &[], "").await.is_err(),
        "the tenant's OS CA is not its Kubernetes CA"
    );
    assert!(kube.requests().is_empty());

    let (status, version) = get(&kube, &ours, "/version").await;
    assert_eq!((status, version["gitVersion"].as_str()), (200, Some("v1.32.0")));
    let requests = kube.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!((requests[0].method.as_str(), requests[0].path.as_str()), ("GET", "/version"));
    assert_eq!(requests[0].client.as_deref(), Some("admin"));
    assert!(kube.endpoint().starts_with("https://127.0.0.1:"), "{}", kube.endpoint());
}

#[tokio::test]
async fn discovery_and_readiness() {
    let bundle = bundle();
    let kube = start(&bundle).await;
    let (_, api) = get(&kube, &bundle, "/api").await;
    assert_eq!(api["versions"], serde_json::json!(["v1"]));
    assert_eq!(api["serverAddressByClientCIDRs"][0]["serverAddress"], kube.addr().to_string());
    let (_, groups) = get(&kube, &bundle, "/apis").await;
    assert_eq!(
        (groups["kind"].as_str(), groups["groups"].as_array().map(Vec::len)),
        (Some("APIGroupList"), Some(0))
    );
    let (_, resources) = get(&kube, &bundle, "/api/v1").await;
    let names: Vec<&str> =
        resources["resources"].as_array().unwrap().iter().filter_map(|r| r["name"].as_str()).collect();
    assert_eq!(names, ["nodes", "pods", "pods/eviction", "events"]);
    let (status, missing) = get(&kube, &bundle, "/openapi/v3").await;
    assert_eq!(
        (status, missing["kind"].as_str(), missing["reason"].as_str()),
        (404, Some("Status"), Some("NotFound"))
    );

    let readyz = |kube: FakeKube, bundle: SecretsBundle| async move {
        call(&kube, admin_tls(&bundle), "GET", "/readyz", &[], "").await.expect("an answer")
    };
    assert_eq!(readyz(kube.clone(), bundle.clone()).await, (200, "ok".to_string()));
    kube.set_api_ready(false);
    let (status, text) = readyz(kube.clone(), bundle.clone()).await;
    assert_eq!(status, 500);
    assert!(text.contains("readyz check failed"), "{text}");
}

#[tokio::test]
async fn nodes_are_listed_cordoned_and_deleted() {
    let bundle = bundle();
    let kube = start(&bundle).await;
    kube.add_node("cp-0", "10.0.0.10".parse().unwrap(), true);
    kube.add_node("w-0", "10.0.0.20".parse().unwrap(), false);
    kube.set_node_ready("w-0", false);

    let (status, list) = get(&kube, &bundle, "/api/v1/nodes").await;
    assert_eq!(
        (status, list["kind"].as_str(), list["apiVersion"].as_str()),
        (200, Some("NodeList"), Some("v1"))
    );
    assert!(list["metadata"]["resourceVersion"].is_string());
    let cp = &list["items"][0];
    assert_eq!(cp["metadata"]["labels"]["node-role.kubernetes.io/control-plane"], "");
    assert_eq!(cp["metadata"]["labels"]["kubernetes.io/hostname"], "cp-0");
    assert_eq!(
        cp["status"]["addresses"][0],
        serde_json::json!({"type": "InternalIP", "address": "10.0.0.10"})
    );
    assert_eq!(cp["status"]["addresses"][1], serde_json::json!({"type": "Hostname", "address": "cp-0"}));
    assert_eq!(cp["status"]["conditions"][0]["status"], "True");
    let worker = &list["items"][1];
    assert!(worker["metadata"]["labels"].get("node-role.kubernetes.io/control-plane").is_none());
    let ready = &worker["status"]["conditions"][0];
    assert_eq!((ready["type"].as_str(), ready["status"].as_str()), (Some("Ready"), Some("False")));
    assert_eq!(ready["reason"], "KubeletNotReady");

    let (status, missing) = get(&kube, &bundle, "/api/v1/nodes/nope").await;
    assert_eq!(
        (status, missing["reason"].as_str(), missing["code"].as_u64()),
        (404, Some("NotFound"), Some(404))
    );

    let cordon = [("content-type", "application/strategic-merge-patch+json")];
    let (status, body) = call(
        &kube,
        admin_tls(&bundle),
        "PATCH",
        "/api/v1/nodes/w-0",
        &cordon,
        r#"{"spec":{"unschedulable":true}}"#,
    )
    .await
    .unwrap();
    assert_eq!(status, 200, "{body}");
    let node: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(node["spec"]["unschedulable"], true);
    let uncordon = [("content-type", "application/merge-patch+json")];
    let patch = r#"{"spec":{"unschedulable":null}}"#;
    let (status, _) =
        call(&kube, admin_tls(&bundle), "PATCH", "/api/v1/nodes/cp-0", &uncordon, patch).await.unwrap();
    assert_eq!(status, 200);
    let (_, node) = get(&kube, &bundle, "/api/v1/nodes/w-0").await;
    assert_eq!(node["spec"]["unschedulable"], true, "the cordon stays");

    let (status, _) = call(&kube, admin_tls(&bundle), "DELETE", "/api/v1/nodes/w-0", &[], "").await.unwrap();
    assert_eq!(status, 200);
    let (status, _) = call(&kube, admin_tls(&bundle), "DELETE", "/api/v1/nodes/w-0", &[], "").await.unwrap();
    assert_eq!(status, 404);
    assert_eq!(kube.deleted_nodes(), ["w-0"]);
    let cp0 = FakeKubeNode {
        name: "cp-0".into(),
        address: "10.0.0.10".parse().unwrap(),
        ready: true,
        unschedulable: false,
        control_plane: true,
        kubelet_version: "v1.32.0".into(),
        provider_id: String::new(),
    };
    assert_eq!(kube.nodes(), [cp0]);
    let methods: Vec<String> =
        kube.requests().into_iter().map(|r| format!("{} {}", r.method, r.path)).collect();
    assert!(methods.contains(&"PATCH /api/v1/nodes/w-0".to_string()), "{methods:?}");
}

#[tokio::test]
async fn the_api_takes_the_cas_a_control_plane_config_names_as_a_rotation_moves_them() {
    let bundle = bundle();
    let kube = start(&bundle).await;
    let (old, new) = (
        bundle.kubernetes_ca().clone(),
        cms_talos::SecretsBundle::generate("1.9.0").unwrap().kubernetes_ca().clone(),
    );
    let answers = |server: &CertificateAuthority, client: &CertificateAuthority| {
        let (kube, config) = (&kube, tls(server, Some(client), "admin"));
        async move { call(kube, config, "GET", "/api/v1/nodes", &[], "").await.map(|(status, _)| status) }
    };
    assert_eq!(answers(&old, &old).await, Ok(200));
    assert!(answers(&old, &new).await.is_err(), "a client of another CA is refused");
    // Accepting: serves from the old CA, takes clients of both.
    kube.trust(&old, &[new.cert_pem().to_string()]).unwrap();
    assert_eq!(answers(&old, &new).await, Ok(200));
    assert_eq!(answers(&old, &old).await, Ok(200));
    // Swapped: serves from the new CA; a client trusting the old one alone fails.
    kube.trust(&new, &[old.cert_pem().to_string()]).unwrap();
    assert!(answers(&old, &old).await.is_err(), "the server is the new CA's");
    assert_eq!(answers(&new, &old).await, Ok(200));
    // Dropped: the old CA's clients are refused.
    kube.trust(&new, &[]).unwrap();
    assert!(answers(&new, &old).await.is_err(), "the old CA's certificate no longer works");
    assert_eq!(answers(&new, &new).await, Ok(200));
}

#[tokio::test]
async fn a_provider_id_is_set_once_as_the_api_server_allows() {
    let bundle = bundle();
    let kube = start(&bundle).await;
    kube.add_node("w-0", "10.0.0.11".parse().unwrap(), true);
    let merge = [("content-type", "application/merge-patch+json")];
    let set = |id: &str| format!(r#"{{"spec":{{"providerID":"{id}"}}}}"#);
    let patch = |body: String| {
        let (kube, bundle) = (&kube, &bundle);
        async move { call(kube, admin_tls(bundle), "PATCH", "/api/v1/nodes/w-0", &merge, &body).await.unwrap() }
    };
    let (_, node) = get(&kube, &bundle, "/api/v1/nodes/w-0").await;
    assert!(node["spec"].get("providerID").is_none(), "a metal node registers without one: {node}");
    let (status, body) = patch(set("metal://10.0.0.11")).await;
    assert_eq!(status, 200, "{body}");
    let (status, _) = patch(set("metal://10.0.0.11")).await;
    assert_eq!(status, 200, "the same value again is no change");
    let (status, body) = patch(set("metal://elsewhere")).await;
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("may not change providerID"), "{body}");
    let (_, node) = get(&kube, &bundle, "/api/v1/nodes/w-0").await;
    assert_eq!(node["spec"]["providerID"], "metal://10.0.0.11");
}

#[tokio::test]
async fn a_disruption_budget_refuses_evictions_until_it_allows_them() {
    let bundle = bundle();
    let kube = start(&bundle).await;
    kube.add_node("w-0", LOCAL, false);
    kube.add_pod("default", "web-1", "w-0", PodKind::Plain);
    kube.add_pod("kube-system", "kube-proxy-x7k2p", "w-0", PodKind::DaemonSet);
    kube.add_pod("kube-system", "kube-apiserver-w-0", "w-0", PodKind::Mirror);
    kube.add_pod("default", "web-2", "w-1", PodKind::Plain);
    kube.block_evictions("default", "web-1", 2);

    let (status, list) = get(&kube, &bundle, "/api/v1/pods?fieldSelector=spec.nodeName%3Dw-0").await;
    assert_eq!((status, list["kind"].as_str()), (200, Some("PodList")));
    let pods = list["items"].as_array().unwrap();
    let names: Vec<&str> = pods.iter().filter_map(|pod| pod["metadata"]["name"].as_str()).collect();
    assert_eq!(names, ["web-1", "kube-apiserver-w-0", "kube-proxy-x7k2p"]);
    let proxy = &pods[2]["metadata"]["ownerReferences"][0];
    assert_eq!(
        (proxy["kind"].as_str(), proxy["name"].as_str(), proxy["controller"].as_bool()),
        (Some("DaemonSet"), Some("kube-proxy"), Some(true))
    );
    assert!(pods[1]["metadata"]["annotations"]["kubernetes.io/config.mirror"].is_string());
    let (_, default) = get(&kube, &bundle, "/api/v1/namespaces/default/pods").await;
    assert_eq!(default["items"].as_array().map(Vec::len), Some(2));
    let (status, pod) = get(&kube, &bundle, "/api/v1/namespaces/default/pods/web-2").await;
    assert_eq!((status, pod["spec"]["nodeName"].as_str()), (200, Some("w-1")));

    let eviction =
        r#"{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"web-1","namespace":"default"}}"#;
    let json = [("content-type", "application/json")];
    let evict = |name: &'static str| {
        let (kube, tls) = (kube.clone(), admin_tls(&bundle));
        async move {
            let path = format!("/api/v1/namespaces/default/pods/{name}/eviction");
            call(&kube, tls, "POST", &path, &json, eviction).await.expect("an answer")
        }
    };
    for _ in 0..2 {
        let (status, body) = evict("web-1").await;
        assert_eq!(status, 429, "{body}");
        let refusal: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(refusal["reason"], "TooManyRequests");
        assert_eq!(refusal["message"], "Cannot evict pod as it would violate the pod's disruption budget.");
    }
    assert!(kube.evictions().is_empty());
    assert_eq!(evict("web-1").await.0, 201);
    assert_eq!(evict("web-1").await.0, 404, "the pod is gone");
    assert_eq!(kube.evictions(), ["default/web-1"]);
    let left: Vec<String> = kube.pods().into_iter().map(|pod| pod.name).collect();
    assert_eq!(left, ["web-2", "kube-apiserver-w-0", "kube-proxy-x7k2p"]);
    let proxy = FakePod {
        namespace: "kube-system".into(),
        name: "kube-proxy-x7k2p".into(),
        node: "w-0".into(),
        kind: PodKind::DaemonSet,
    };
    assert!(kube.pods().contains(&proxy));
}

#[tokio::test]
async fn fake_nodes_register_once_configured_and_the_api_waits_for_etcd() {
    let bundle = bundle();
    let etcd = FakeEtcd::default();
    let kube = FakeKube::start(FakeKubeOptions::new(bundle.kubernetes_ca().clone()).etcd(etcd.clone()))
        .await
        .expect("a fake API");
    let options = FakeNodeOptions::new(bundle.os_ca().clone()).hostname("cp-0").etcd(etcd).kube(kube.clone());
    let node = FakeNode::start(options).await.expect("a fake node");

    let (status, down) = get(&kube, &bundle, "/api/v1/nodes").await;
    assert_eq!((status, down["kind"].as_str(), down["code"].as_u64()), (503, Some("Status"), Some(503)));
    let (status, text) = call(&kube, admin_tls(&bundle), "GET", "/readyz", &[], "").await.unwrap();
    assert!(status == 500 && text.contains("etcd"), "{status} {text}");

    let config = b"version: v1alpha1\nmachine:\n  type: controlplane\n".to_vec();
    let apply = ApplyRequest { config, mode: ApplyMode::Auto, dry_run: false };
    client().apply_configuration(&target(&node), &admin(&bundle), apply).await.expect("applied");
    let registered = FakeKubeNode {
        name: "cp-0".into(),
        address: LOCAL,
        ready: true,
        unschedulable: false,
        control_plane: true,
        kubelet_version: "v1.32.0".into(),
        provider_id: String::new(),
    };
    assert_eq!(kube.nodes(), std::slice::from_ref(&registered));
    client()
        .bootstrap(&target(&node), &admin(&bundle), BootstrapRequest::default())
        .await
        .expect("bootstrapped");
    let members = client().etcd_member_list(&target(&node), &admin(&bundle)).await.expect("the members");
    assert_eq!(members[0].peer_urls, ["https://127.0.0.1:2380"]);
    assert_eq!(members[0].client_urls, ["https://127.0.0.1:2379"]);
    assert_eq!(members[0].hostname, "cp-0");

    let (status, list) = get(&kube, &bundle, "/api/v1/nodes").await;
    assert_eq!((status, list["items"][0]["metadata"]["name"].as_str()), (200, Some("cp-0")));

    let reset = ResetRequest { graceful: true, reboot: true, wipe: WipeMode::All };
    client().reset(&target(&node), &admin(&bundle), reset).await.expect("reset");
    assert_eq!(kube.nodes(), [FakeKubeNode { ready: false, ..registered }]);
    let (_, node_json) = get(&kube, &bundle, "/api/v1/nodes/cp-0").await;
    assert_eq!(node_json["status"]["conditions"][0]["reason"], "KubeletNotReady");

    let handle = kube.clone();
    kube.stop();
    let stopped = call(&handle, admin_tls(&bundle), "GET", "/version", &[], "").await;
    assert!(stopped.is_err(), "stopped, though the node holds a clone: {stopped:?}");
}

#[tokio::test]
async fn the_api_serves_until_its_last_clone_goes() {
    let bundle = bundle();
    let kube = start(&bundle).await;
    let clone = kube.clone();
    drop(kube);
    assert_eq!(get(&clone, &bundle, "/version").await.0, 200);
    let addr = clone.addr();
    drop(clone);
    tokio::task::yield_now().await;
    let refused = match TcpStream::connect(addr).await {
        Err(_) => true,
        Ok(mut tcp) => {
            use tokio::io::AsyncReadExt;
            let mut byte = [0u8; 1];
            matches!(tcp.read(&mut byte).await, Ok(0) | Err(_))
        }
    };
    assert!(refused, "nothing answers on {addr}");
}

#[tokio::test]
async fn events_are_written_as_components_write_them_and_paged() {
    let bundle = bundle();
    let kube = start(&bundle).await;
    kube.add_node("w-1", "10.0.0.2".parse().unwrap(), false);
    kube.set_node_ready("w-1", false);
    let (status, list) = get(&kube, &bundle, "/api/v1/events").await;
    assert_eq!(status, 200);
    assert_eq!(list["kind"], "EventList");
    let reasons: Vec<&str> =
        list["items"].as_array().unwrap().iter().filter_map(|e| e["reason"].as_str()).collect();
    assert_eq!(reasons.len(), 4);
    for reason in ["Starting", "RegisteredNode", "NodeReady", "NodeNotReady"] {
        assert!(reasons.contains(&reason), "{reasons:?}");
    }
    let event = &list["items"][0];
    assert_eq!(event["metadata"]["namespace"], "default");
    assert_eq!(event["involvedObject"]["kind"], "Node");
    assert_eq!(event["involvedObject"]["name"], "w-1");
    assert!(event["lastTimestamp"].is_string() && event["source"]["component"].is_string(), "{event}");

    let (_, first) = get(&kube, &bundle, "/api/v1/namespaces/default/events?limit=3").await;
    assert_eq!(first["items"].as_array().map(Vec::len), Some(3));
    assert_eq!(first["metadata"]["remainingItemCount"], 1);
    let token = first["metadata"]["continue"].as_str().expect("a continue token").replace('/', "%2F");
    let (_, rest) =
        get(&kube, &bundle, &format!("/api/v1/namespaces/default/events?limit=3&continue={token}")).await;
    assert_eq!(rest["items"].as_array().map(Vec::len), Some(1));
    assert!(rest["metadata"]["continue"].is_null());
    let (_, other) = get(&kube, &bundle, "/api/v1/namespaces/web/events").await;
    assert_eq!(other["items"].as_array().map(Vec::len), Some(0));
    let (status, _) = get(&kube, &bundle, "/api/v1/events?limit=x").await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn new_cas_restart_the_api_server_and_close_open_connections() {
    let bundle = bundle();
    let kube = start(&bundle).await;
    let ca = bundle.kubernetes_ca().clone();
    let other = cms_talos::SecretsBundle::generate("1.9.0").unwrap().kubernetes_ca().clone();
    let open = || async {
        let tcp = TcpStream::connect(kube.addr()).await.unwrap();
        let stream = TlsConnector::from(admin_tls(&bundle))
            .connect(ServerName::from(kube.addr().ip()), tcp)
            .await
            .expect("a handshake");
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
        tokio::spawn(connection);
        sender
    };
    let ask = |sender: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>| {
        let request = hyper::Request::get("/api/v1/nodes").header("host", "localhost").body(Full::default());
        let sent = sender.send_request(request.unwrap());
        async move { sent.await.map(|response| response.status().as_u16()).map_err(|err| err.to_string()) }
    };
    let mut sender = open().await;
    assert_eq!(ask(&mut sender).await, Ok(200));
    // The same CAs again: nothing restarts.
    kube.trust(&ca, &[]).unwrap();
    kube.trust(&ca, &[]).unwrap();
    assert_eq!(ask(&mut sender).await, Ok(200), "the connection stays open");
    // Another accepted CA: the API server restarts and the connection ends.
    kube.trust(&ca, &[other.cert_pem().to_string()]).unwrap();
    let closing = async {
        while !sender.is_closed() {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), closing).await.expect("the connection closes");
    assert!(ask(&mut sender).await.is_err());
    let mut fresh = open().await;
    assert_eq!(ask(&mut fresh).await, Ok(200), "a new connection gets in");
}

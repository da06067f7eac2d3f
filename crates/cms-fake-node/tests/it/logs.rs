//! A node's logs from the real client: a service's log read whole, tailed
//! and followed past the client's timeout, a log the node never kept
//! refused as Talos refuses it, the kernel's buffer, the services with
//! their state, and the lines a node writes as things happen to it.

use std::time::Duration;

use cms_fake_node::{FakeNode, FakeNodeOptions, Method, Payload};
use cms_nodeapi::{
    ApplyMode, ApplyRequest, BootstrapRequest, LogStream, LogsRequest, NodeApi, NodeApiError,
    TalosNodeClient, UpgradeRequest,
};
use cms_talos::SecretsBundle;
use futures_util::StreamExt;

use crate::{admin, bundle, client, installer_image, target};

async fn configured(bundle: &SecretsBundle, machine_type: &str) -> FakeNode {
    let options = FakeNodeOptions::new(bundle.os_ca().clone()).log_interval(Duration::from_millis(50));
    let node = FakeNode::start(options).await.expect("a fake node");
    let config = format!("version: v1alpha1\nmachine:\n  type: {machine_type}\n").into_bytes();
    let apply = ApplyRequest { config, mode: ApplyMode::Auto, dry_run: false };
    client().apply_configuration(&target(&node), &admin(bundle), apply).await.expect("configured");
    node
}

fn request(service: &str, follow: bool, tail_lines: Option<u32>) -> LogsRequest {
    LogsRequest { service: service.into(), follow, tail_lines }
}

/// Everything a stream that ends sends, as text.
async fn whole(mut stream: LogStream) -> String {
    let mut text = Vec::new();
    while let Some(chunk) = stream.next().await {
        text.extend(chunk.expect("a chunk"));
    }
    String::from_utf8(text).expect("text")
}

/// Reads a followed stream until a line satisfies `wanted`; gives the text so far.
async fn until(stream: &mut LogStream, wanted: impl Fn(&str) -> bool) -> String {
    let mut text = String::new();
    loop {
        let chunk = stream.next().await.expect("the stream goes on").expect("a chunk");
        text.push_str(std::str::from_utf8(&chunk).expect("text"));
        if text.lines().any(&wanted) {
            return text;
        }
    }
}

/// The tick number of a periodic line, such as `... kubelet is running (tick 7)`.
fn tick(line: &str) -> Option<u64> {
    line.strip_suffix(')')?.rsplit_once("(tick ")?.1.parse().ok()
}

#[tokio::test]
async fn a_service_log_is_read_whole_tailed_and_followed_past_the_client_timeout() {
    let bundle = bundle();
    let node = configured(&bundle, "controlplane").await;
    let (target, admin) = (target(&node), admin(&bundle));

    let log = whole(client().logs(&target, &admin, request("machined", false, None)).await.unwrap()).await;
    let first = log.lines().next().expect("a line");
    // machined's own time stamp: `2026/01/02 15:04:05.000000 [talos] ...`.
    assert_eq!((&first[4..5], &first[10..11], &first[26..35]), ("/", " ", " [talos] "), "{first}");
    assert!(first.ends_with("booting Talos v1.14.0"), "{log}");
    assert!(log.contains("[talos] applied machine configuration (type controlplane)"), "{log}");

    // A log no running service writes to, so that nothing comes between.
    for line in ["one", "two", "three"] {
        node.log("installer", line);
    }
    let tail =
        whole(client().logs(&target, &admin, request("installer", false, Some(2))).await.unwrap()).await;
    let ends: Vec<&str> = tail.lines().map(|line| line.rsplit(' ').next().unwrap_or_default()).collect();
    assert_eq!(ends, ["two", "three"], "{tail}");
    let Some(Payload::Logs(sent)) = node.calls().last().map(|call| call.payload.clone()) else {
        panic!("{:?}", node.calls())
    };
    assert_eq!(
        (sent.namespace.as_str(), sent.id.as_str(), sent.driver, sent.tail_lines),
        ("system", "installer", 0, 2)
    );

    // The client gives up on a call after 300 ms; a followed log goes on.
    let short = TalosNodeClient::new(Duration::from_millis(300));
    let mut stream = short.logs(&target, &admin, request("kubelet", true, Some(0))).await.unwrap();
    assert_eq!(node.log_followers(), 1);
    node.log("kubelet", "a line written after the call");
    let text = until(&mut stream, |line| line.ends_with("a line written after the call")).await;
    assert!(!text.contains("kubelet started"), "tail 0 sends nothing kept: {text}");
    let seen = until(&mut stream, |line| tick(line).is_some()).await;
    let from = seen.lines().find_map(tick).expect("a tick");
    // Twenty ticks of 50 ms: well past the client's 300 ms.
    until(&mut stream, |line| tick(line).is_some_and(|n| n >= from + 20)).await;
    drop(stream);
    while node.log_followers() > 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_log_the_node_never_kept_is_refused_as_talos_refuses_it() {
    let bundle = bundle();
    let node = configured(&bundle, "worker").await;
    let (target, admin) = (target(&node), admin(&bundle));
    for service in ["etcd", "no-such-service"] {
        let err = client().logs(&target, &admin, request(service, false, None)).await.err().expect("refused");
        assert!(err.is_unknown_log(), "{err:?}");
        let NodeApiError::Status { status, .. } = &err else { panic!("{err:?}") };
        assert_eq!(status.message(), format!("log {service:?} was not registered"));
    }
    let other = client().logs(&target, &admin, request("apid", false, None)).await.expect("apid keeps a log");
    assert!(!whole(other).await.is_empty());
}

#[tokio::test]
async fn the_kernel_buffer_is_read_and_followed() {
    let bundle = bundle();
    let node = configured(&bundle, "worker").await;
    let (target, admin) = (target(&node), admin(&bundle));
    let kernel = whole(client().dmesg(&target, &admin, false).await.unwrap()).await;
    let first = kernel.lines().next().expect("a line");
    assert!(
        first.starts_with("kern:    info: [")
            && first.ends_with("]: Linux version 6.12.0-talos (fake-node) #1 SMP"),
        "{first}"
    );
    let mut stream = client().dmesg(&target, &admin, true).await.unwrap();
    let text = until(&mut stream, |line| line.starts_with("kern:") && tick(line).is_some()).await;
    assert!(text.contains("Command line: "), "the kept lines come first: {text}");
    assert_eq!(node.calls().iter().filter(|call| call.method == Method::Dmesg).count(), 2);
}

#[tokio::test]
async fn services_show_their_state_and_the_log_says_what_happened() {
    let bundle = bundle();
    let node = configured(&bundle, "controlplane").await;
    let (target, admin) = (target(&node), admin(&bundle));
    let state = |services: &[cms_nodeapi::ServiceInfo], id: &str| {
        let service = services.iter().find(|service| service.id == id).unwrap_or_else(|| panic!("{id}"));
        (service.state.clone(), service.healthy)
    };
    let services = client().service_list(&target, &admin).await.unwrap();
    let ids: Vec<&str> = services.iter().map(|service| service.id.as_str()).collect();
    assert_eq!(ids, ["apid", "containerd", "cri", "etcd", "kubelet", "machined", "trustd", "udevd"]);
    assert_eq!(state(&services, "machined"), ("Running".into(), None), "machined's health is unknown");
    assert_eq!(state(&services, "etcd"), ("Preparing".into(), Some(false)));

    client().bootstrap(&target, &admin, BootstrapRequest::default()).await.unwrap();
    let services = client().service_list(&target, &admin).await.unwrap();
    assert_eq!(state(&services, "etcd"), ("Running".into(), Some(true)));
    let etcd = whole(client().logs(&target, &admin, request("etcd", false, None)).await.unwrap()).await;
    assert!(etcd.contains(" etcd bootstrapped: a new cluster\n"), "{etcd}");

    let image = installer_image("1.14.1");
    let upgrade = UpgradeRequest { image: image.clone(), preserve: true, stage: false, force: false };
    client().upgrade(&target, &admin, upgrade).await.unwrap();
    let mut stream = loop {
        // Down while it reboots; then it answers again.
        match client().logs(&target, &admin, request("machined", true, None)).await {
            Ok(stream) => break stream,
            Err(err) if err.is_unreachable() => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(err) => panic!("{err:?}"),
        }
    };
    let log = until(&mut stream, |line| line.ends_with("[talos] booting Talos v1.14.1")).await;
    let upgrade = log.find(&format!("upgrade request received: installer image {image}")).expect(&log);
    let reboot = log.find("[talos] rebooting into v1.14.1").expect(&log);
    assert!(upgrade < reboot, "{log}");
}

#[tokio::test]
async fn a_node_in_maintenance_mode_says_so() {
    let bundle = bundle();
    let node = FakeNode::start(FakeNodeOptions::new(bundle.os_ca().clone()).maintenance()).await.unwrap();
    let maintenance = cms_nodeapi::NodeCredentials::maintenance();
    let log = client().logs(&target(&node), &maintenance, request("machined", false, None)).await.unwrap();
    assert!(whole(log).await.contains("[talos] entering maintenance mode"));
    let services = client().service_list(&target(&node), &maintenance).await.unwrap();
    let ids: Vec<&str> = services.iter().map(|service| service.id.as_str()).collect();
    assert_eq!(ids, ["apid", "machined", "udevd"]);
}

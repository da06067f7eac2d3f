//! The builder against a real store and mocked node and Kubernetes clients.

use std::collections::BTreeMap;
use std::io::{Cursor, Read};
use std::sync::Arc;

use chrono::Utc;
use cms_model::{Kind, ToolCommand, ToolRun};
use cms_store::{Draft, Key, SqlStore, Store, StoreOptions};
use cms_tenancy::{KubeEvent, KubeNode, LogChunks, MockKubeClient, MockNodeClient, NodeError, ServiceInfo};
use futures_util::StreamExt;
use serde_json::json;

use super::*;

const KEY: &str = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5oEPRcgpW+8KJ\n-----END EC PRIVATE KEY-----\n";

/// A store with tenant `acme`: one group, one patch, machines `cp-0` and
/// `w-0` with addresses and `w-1` without, and a recorded apply.
/// A registry password a config patch holds.
const REGISTRY_PASSWORD: &str = "registry-pa55word-of-acme";

async fn store() -> (Arc<dyn Store>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("cms.db").display());
    let store: Arc<dyn Store> = SqlStore::open(&StoreOptions::new(url)).await.unwrap();
    let group = json!({"name": "w", "role": "worker", "count": 2, "providerClass": "metal:bare",
        "providerConfig": {"hosts": [{"address": "10.0.0.2"}]}, "configPatches": []});
    let spec = json!({"kubernetesVersion": "1.32.0", "nodeGroups": [group]});
    store.create(Key::tenant("acme"), Draft { spec, ..Draft::default() }).await.unwrap();
    let registry =
        json!({"registry.example.com": {"auth": {"username": "robot", "password": REGISTRY_PASSWORD}}});
    let patch = json!({"format": "strategic", "target": "worker", "patches": [
        {"machine": {"network": {"hostname": "x", "mtu": 1400}, "registries": {"config": registry}}}]});
    let patch = Draft { spec: patch, ..Draft::default() };
    store.create(Key::child(Kind::ConfigPatch, "acme", "hostname"), patch).await.unwrap();
    for (id, address) in [("cp-0", Some("10.0.0.1:50000")), ("w-0", Some("10.0.0.2:50000")), ("w-1", None)] {
        let spec = json!({"connected": true, "managementAddress": address});
        let status = json!({"stage": "ready", "ready": true, "role": "worker"});
        let draft = Draft { spec, status: Some(status), ..Draft::default() };
        store.create(Key::child(Kind::Machine, "acme", id), draft).await.unwrap();
    }
    let run = ToolRun {
        command: ToolCommand::Apply,
        succeeded: true,
        status: "exit code 0".into(),
        finished_at: Utc::now(),
        output: format!("Apply complete! Resources: 3 added.\n{KEY}"),
        truncated: false,
    };
    store.set_tool_run("acme".into(), run).await.unwrap();
    (store, dir)
}

fn chunks(pieces: Vec<String>) -> LogChunks {
    Box::pin(futures_util::stream::iter(pieces.into_iter().map(|piece| Ok(piece.into_bytes()))))
}

fn service(id: &str) -> ServiceInfo {
    ServiceInfo {
        id: id.into(),
        state: "Running".into(),
        healthy: Some(true),
        last_message: "Health check successful".into(),
    }
}

/// Nodes: `cp-0` answers everything (its logs hold a key split across
/// pieces); `w-0` answers no `Version` and keeps no etcd log.
fn nodes() -> MockNodeClient {
    let mut nodes = MockNodeClient::new();
    nodes.expect_version().returning(|node| match node.machine.as_str() {
        "cp-0" => Ok("v1.9.6".into()),
        _ => Err(NodeError::Unsupported("Version")),
    });
    nodes.expect_services().returning(|_| Ok(vec![service("machined"), service("etcd")]));
    nodes.expect_logs().returning(|node, request| {
        assert_eq!((request.follow, request.tail_lines), (false, Some(2000)));
        match (node.machine.as_str(), request.service.as_str()) {
            ("w-0", "etcd") => Err(NodeError::Unsupported("Logs")),
            (machine, service) => {
                let (head, tail) = KEY.split_at(40);
                Ok(chunks(vec![format!("{machine} {service} started\n{head}"), format!("{tail}ready\n")]))
            }
        }
    });
    nodes.expect_dmesg().returning(|node, follow| {
        assert!(!follow);
        Ok(chunks(vec![format!("[0.000000] Linux version 6.12 on {}\n", node.machine)]))
    });
    nodes
}

fn kube() -> MockKubeClient {
    let mut kube = MockKubeClient::new();
    kube.expect_nodes().returning(|_| {
        Ok(vec![KubeNode {
            name: "cp-0".into(),
            ready: true,
            addresses: vec!["10.0.0.1".into()],
            ..KubeNode::default()
        }])
    });
    kube.expect_events().returning(|_, limit| {
        assert_eq!(limit, 500);
        Ok(vec![KubeEvent { reason: "NodeReady".into(), object: "Node/cp-0".into(), ..KubeEvent::default() }])
    });
    kube
}

/// The whole bundle, read as a client would, and its entries by name.
async fn read(stream: BundleStream) -> (usize, BTreeMap<String, String>) {
    let pieces: Vec<_> = stream.collect().await;
    let bytes: Vec<u8> = pieces.into_iter().flat_map(|piece| piece.expect("a piece").to_vec()).collect();
    let size = bytes.len();
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes)).expect("a zip");
    let mut entries = BTreeMap::new();
    for index in 0..zip.len() {
        let mut file = zip.by_index(index).unwrap();
        let mut text = String::new();
        file.read_to_string(&mut text).unwrap();
        entries.insert(file.name().unwrap().to_string(), text);
    }
    (size, entries)
}

#[tokio::test]
async fn a_bundle_holds_every_part_and_says_what_it_could_not_read() {
    let (store, _dir) = store().await;
    let sources =
        Sources { store, secrets: None, nodes: Some(Arc::new(nodes())), kube: Some(Arc::new(kube())) };
    let (_, entries) = read(support_bundle(sources, "acme", SupportOptions::default()).unwrap()).await;
    let names: Vec<&str> = entries.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "configpatches/hostname.json",
            "errors.txt",
            "kubernetes/events.json",
            "kubernetes/nodes.json",
            "machines/cp-0/dmesg.log",
            "machines/cp-0/logs/etcd.log",
            "machines/cp-0/logs/machined.log",
            "machines/cp-0/machine.json",
            "machines/cp-0/services.json",
            "machines/cp-0/version.txt",
            "machines/w-0/dmesg.log",
            "machines/w-0/logs/machined.log",
            "machines/w-0/machine.json",
            "machines/w-0/services.json",
            "machines/w-1/machine.json",
            "node-groups/w.json",
            "tenant.json",
            "tool/apply.log",
            "tool/plan.log",
        ]
    );
    assert_eq!(entries["machines/cp-0/version.txt"], "v1.9.6\n");
    // A config patch keeps its shape, its metadata and target, not its strings.
    let patch: serde_json::Value = serde_json::from_str(&entries["configpatches/hostname.json"]).unwrap();
    assert_eq!(
        (&patch["metadata"]["name"], &patch["spec"]["target"], &patch["spec"]["patches"]),
        (
            &json!("hostname"),
            &json!("worker"),
            &json!([{"machine": {"network": {"hostname": "[REDACTED]", "mtu": 1400}, "registries": {"config": {
                "registry.example.com": {"auth": {"username": "[REDACTED]", "password": "[REDACTED]"}}}}}}])
        )
    );
    let tenant: serde_json::Value = serde_json::from_str(&entries["tenant.json"]).unwrap();
    let hosts = &tenant["spec"]["nodeGroups"][0]["providerConfig"]["hosts"];
    assert_eq!(hosts, &json!([{"address": "[REDACTED]"}]), "a provider's settings lose their strings");
    for (name, text) in &entries {
        assert!(!text.contains(REGISTRY_PASSWORD), "{name} holds the registry password");
    }
    assert_eq!(
        entries["machines/cp-0/logs/etcd.log"],
        "cp-0 etcd started\n[REDACTED]\n[REDACTED]\n[REDACTED]\nready\n"
    );
    assert!(entries["machines/w-0/dmesg.log"].contains("Linux version 6.12 on w-0"));
    let services: serde_json::Value = serde_json::from_str(&entries["machines/cp-0/services.json"]).unwrap();
    assert_eq!(
        services[1],
        json!({"id": "etcd", "state": "Running", "healthy": true, "lastMessage": "Health check successful"})
    );
    let tenant: serde_json::Value = serde_json::from_str(&entries["tenant.json"]).unwrap();
    assert_eq!(tenant["metadata"]["name"], "acme");
    assert!(tenant["status"].is_object(), "with its status");
    assert!(entries["kubernetes/events.json"].contains("NodeReady"));
    assert!(entries["kubernetes/nodes.json"].contains("10.0.0.1"));
    let apply = &entries["tool/apply.log"];
    assert!(apply.starts_with("command: apply\nstatus: exit code 0\nsucceeded: true\n"), "{apply}");
    assert!(apply.contains("Apply complete! Resources: 3 added.\n[REDACTED]"), "{apply}");
    assert_eq!(entries["tool/plan.log"], "no plan of this tenant has been recorded\n");
    let errors: Vec<&str> = entries["errors.txt"].lines().collect();
    assert_eq!(
        errors[..2],
        [
            "machines/w-0/version.txt: this node client does not make Version",
            "machines/w-0/logs/etcd.log: this node client does not make Logs",
        ]
    );
    assert!(
        errors[2].starts_with("machines/w-1: ") && errors[2].contains("no management address"),
        "{errors:?}"
    );
    assert_eq!(errors.len(), 3);
    for (name, text) in &entries {
        assert!(!text.contains("MHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5oEPRcgpW"), "{name} holds the key");
    }
}

#[tokio::test]
async fn the_bound_cuts_the_content_and_says_so() {
    let (store, _dir) = store().await;
    let mut nodes = MockNodeClient::new();
    nodes.expect_version().returning(|_| Ok("v1.9.6".into()));
    nodes.expect_services().returning(|_| Ok(vec![service("machined")]));
    let line = format!("{}\n", "x".repeat(99));
    nodes.expect_logs().returning(move |_, _| Ok(chunks(vec![line.clone(); 1000])));
    nodes.expect_dmesg().returning(|_, _| Ok(chunks(vec!["kernel\n".into()])));
    let sources = Sources { store, secrets: None, nodes: Some(Arc::new(nodes)), kube: None };
    let options = SupportOptions { max_bytes: 60_000, log_bytes: 50_000, ..SupportOptions::default() };
    let (_, entries) = read(support_bundle(sources, "acme", options).unwrap()).await;
    let log = &entries["machines/cp-0/logs/machined.log"];
    assert!(log.ends_with("\n[cut at 50000 bytes]\n"), "one log is cut at its own bound");
    assert!(entries.contains_key("TRUNCATED.txt"), "{:?}", entries.keys());
    let content: usize = entries
        .iter()
        .filter(|(name, _)| !matches!(name.as_str(), "TRUNCATED.txt" | "errors.txt"))
        .map(|(_, text)| text.len())
        .sum();
    assert!(content <= 60_000, "{content} bytes of content");
    assert!(!entries.contains_key("machines/w-0/dmesg.log"), "nothing is asked once the bound is reached");
    assert!(entries["errors.txt"].contains("kubernetes: this server has no Kubernetes client"));
}

#[tokio::test]
async fn a_missing_tenant_has_no_bundle_and_names_are_safe() {
    let (store, _dir) = store().await;
    let sources = Sources { store, secrets: None, nodes: None, kube: None };
    assert!(matches!(
        support_bundle(sources, "nobody", SupportOptions::default()),
        Err(TenancyError::NotFound(_))
    ));
    assert_eq!(bundle::safe("../etc/passwd"), ".._etc_passwd");
    assert_eq!(bundle::safe(".."), "__");
    let at = chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 1, 2, 3, 4, 5).unwrap();
    assert_eq!(bundle_file_name("acme", at), "acme-support-20260102T030405Z.zip");
}

#[tokio::test]
async fn the_tenants_own_secret_values_are_replaced_wherever_they_appear() {
    let (store, _dir) = store().await;
    let sealer = cms_talos::Sealer::new(cms_talos::SealingKey::generate("test").unwrap());
    let options = cms_tenancy::SecretsOptions { key_pool: 0, ..cms_tenancy::SecretsOptions::default() };
    let secrets = cms_tenancy::Secrets::new(sealer, options).unwrap();
    let tenancy = cms_tenancy::Tenancy::new(store.clone(), secrets.clone());
    let tenant = r#"{"metadata":{"name":"keys"},"spec":{"kubernetesVersion":"1.32.0"}}"#;
    tenancy.create_tenant(cms_model::parse_json(tenant.as_bytes()).unwrap()).await.unwrap();
    let bundle = secrets.open(store.as_ref(), "keys").await.unwrap();
    use secrecy::ExposeSecret;
    let token = bundle.bootstrap_token().expose_secret().to_string();
    let trustd = bundle.trustd_token().expose_secret().to_string();
    let machine = json!({"connected": true, "managementAddress": "10.0.0.9:50000"});
    let draft = Draft { spec: machine, ..Draft::default() };
    store.create(Key::child(Kind::Machine, "keys", "cp-0"), draft).await.unwrap();
    let mut nodes = MockNodeClient::new();
    nodes.expect_version().returning(|_| Ok("v1.9.6".into()));
    nodes.expect_services().returning(|_| Ok(vec![service("kubelet")]));
    let line = format!("joining with token {token} (trustd {trustd})\n");
    nodes.expect_logs().returning(move |_, _| Ok(chunks(vec![line.clone()])));
    nodes.expect_dmesg().returning(|_, _| Ok(chunks(Vec::new())));
    let sources = Sources { store, secrets: Some(secrets), nodes: Some(Arc::new(nodes)), kube: None };
    let (_, entries) = read(support_bundle(sources, "keys", SupportOptions::default()).unwrap()).await;
    assert_eq!(
        entries["machines/cp-0/logs/kubelet.log"],
        "joining with token [REDACTED] (trustd [REDACTED])\n"
    );
    for (name, text) in &entries {
        assert!(!text.contains(&token) && !text.contains(&trustd), "{name}");
    }
}

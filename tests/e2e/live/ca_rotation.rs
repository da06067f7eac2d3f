//! A rotation of a tenant's OS and Kubernetes CAs on metal with fake
//! nodes, 3 control planes and workers (`docs/ca-rotation.md`): each
//! phase's config reaches every node in order, control planes first, once;
//! the tenant stays ready and healthy throughout; downloads follow the
//! phases as the docs say; and a `kill -9` while configs go out does not
//! skip or repeat a node.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use cms_e2e::Api;
use cms_e2e::Watch;
use cms_fake_node::Method;
use cms_nodeapi::{NodeApi, NodeCredentials, NodeTarget, TalosNodeClient};
use secrecy::SecretString;
use serde_json::{Value, json};

use super::Live;
use crate::provisioning::{CONVERGE, Engine, converged, eventually};

/// The text of a base64 field of a download.
fn decoded(field: &Value) -> String {
    let bytes = STANDARD.decode(field.as_str().expect("a base64 field")).expect("base64");
    String::from_utf8(bytes).expect("PEM text")
}

/// The current context of the talosconfig `yaml`.
fn talos_context(yaml: &str) -> Value {
    let config: Value = serde_saphyr::from_str(yaml).expect("a talosconfig");
    config["contexts"][config["context"].as_str().expect("a context")].clone()
}

/// Whether the talosconfig `yaml` gets an answer from every node.
async fn talosconfig_works(live: &Live, yaml: &str) -> Vec<bool> {
    let context = talos_context(yaml);
    let key = SecretString::from(decoded(&context["key"]));
    let credentials = NodeCredentials::from_pem(&decoded(&context["ca"]), &decoded(&context["crt"]), &key)
        .expect("usable credentials");
    let client = TalosNodeClient::new(Duration::from_secs(5));
    let mut answers = Vec::new();
    for node in &live.cluster.nodes {
        let target = NodeTarget::parse(&node.node.addr().to_string()).unwrap();
        answers.push(client.version(&target, &credentials).await.is_ok());
    }
    answers
}

/// Whether the real `kubectl` lists the Nodes with the kubeconfig `yaml`.
#[allow(clippy::disallowed_methods)] // The real kubectl reads the downloaded file.
fn kubectl_works(dir: &Path, name: &str, yaml: &str) -> bool {
    let file = dir.join(name);
    std::fs::write(&file, yaml).expect("the kubeconfig is saved");
    let kubectl = std::env::var_os("CMS_KUBECTL").unwrap_or_else(|| "/usr/bin/kubectl".into());
    assert!(Path::new(&kubectl).exists(), "kubectl is required (set CMS_KUBECTL to use another path)");
    let output = std::process::Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(&file)
        .args(["get", "nodes", "-o", "name", "--request-timeout=5s"])
        .env_remove("KUBECONFIG")
        .output()
        .expect("kubectl runs");
    output.status.success()
}

async fn download(api: &Api, tenant: &str, what: &str) -> String {
    let reply = api.get(&format!("/api/v1/tenants/{tenant}/{what}")).await;
    assert_eq!(reply.status, 200, "{what}: {}", reply.body);
    reply.body
}

/// The rotation's phase in the tenant's status.
async fn phase(live: &Live) -> String {
    live.tenant().await["status"]["caRotation"]["phase"].as_str().unwrap_or_default().to_string()
}

/// The machine's `machine.ca.crt` and `machine.acceptedCAs[].crt` as PEM
/// texts, from the config `yaml`.
fn os_cas(yaml: &str) -> (String, Vec<String>) {
    let documents: Vec<Value> = serde_saphyr::from_multiple(yaml).expect("a machine config");
    let v1 = documents.iter().find(|doc| doc["version"] == "v1alpha1").expect("a v1alpha1 document");
    let ca = decoded(&v1["machine"]["ca"]["crt"]);
    let accepted = v1["machine"]["acceptedCAs"].as_array().cloned().unwrap_or_default();
    (ca, accepted.iter().map(|ca| decoded(&ca["crt"])).collect())
}

/// Polls the tenant, its machines and its health while a rotation goes,
/// keeping what was wrong.
fn watch_health(live: &Live, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Vec<String>> {
    let api = live.api();
    let name = live.name.clone();
    tokio::spawn(async move {
        let mut wrong = Vec::new();
        while !stop.load(Ordering::SeqCst) {
            let tenant = api.get(&format!("/api/v1/tenants/{name}")).await.json();
            if tenant["status"]["ready"] != true {
                wrong.push(format!("not ready: {}", tenant["status"]["message"]));
            }
            let health = api.get(&format!("/api/v1/tenants/{name}/health")).await.json();
            if health["reachable"] != true || health.get("error").is_some() {
                wrong.push(format!("a failed probe: {health}"));
            }
            let machines = api.get(&format!("/api/v1/tenants/{name}/machines")).await.json();
            for machine in machines["items"].as_array().into_iter().flatten() {
                if machine["status"]["ready"] != true || machine["spec"]["connected"] != true {
                    wrong.push(format!(
                        "machine not ready: {} {}",
                        machine["metadata"]["name"], machine["status"]
                    ));
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        wrong
    })
}

async fn rotate(api: &Api, tenant: &str) -> Value {
    api.post(&format!("/api/v1/tenants/{tenant}/rotate-ca"), &json!({"authorities": ["os", "kubernetes"]}))
        .await
        .expect(202)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_cas_rotate_node_by_node_with_the_tenant_ready_and_downloads_following() {
    let engine = Engine::new();
    let live = Live::start(&engine, "rotate", (3, 2), |options| options).await;
    let api = live.api();
    let dir = tempfile::tempdir().unwrap();
    let old_os = live.bundle.os_ca().cert_pem().to_string();
    let talos_before = download(&api, "rotate", "talosconfig").await;
    let kube_before = download(&api, "rotate", "kubeconfig").await;
    assert!(kubectl_works(dir.path(), "before", &kube_before));
    let mut watch = Watch::open(&api, "", &[]).await;
    let stop = Arc::new(AtomicBool::new(false));
    let health = watch_health(&live, stop.clone());

    // Held at the worker, the last in order, in `accepting`: every control
    // plane took the phase's config; downloads from before still work.
    let worker = &live.cluster.node("workers-1").node;
    worker.hold(Some(Method::ApplyConfiguration));
    let answered = rotate(&api, "rotate").await;
    assert_eq!(
        (answered["phase"].as_str(), answered["authorities"].clone()),
        (Some("generated"), json!(["os", "kubernetes"]))
    );
    eventually("the worker's accepting config to be held", CONVERGE, || async {
        (worker.held() == 1).then_some(())
    })
    .await;
    assert_eq!(phase(&live).await, "accepting");
    assert_eq!(talosconfig_works(&live, &talos_before).await, [true; 5]);
    assert!(kubectl_works(dir.path(), "before", &kube_before));
    let again = api.post("/api/v1/tenants/rotate/rotate-ca", &json!({"authorities": ["os"]})).await;
    again.expect_error(409, "Conflict");

    // Held at the first control plane in `swapping`: the service issues
    // from the new CAs, nodes still serve from the old ones.
    let first = &live.cluster.node("cp-0").node;
    first.hold(Some(Method::ApplyConfiguration));
    worker.hold(None);
    eventually("cp-0's swapping config to be held", CONVERGE, || async { (first.held() == 1).then_some(()) })
        .await;
    assert_eq!(phase(&live).await, "swapping");
    let talos_during = download(&api, "rotate", "talosconfig").await;
    let kube_during = download(&api, "rotate", "kubeconfig").await;
    assert_eq!(talosconfig_works(&live, &talos_before).await, [true; 5]);
    assert_eq!(talosconfig_works(&live, &talos_during).await, [true; 5]);
    assert!(kubectl_works(dir.path(), "during", &kube_during));
    first.hold(None);

    let done = live
        .settled("the rotation to end", |tenant, _| tenant["status"]["caRotation"]["phase"] == "done")
        .await;
    stop.store(true, Ordering::SeqCst);
    let wrong = health.await.unwrap();
    assert!(
        wrong.is_empty(),
        "the tenant stays ready and healthy ({} times not): {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(3)]
    );
    let condition = super::condition(&done, "CARotation").expect("the CARotation condition");
    assert_eq!((condition["status"].as_str(), condition["reason"].as_str()), (Some("False"), Some("Done")));

    // Every node took each phase's config once, in phase order, control
    // planes first within a phase.
    let talos_after = download(&api, "rotate", "talosconfig").await;
    let new_os = decoded(&talos_context(&talos_after)["ca"]);
    assert_ne!(new_os, old_os);
    let mut phase_seqs: Vec<Vec<(String, u64)>> = vec![Vec::new(); 3];
    for (machine, taken) in rotation_configs(&live.cluster, &old_os, &new_os) {
        let cas: Vec<Cas> = taken.iter().map(|(_, cas)| cas.clone()).collect();
        assert_eq!(cas, each_phase(), "{machine} took each phase's config once, in order");
        for (index, (seq, _)) in taken.iter().enumerate() {
            phase_seqs[index].push((machine.clone(), *seq));
        }
    }
    for index in 0..3 {
        phase_seqs[index].sort_by_key(|(_, seq)| *seq);
        let order: Vec<&str> = phase_seqs[index].iter().map(|(machine, _)| machine.as_str()).collect();
        assert_eq!(
            order,
            ["cp-0", "cp-1", "cp-2", "workers-0", "workers-1"],
            "phase {index} goes node by node"
        );
        if index > 0 {
            let last_before = phase_seqs[index - 1].iter().map(|(_, seq)| *seq).max().unwrap();
            assert!(
                phase_seqs[index][0].1 > last_before,
                "phase {index} begins once every node took the one before"
            );
        }
    }

    // Downloads: those from before are refused now, later ones work.
    assert_eq!(talosconfig_works(&live, &talos_before).await, [false; 5]);
    assert!(!kubectl_works(dir.path(), "before", &kube_before));
    assert_eq!(talosconfig_works(&live, &talos_during).await, [true; 5]);
    assert!(kubectl_works(dir.path(), "during", &kube_during));
    assert_eq!(talosconfig_works(&live, &talos_after).await, [true; 5]);
    let kube_after = download(&api, "rotate", "kubeconfig").await;
    assert!(kubectl_works(dir.path(), "after", &kube_after));

    // The export holds the new CAs alone.
    let secrets: Value = serde_saphyr::from_str(&download(&api, "rotate", "secrets").await).unwrap();
    assert_eq!(decoded(&secrets["certs"]["os"]["crt"]), new_os);
    let kube_ca = decoded(
        &serde_saphyr::from_str::<Value>(&kube_after).unwrap()["clusters"][0]["cluster"]["certificate-authority-data"],
    );
    assert_eq!(decoded(&secrets["certs"]["k8s"]["crt"]), kube_ca);
    assert_ne!(kube_ca, live.bundle.kubernetes_ca().cert_pem());

    // The watch saw the phases in order, and the tenant ready in each.
    let mut phases: Vec<String> = Vec::new();
    while phases.last().map(String::as_str) != Some("done") {
        let frame = watch.next_event(Duration::from_secs(10)).await;
        let object = frame.object();
        if object["metadata"]["name"] != "rotate" {
            continue;
        }
        assert_eq!(object["status"]["ready"], true, "ready in every event: {object}");
        if let Some(phase) = object["status"]["caRotation"]["phase"].as_str()
            && phases.last().map(String::as_str) != Some(phase)
        {
            phases.push(phase.to_string());
        }
    }
    let order = ["generated", "accepting", "switched", "swapping", "dropping", "done"];
    let positions: Vec<usize> = phases
        .iter()
        .map(|phase| order.iter().position(|known| known == phase).expect("a known phase"))
        .collect();
    assert!(positions.windows(2).all(|pair| pair[0] < pair[1]), "phases in order: {phases:?}");
    assert_eq!(phases.last().map(String::as_str), Some("done"), "{phases:?}");
    converged(&api, "rotate").await;
}

/// The OS CAs a config names, `old` or `new`: the issuing one, and those
/// accepted.
type Cas = (&'static str, Vec<&'static str>);

/// The configs of the rotation each node took, by the OS CAs they name,
/// with each call's sequence number, in the order taken.
fn rotation_configs(
    cluster: &cms_e2e::cluster::FakeCluster,
    old: &str,
    new: &str,
) -> Vec<(String, Vec<(u64, Cas)>)> {
    let label = |pem: &str| match pem {
        pem if pem == old => "old",
        pem if pem == new => "new",
        _ => "another",
    };
    let mut all = Vec::new();
    for node in &cluster.nodes {
        let mut taken = Vec::new();
        for call in node.calls_of("ApplyConfiguration") {
            let (ca, accepted) = os_cas(call["payload"]["data"].as_str().unwrap_or_default());
            let cas: Cas = (label(&ca), accepted.iter().map(|pem| label(pem)).collect());
            if cas != ("old", vec![]) {
                taken.push((call["seq"].as_u64().expect("a sequence number"), cas));
            }
        }
        all.push((node.host.machine.clone(), taken));
    }
    all
}

/// The configs of a rotation of the OS CA, one per phase that changes them.
fn each_phase() -> Vec<Cas> {
    vec![("old", vec!["new"]), ("new", vec!["old"]), ("new", vec![])]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_while_configs_go_out_skips_no_node_and_repeats_none() {
    let engine = Engine::new();
    let Live { server, cluster, bundle, .. } = Live::start(&engine, "crash", (3, 1), |options| options).await;
    let old_os = bundle.os_ca().cert_pem().to_string();
    let second = &cluster.node("cp-1").node;

    // Killed in `accepting`, cp-0 done and cp-1's config on its way.
    second.hold(Some(Method::ApplyConfiguration));
    rotate(&server.api(), "crash").await;
    eventually("cp-1's accepting config to be held", CONVERGE, || async {
        (second.held() == 1).then_some(())
    })
    .await;
    let stopped = server.kill().await;
    let gone = || async { (second.held() == 0).then_some(()) };
    eventually("the killed server's call to go", CONVERGE, gone).await;
    // cp-1 takes the accepting and swapping configs after the restart, and
    // the dropping one is on its way at the second kill.
    second.hold_after(Method::ApplyConfiguration, 2);
    let server = stopped.restart().await;
    eventually("cp-1's dropping config to be held", CONVERGE, || async {
        (second.held() == 1).then_some(())
    })
    .await;
    let tenant = server.api().get("/api/v1/tenants/crash").await.expect(200);
    assert_eq!(tenant["status"]["caRotation"]["phase"], "dropping", "{tenant}");
    let stopped = server.kill().await;
    eventually("the killed server's call to go", CONVERGE, gone).await;
    second.hold(None);
    let server = stopped.restart().await;
    let api = server.api();
    eventually("the rotation to end", CONVERGE, || async {
        let tenant = api.get("/api/v1/tenants/crash").await.json();
        (tenant["status"]["caRotation"]["phase"] == "done" && tenant["status"]["ready"] == true).then_some(())
    })
    .await;

    let talos_after = download(&api, "crash", "talosconfig").await;
    let new_os = decoded(&talos_context(&talos_after)["ca"]);
    for (machine, taken) in rotation_configs(&cluster, &old_os, &new_os) {
        let cas: Vec<Cas> = taken.into_iter().map(|(_, cas)| cas).collect();
        assert_eq!(cas, each_phase(), "{machine} took each phase's config once, none skipped");
    }
    converged(&api, "crash").await;
}

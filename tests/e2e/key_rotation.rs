//! Online rotation of the sealing key on the real server: `cms-server keys
//! rotate` while tenants are created and their documents downloaded and a
//! watch is open; the old key removed afterwards; a `kill -9` in the middle
//! of re-sealing; and two PostgreSQL replicas re-sealing each blob once.
//! Each test prints its figures (blobs re-sealed, time, requests served).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cms_e2e::commands::server_command;
use cms_e2e::fixtures::{TENANTS, tenant_path};
use cms_e2e::{Api, DataDir, Server, ServerOptions, Watch};
use serde_json::{Value, json};

use crate::metrics::{scrape, value};
use crate::replicas::{database, replica};

/// The first key and the one rotated to: standard base64 of 32 bytes.
const K1: &str = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";
const K2: &str = "AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=";
/// How long re-sealing may take before a test fails.
const SETTLE: Duration = Duration::from_secs(90);

/// Both keys configured, `k1` first; re-sealing paced by `batch` and `pause`.
fn keyring(options: ServerOptions, batch: u32, pause: &str) -> ServerOptions {
    options
        .env("CMS_SECRETS_KEY", K1)
        .env("CMS_SECRETS_KEY_ID", "k1")
        .env("CMS_SECRETS_OTHER_KEYS", format!("k2={K2}"))
        .env("CMS_REKEY_POLL", "200ms")
        .env("CMS_REKEY_BATCH", batch.to_string())
        .env("CMS_REKEY_PAUSE", pause)
        .env("CMS_PROVISIONING", "false")
}

/// A tenant whose documents download: it names its control plane.
fn tenant(name: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"kubernetesVersion": "1.31.1",
        "controlPlaneEndpoint": "https://10.0.0.1:6443"}})
}

/// `keys status`'s count of blobs left to re-seal.
async fn left(options: &ServerOptions, data_dir: &DataDir) -> u64 {
    let status = server_command(options, data_dir, &["keys", "status"]).await;
    let line = status.ok().lines().find_map(|line| line.strip_prefix("blobs left to re-seal: "));
    line.and_then(|count| count.trim().parse().ok()).unwrap_or_else(|| panic!("no count in\n{status}"))
}

/// Waits until `keys status` reports nothing left under another key.
async fn settled(options: &ServerOptions, data_dir: &DataDir) {
    let deadline = Instant::now() + SETTLE;
    while left(options, data_dir).await > 0 {
        assert!(Instant::now() < deadline, "re-sealing did not finish within {SETTLE:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn resealed(api: &Api) -> f64 {
    value(&scrape(api).await, "cms_sealed_blobs_resealed_total", &[])
}

async fn create_tenants(api: &Api, prefix: &str, count: usize) -> Vec<String> {
    let names: Vec<String> = (0..count).map(|index| format!("{prefix}-{index}")).collect();
    for name in &names {
        api.post(TENANTS, &tenant(name)).await.expect(201);
    }
    names
}

/// Every tenant's kubeconfig and talosconfig download.
async fn documents_download(api: &Api, names: &[String]) {
    for name in names {
        for document in ["kubeconfig", "talosconfig"] {
            let reply = api.get(&format!("{}/{document}", tenant_path(name))).await;
            assert_eq!(reply.status, 200, "{name} {document}: {}", reply.body);
        }
    }
}

/// Downloads documents, and every tenth time creates a tenant, until told
/// to stop; every answer must be a success. Returns how many requests it
/// made.
fn load(
    api: Api,
    names: Vec<String>,
    stop: Arc<AtomicBool>,
    failures: Arc<AtomicU64>,
) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(async move {
        let mut requests = 0u64;
        let mut index = 0usize;
        while !stop.load(Ordering::Relaxed) {
            let name = &names[index % names.len()];
            let mut statuses = vec![
                api.get(&format!("{}/kubeconfig", tenant_path(name))).await.status,
                api.get(&format!("{}/talosconfig", tenant_path(name))).await.status,
            ];
            if index % 10 == 9 {
                statuses.push(api.post(TENANTS, &tenant(&format!("load-{index}"))).await.status);
            }
            for status in &statuses {
                if !(200..300).contains(status) {
                    eprintln!("a request about {name} answered {status}");
                    failures.fetch_add(1, Ordering::Relaxed);
                }
            }
            requests += statuses.len() as u64;
            index += 1;
        }
        requests
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_under_load_keeps_every_secret_open_then_the_old_key_goes() {
    let options = keyring(Server::options(), 2, "100ms");
    let server = options.clone().start().await;
    let api = server.api();
    let names = create_tenants(&api, "before", 30).await;
    let mut watches = Vec::new();
    for _ in 0..3 {
        let mut watch = Watch::open(&api, "", &[]).await;
        watch.initial_burst(Duration::from_secs(10)).await;
        watches.push(watch);
    }
    assert_eq!(left(&options, server.data_dir()).await, 0, "k1 is active: nothing to do");

    let (stop, failures) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    let loader = load(api.clone(), names.clone(), stop.clone(), failures.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let rotated = server_command(&options, server.data_dir(), &["keys", "rotate", "--to", "k2"]).await;
    assert!(rotated.ok().contains("key k2 is now active (it was k1)"), "{rotated}");
    settled(&options, server.data_dir()).await;
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let requests = loader.await.expect("the load runs");
    assert_eq!(failures.load(Ordering::Relaxed), 0, "no request failed during the rotation");
    let count = resealed(&api).await;
    assert!(count >= 32.0, "the 30 tenants, the canary and the login signing key at least: {count}");
    documents_download(&api, &names).await;
    api.post(TENANTS, &tenant("after")).await.expect(201);
    for watch in &mut watches {
        // Past the load's creates, to the one made after the rotation.
        loop {
            let frame = watch.next_event(Duration::from_secs(10)).await;
            if frame.name() == Some("after") {
                assert_eq!(frame.event_type(), Some("ADDED"), "the watch lived through the rotation");
                break;
            }
        }
    }
    let status = server_command(&options, server.data_dir(), &["keys", "status"]).await;
    assert!(status.ok().contains("key k1 seals no blob: it can be removed"), "{status}");
    eprintln!(
        "rotation under load: {count} blobs re-sealed in {:.1} s, {requests} requests served meanwhile, 0 failed",
        took.as_secs_f64()
    );

    // Without k2, the store's active key, the server refuses to start.
    let stopped = server.terminate().await;
    let without_new = Server::options()
        .env("CMS_SECRETS_KEY", K1)
        .env("CMS_SECRETS_KEY_ID", "k1")
        .env("CMS_PROVISIONING", "false");
    let data_dir = stopped.data_dir().clone();
    let (status, output) = stopped.restart_failing(without_new).await;
    assert!(!status.success() && output.contains("active secrets key is \"k2\""), "{output}");
    // Without k1, the old key, it starts, and every secret opens.
    let only_new = Server::options()
        .env("CMS_SECRETS_KEY", K2)
        .env("CMS_SECRETS_KEY_ID", "k2")
        .env("CMS_PROVISIONING", "false");
    let server = only_new.clone().start_in(data_dir).await;
    documents_download(&server.api(), &names).await;
    assert_eq!(left(&only_new, server.data_dir()).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_in_the_middle_of_re_sealing_and_a_restart_finishes_it() {
    // One blob at a time, slowly, so that the kill lands in the middle.
    let options = keyring(Server::options(), 1, "150ms");
    let server = options.clone().start().await;
    let names = create_tenants(&server.api(), "crash", 30).await;
    // A key no server holds is refused, and nothing changes.
    let unknown = server_command(&options, server.data_dir(), &["keys", "rotate", "--to", "k9"]).await;
    let refused = unknown.failed();
    assert!(refused.contains("key \"k9\" is not configured (the keys are k1, k2)"), "{unknown}");
    let status = server_command(&options, server.data_dir(), &["keys", "status"]).await;
    assert!(status.ok().contains("active key: k1"), "{status}");
    for shown in [&unknown.stdout, &unknown.stderr, &status.stdout, &status.stderr] {
        assert!(!shown.contains(K1) && !shown.contains(K2), "no key is printed: {shown}");
    }
    let started = Instant::now();
    server_command(&options, server.data_dir(), &["keys", "rotate", "--to", "k2"]).await.ok();
    let deadline = Instant::now() + SETTLE;
    while resealed(&server.api()).await < 3.0 {
        assert!(Instant::now() < deadline, "re-sealing did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let before_kill = resealed(&server.api()).await;
    let stopped = server.kill().await;
    let left_at_kill = left(&options, stopped.data_dir()).await;
    assert!(left_at_kill > 0, "the kill came in the middle: {left_at_kill} left");
    let server = stopped.restart().await;
    settled(&options, server.data_dir()).await;
    let after_restart = resealed(&server.api()).await;
    assert_eq!(after_restart, left_at_kill as f64, "the restart re-sealed exactly what was left");
    documents_download(&server.api(), &names).await;
    eprintln!(
        "kill -9 mid-rotation: {before_kill} re-sealed before the kill, {left_at_kill} left, \
         {after_restart} re-sealed after the restart, {:.1} s in all",
        started.elapsed().as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_re_seal_each_blob_once() {
    let url = database();
    let options = replica(keyring(Server::options(), 4, "20ms"), &url)
        .env("CMS_SECRETS_KEY", K1)
        .env("CMS_SECRETS_KEY_ID", "k1");
    let a = options.clone().start().await;
    let b = options.clone().start().await;
    let names = create_tenants(&a.api(), "pair", 30).await;
    let started = Instant::now();
    // Two operators rotate at once, each through another replica's settings.
    let (first, second) = tokio::join!(
        server_command(&options, a.data_dir(), &["keys", "rotate", "--to", "k2"]),
        server_command(&options, b.data_dir(), &["keys", "rotate", "--to", "k2"]),
    );
    first.ok();
    second.ok();
    settled(&options, a.data_dir()).await;
    let took = started.elapsed();
    let (on_a, on_b) = (resealed(&a.api()).await, resealed(&b.api()).await);
    assert_eq!(
        on_a + on_b,
        32.0,
        "30 tenants, the canary and the login signing key, each once: {on_a} + {on_b}"
    );
    documents_download(&a.api(), &names).await;
    documents_download(&b.api(), &names).await;
    eprintln!(
        "two replicas: {} blobs re-sealed ({} by one, {} by the other) in {:.1} s",
        on_a + on_b,
        on_a as u64,
        on_b as u64,
        took.as_secs_f64()
    );
}

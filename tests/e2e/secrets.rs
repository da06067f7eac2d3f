//! Tenant secrets against the real binary: a real `kubectl` reads the
//! downloaded kubeconfig, the talosconfig certificate verifies against the
//! tenant's OS CA, the database files hold no private key and no secret
//! value, and a server given the wrong sealing key refuses to start.
//!
//! `kubectl` is looked for at `/usr/bin/kubectl` (or `CMS_KUBECTL`); a
//! missing one fails the test.

use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cms_e2e::fixtures::{TENANTS, tenant_path};
use cms_e2e::{Api, Reply, Server};
use serde_json::{Value, json};
use x509_parser::pem::parse_x509_pem;

/// The sealing key of the first server: base64 of 32 bytes.
const KEY: &str = "c2VhbGluZy1rZXktb2YtdGhlLWUyZS10ZXN0cy0wMDE=";
/// Another key, which did not seal the data.
const OTHER_KEY: &str = "YW5vdGhlci1rZXktdGhhdC1zZWFsZWQtbm90aGluZzI=";

fn tenant(name: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {
        "kubernetesVersion": "1.31.4", "talosVersion": "1.9.6",
        "controlPlaneEndpoint": "https://127.0.0.1:6443"}})
}

fn kubectl() -> PathBuf {
    let path =
        std::env::var_os("CMS_KUBECTL").map_or_else(|| PathBuf::from("/usr/bin/kubectl"), PathBuf::from);
    assert!(path.exists(), "kubectl is required at {} (set CMS_KUBECTL to use another path)", path.display());
    path
}

#[allow(clippy::disallowed_methods)] // The test shows that the real kubectl reads the downloaded file.
fn run_kubectl(kubeconfig: &Path, args: &[&str]) -> String {
    let output = std::process::Command::new(kubectl())
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .expect("kubectl runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "kubectl {args:?} failed: {stderr}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Checks a YAML download's headers and parses it.
fn yaml(reply: &Reply, file_name: &str) -> Value {
    assert_eq!(reply.status, 200, "{}: {}", reply.what, reply.body);
    assert_eq!(reply.header("content-type").as_deref(), Some("application/yaml"));
    let disposition = format!("attachment; filename=\"{file_name}\"");
    assert_eq!(reply.header("content-disposition"), Some(disposition));
    serde_saphyr::from_str(&reply.body).expect("a YAML document")
}

fn pem(data: &Value) -> Vec<u8> {
    let text = STANDARD.decode(data.as_str().expect("base64 text")).expect("base64");
    parse_x509_pem(&text).expect("a PEM certificate").1.contents
}

async fn kubeconfig_through_kubectl(api: &Api, dir: &Path, user: &str) {
    let reply = api.get(&format!("{}/kubeconfig", tenant_path("acme"))).await;
    yaml(&reply, "acme-kubeconfig.yaml");
    let file = dir.join(format!("{user}.kubeconfig"));
    std::fs::write(&file, &reply.body).expect("the kubeconfig is saved");
    let contexts = run_kubectl(&file, &["config", "get-contexts", "-o", "name"]);
    assert_eq!(contexts.trim(), format!("{user}@acme"));
    let raw = run_kubectl(&file, &["config", "view", "--raw", "-o", "json"]);
    let view: Value = serde_json::from_str(&raw).expect("kubectl prints JSON");
    assert_eq!(view["clusters"][0]["cluster"]["server"], "https://127.0.0.1:6443");
    assert_eq!(view["current-context"], format!("{user}@acme"));
    assert!(view["users"][0]["user"]["client-certificate-data"].is_string(), "{view}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downloads_work_and_nothing_secret_is_kept_in_the_clear() {
    let server =
        Server::options().env("CMS_SECRETS_KEY", KEY).env("CMS_SECRETS_KEY_ID", "e2e-1").start().await;
    let api = server.api();
    api.post(TENANTS, &tenant("acme")).await.expect(201);
    let dir = tempfile::tempdir().expect("a temporary directory");
    kubeconfig_through_kubectl(&api, dir.path(), "admin").await;

    let viewer = json!({"metadata": {"name": "vera"}, "spec": {"role": "view", "password": "vera-password"}});
    api.post("/api/v1/users", &viewer).await.expect(201);
    let as_viewer = Api::new(server.addr()).login("vera", "vera-password").await;
    kubeconfig_through_kubectl(&as_viewer, dir.path(), "viewer").await;
    as_viewer.get(&format!("{}/secrets", tenant_path("acme"))).await.expect_error(403, "Forbidden");

    let talosconfig =
        yaml(&api.get(&format!("{}/talosconfig", tenant_path("acme"))).await, "acme-talosconfig.yaml");
    let context = &talosconfig["contexts"]["acme"];
    assert_eq!(context["endpoints"], json!(["127.0.0.1"]));
    let (ca, crt) = (pem(&context["ca"]), pem(&context["crt"]));
    let (_, ca) = x509_parser::parse_x509_certificate(&ca).expect("the OS CA");
    let (_, crt) = x509_parser::parse_x509_certificate(&crt).expect("the client certificate");
    crt.verify_signature(Some(ca.public_key())).expect("signed by the tenant's OS CA");
    let roles: Vec<&str> = crt.subject().iter_organization().map(|o| o.as_str().expect("UTF-8")).collect();
    assert_eq!(roles, ["os:admin"]);

    let bundle = yaml(&api.get(&format!("{}/secrets", tenant_path("acme"))).await, "acme-secrets.yaml");
    let values: Vec<String> = [
        &bundle["cluster"]["secret"],
        &bundle["secrets"]["bootstraptoken"],
        &bundle["secrets"]["secretboxencryptionsecret"],
        &bundle["trustdinfo"]["token"],
    ]
    .iter()
    .map(|value| value.as_str().expect("a secret value").to_string())
    .collect();
    assert!(!server.data_dir().path().join("secrets.key").exists(), "a configured key writes no key file");
    assert_clean(&server.data_dir().path(), &values);
    let stopped = server.terminate().await;
    assert_clean(&stopped.data_dir().path(), &values);
}

/// The database files hold no PEM private key and none of `values`.
fn assert_clean(data_dir: &Path, values: &[String]) {
    let mut checked = 0;
    for name in ["cms.db", "cms.db-wal", "cms.db-shm"] {
        let Ok(bytes) = std::fs::read(data_dir.join(name)) else { continue };
        checked += 1;
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains("PRIVATE KEY"), "{name} holds a PEM private key");
        for value in values {
            assert!(!text.contains(value.as_str()), "{name} holds a secret value in the clear");
        }
    }
    assert!(checked > 0, "the database files are in {}", data_dir.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_given_the_wrong_key_refuses_to_start() {
    let server = Server::start().await;
    server.api().post(TENANTS, &tenant("acme")).await.expect(201);
    let key_file = server.data_dir().path().join("secrets.key");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key_file).expect("the key file is created").permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the key file is private");
    }
    let stopped = server.terminate().await;

    let wrong = Server::options().env("CMS_SECRETS_KEY", OTHER_KEY);
    let (status, output) = stopped.restart_failing(wrong).await;
    assert_ne!(status.code(), Some(0), "{output}");
    assert!(output.contains("none of the secrets keys from CMS_SECRETS_KEY opens this data"), "{output}");
    assert!(!output.contains(OTHER_KEY), "the key is never printed: {output}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_right_key_opens_the_data_after_a_restart() {
    let server =
        Server::options().env("CMS_SECRETS_KEY", KEY).env("CMS_SECRETS_KEY_ID", "e2e-1").start().await;
    server.api().post(TENANTS, &tenant("acme")).await.expect(201);
    let before = server.api().get(&format!("{}/secrets", tenant_path("acme"))).await;
    let server = server.terminate().await.restart().await;
    let after = server.api().get(&format!("{}/secrets", tenant_path("acme"))).await;
    assert_eq!((before.status, after.status), (200, 200));
    assert_eq!(before.body, after.body, "the same bundle opens after a restart");
    server.terminate().await;
}

//! A real `kubectl` accepts the kubeconfig.
//!
//! A small HTTPS server serves `/version` with a certificate from the
//! tenant's Kubernetes CA, requires a client certificate signed by that CA,
//! and records the organizations (Kubernetes groups) of the certificate it
//! saw. `kubectl --kubeconfig F get --raw /version` must succeed against it.
//! A missing `kubectl` fails the test: set `CMS_KUBECTL` to use another path.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cms_model::UserRole;
use cms_talos::{KubeIdentity, issue_server_cert, kubeconfig, kubeconfig_for};
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use secrecy::ExposeSecret;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::bundle;

const VERSION_BODY: &str = r#"{"major":"1","minor":"31","gitVersion":"v1.31.4","platform":"linux/amd64"}"#;

fn kubectl_path() -> PathBuf {
    let path =
        std::env::var_os("CMS_KUBECTL").map_or_else(|| PathBuf::from("/usr/bin/kubectl"), PathBuf::from);
    assert!(path.exists(), "kubectl is required at {} (set CMS_KUBECTL to use another path)", path.display());
    path
}

/// The organizations of each client certificate the server saw, in order.
type Seen = Arc<Mutex<Vec<Vec<String>>>>;

/// Starts the server on an ephemeral loopback port.
async fn serve() -> (u16, Seen) {
    let bundle = bundle();
    let ca = bundle.kubernetes_ca();
    let served = issue_server_cert(ca, &["127.0.0.1", "localhost"], Duration::from_secs(3600)).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(ca.cert_pem().as_bytes()).unwrap()).unwrap();
    let verifier =
        WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone()).build().unwrap();
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![CertificateDer::from_pem_slice(served.cert_pem.as_bytes()).unwrap()],
            PrivateKeyDer::from_pem_slice(served.key_pem.expose_secret().as_bytes()).unwrap(),
        )
        .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Seen::default();
    let record = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            let acceptor = acceptor.clone();
            let record = record.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(stream).await else { return };
                if let Some(cert) = tls.get_ref().1.peer_certificates().and_then(|certs| certs.first()) {
                    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).unwrap();
                    let orgs = parsed.subject().iter_organization().map(|o| o.as_str().unwrap().to_string());
                    record.lock().unwrap().push(orgs.collect());
                }
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{VERSION_BODY}",
                    VERSION_BODY.len()
                );
                let _ = tls.write_all(response.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    (port, seen)
}

/// Runs `kubectl --kubeconfig F get --raw /version` with a private home.
fn run_kubectl(kubeconfig_yaml: &str) -> std::process::Output {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("kubeconfig");
    std::fs::write(&file, kubeconfig_yaml).unwrap();
    // The test drives the real kubectl binary; clippy.toml keeps process spawning
    // to the provisioning driver, and tests are the stated exception.
    #[allow(clippy::disallowed_methods)]
    let output = std::process::Command::new(kubectl_path())
        .args(["--kubeconfig", file.to_str().unwrap(), "--request-timeout=20s", "get", "--raw", "/version"])
        .env("HOME", home.path())
        .env_remove("KUBECONFIG")
        .output()
        .expect("kubectl runs");
    output
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_accepts_the_kubeconfig_and_presents_the_role_group() {
    let (port, seen) = serve().await;
    let endpoint = format!("https://127.0.0.1:{port}");
    for (role, group) in [
        (UserRole::Admin, "system:masters"),
        (UserRole::Edit, "system:masters"),
        (UserRole::View, "cms:viewers"),
    ] {
        let yaml = kubeconfig(bundle(), "demo", &endpoint, role, Duration::from_secs(3600)).unwrap();
        let output = tokio::task::spawn_blocking(move || run_kubectl(&yaml)).await.unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "kubectl failed for {role:?}: {}\n{stdout}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(stdout.contains("\"gitVersion\":\"v1.31.4\""), "{stdout}");
        let last = seen.lock().unwrap().last().cloned();
        assert_eq!(last, Some(vec![group.to_string()]), "{role:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_presents_every_group_of_an_identity_each_in_its_own_o() {
    let (port, seen) = serve().await;
    let endpoint = format!("https://127.0.0.1:{port}");
    let groups = ["oidc:viewers".to_string(), "oidc:devs".to_string(), "oidc:a, b+c".to_string()];
    let identity =
        KubeIdentity { role: UserRole::View, name: Some("oidc:alice@example.com"), groups: &groups };
    let yaml = kubeconfig_for(bundle(), "demo", &endpoint, &identity, Duration::from_secs(3600)).unwrap();
    let output = tokio::task::spawn_blocking(move || run_kubectl(&yaml)).await.unwrap();
    assert!(output.status.success(), "kubectl failed: {}", String::from_utf8_lossy(&output.stderr));
    let last = seen.lock().unwrap().last().cloned();
    assert_eq!(
        last,
        Some(vec!["cms:viewers".into(), "oidc:viewers".into(), "oidc:devs".into(), "oidc:a, b+c".into()])
    );
}

//! What the files hold after a real apply: tenants on `oci` and on
//! `openstack` get their instances made by the real engine with the fake
//! providers (`cms_e2e::cloud`), booting machine configs rendered from
//! their secrets. Then every file under the server's directory, the
//! workspaces and the database included, binary or not, and the server's
//! log are searched for a PEM block, its base64 at each alignment, base64
//! of that base64 (OCI's user data is the base64 of a config that holds
//! base64 PEM), and the tenants' own CA certificates and keys in each of
//! those forms. The one place they are is the `oci` tenant's state: the
//! OCI provider keeps `metadata.user_data` there, which OpenTofu's state
//! encryption covers and Terraform (the test engine) writes in the clear;
//! the OpenStack provider keeps only the SHA-1 of its `user_data`.

use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use cms_e2e::cloud::FakeCloud;

use super::{Engine as ToolEngine, provisioned};

const MARKER: &str = "-----BEGIN";

fn oci_tenant(name: &str) -> Value {
    let config = json!({"region": "eu-frankfurt-1", "compartmentOcid": "ocid1.compartment.oc1..c",
        "subnetId": "ocid1.subnet.oc1..s", "imageId": "ocid1.image.oc1..talos-arm64", "ocpus": 2, "memoryGb": 8,
        "availabilityDomain": "AD-1"});
    tenant(name, "oci:VM.Standard.A1.Flex", config)
}

fn openstack_tenant(name: &str) -> Value {
    tenant(name, "openstack:m1.large", json!({"imageId": "img-talos", "networkId": "net-1"}))
}

fn tenant(name: &str, class: &str, config: Value) -> Value {
    json!({
        "metadata": {"name": name},
        "spec": {"kubernetesVersion": "1.31.1", "controlPlaneEndpoint": "https://10.0.0.10:6443", "nodeGroups": [
            {"name": "cp", "role": "controlplane", "count": 1, "providerClass": class, "providerConfig": config},
            {"name": "workers", "role": "worker", "count": 2, "providerClass": class, "providerConfig": config},
        ]}
    })
}

/// The base64 of `text` that stays the same whatever bytes come before or
/// after it: one string per alignment.
fn base64_forms(text: &str) -> Vec<String> {
    (0..3)
        .map(|offset| {
            let mut bytes = vec![0u8; offset];
            bytes.extend_from_slice(text.as_bytes());
            let encoded = STANDARD.encode(&bytes);
            // Character i holds bits 6i..6i+6: keep those within the text's bits.
            let (first, last) = ((8 * offset).div_ceil(6), (8 * bytes.len()) / 6);
            encoded[first..last].to_string()
        })
        .collect()
}

/// `text`, its base64 forms and the base64 forms of those.
fn forms(text: &str) -> Vec<String> {
    let mut all = vec![text.to_string()];
    for encoded in base64_forms(text) {
        all.extend(base64_forms(&encoded));
        all.push(encoded);
    }
    all
}

/// Every string of a YAML document's `certs`, in the order found.
fn strings(value: &Value, into: &mut Vec<String>) {
    match value {
        Value::String(text) => into.push(text.clone()),
        Value::Object(map) => map.values().for_each(|value| strings(value, into)),
        Value::Array(items) => items.iter().for_each(|value| strings(value, into)),
        _ => {}
    }
}

/// Every file under `dir`, followed into subdirectories.
fn files(dir: &Path, into: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(kind) if kind.is_dir() => files(&path, into),
            Ok(kind) if kind.is_file() => into.push(path),
            _ => {}
        }
    }
}

/// Fails if any file under `root` but those in `except`, or `log`, holds
/// one of `needles`; returns how many files were read.
fn assert_nowhere(root: &Path, log: &str, needles: &[String], except: &[PathBuf]) -> usize {
    let mut paths = Vec::new();
    files(root, &mut paths);
    let mut read = 0;
    for path in paths.iter().filter(|path| !except.contains(path)) {
        // A workspace file being replaced may be gone by now.
        let Ok(bytes) = std::fs::read(path) else { continue };
        read += 1;
        for needle in needles {
            let found = bytes.windows(needle.len()).any(|window| window == needle.as_bytes());
            assert!(!found, "{} holds {needle:?}", path.display());
        }
    }
    for needle in needles {
        assert!(!log.contains(needle.as_str()), "the server's log holds {needle:?}");
    }
    read
}

#[test]
fn base64_forms_are_found_at_every_alignment() {
    let forms = base64_forms(MARKER);
    // What `cms_tofu::PEM_BASE64_MARKERS` scrubs from the tool's output.
    for (form, marker) in forms.iter().zip(["LS0tLS1CRUdJ", "LS0tQkVHSU", "LS0tLUJFR0lO"]) {
        assert!(form.contains(marker), "{form} against {marker}");
    }
    for prefix in ["", "a", "ab"] {
        let encoded = STANDARD.encode(format!("{prefix}{MARKER} CERTIFICATE-----"));
        assert!(forms.iter().any(|form| encoded.contains(form.as_str())), "{encoded}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cloud_user_data_is_in_no_file_and_no_log_but_the_oci_state() {
    let engine = ToolEngine::new();
    let cloud = FakeCloud::start().await;
    let server = super::clouds::server(&engine, &cloud).await;
    let api = server.api();
    let tenants = [("oci-acme", oci_tenant("oci-acme")), ("os-acme", openstack_tenant("os-acme"))];
    for (_, body) in &tenants {
        api.post("/api/v1/tenants", body).await.expect(201);
    }
    let workspaces = server.data_dir().path().join("workspaces");
    let mut needles = forms(MARKER);
    for (name, _) in &tenants {
        // The instances are made: the real engine applied.
        provisioned(&api, name).await;
        let main = std::fs::read_to_string(workspaces.join(name).join("main.tf.json")).unwrap();
        let main: Value = serde_json::from_str(&main).unwrap();
        let (kind, field) = match *name {
            "oci-acme" => ("oci_core_instance", "/metadata/user_data"),
            _ => ("openstack_compute_instance_v2", "/user_data"),
        };
        for id in ["cp-0", "workers-0", "workers-1"] {
            let instance = &main["resource"][kind][id];
            let user_data = instance.pointer(field).and_then(Value::as_str).unwrap_or_default();
            let group = id.rsplit_once('-').map(|(group, _)| group).unwrap_or_default();
            assert!(user_data.contains(&format!("var.machine_user_data_{group}")), "{instance}");
        }
        for group in ["cp", "workers"] {
            assert_eq!(main["variable"][format!("machine_user_data_{group}")]["sensitive"], true, "{main}");
        }

        // The tenant's own CA certificates and keys, in every form.
        let reply = api.get(&format!("/api/v1/tenants/{name}/secrets")).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        let bundle: Value = serde_saphyr::from_str(&reply.body).expect("a YAML document");
        let mut certs = Vec::new();
        strings(&bundle["certs"], &mut certs);
        assert!(certs.len() >= 5, "{}", bundle["certs"]);
        for cert in certs {
            let pem = String::from_utf8(STANDARD.decode(&cert).expect("base64 PEM")).unwrap();
            assert!(pem.starts_with(MARKER), "{pem}");
            let body = pem.lines().nth(1).expect("a PEM body line").to_string();
            // Past the header, which every PEM of its kind shares.
            needles.extend(forms(&cert[80..cert.len().min(140)]));
            needles.extend(forms(&body));
        }
    }
    assert!(engine.runs().iter().filter(|verb| *verb == "apply").count() >= 2, "{:?}", engine.runs());
    assert_eq!(cloud.resources("oci_core_instance").len(), 3);
    assert_eq!(cloud.resources("openstack_compute_instance_v2").len(), 3);

    // The OCI provider keeps the user data in its state (in the clear
    // under Terraform); nothing else holds it.
    let oci_state: Vec<PathBuf> = ["terraform.tfstate", "terraform.tfstate.backup"]
        .iter()
        .map(|file| workspaces.join("oci-acme").join(file))
        .collect();
    let state = std::fs::read_to_string(&oci_state[0]).unwrap();
    assert!(
        needles.iter().any(|needle| state.contains(needle.as_str())),
        "the OCI state keeps the user data"
    );
    let os_state = std::fs::read_to_string(workspaces.join("os-acme").join("terraform.tfstate")).unwrap();
    assert!(
        !needles.iter().any(|needle| os_state.contains(needle.as_str())),
        "the OpenStack state keeps a hash"
    );

    let root = server.data_dir().path().parent().unwrap().to_path_buf();
    let read = assert_nowhere(&root, &server.output(), &needles, &oci_state);
    assert!(read >= 4, "the database and both workspaces were read: {read} files");
    let stopped = server.terminate().await;
    assert_nowhere(&root, &stopped.output(), &needles, &oci_state);
}

//! State encryption with an engine that reports itself as OpenTofu: every
//! run in a tenant's workspace gets `TF_ENCRYPTION`, an `encryption` block
//! in OpenTofu's shape (a PBKDF2 key provider of the tenant's passphrase,
//! AES-GCM, enforced for the state and plans), and the runs go on with the
//! block set: an `oci` tenant, whose state holds its user data, applies.
//! (The engine under the wrapper is Terraform, which ignores the block.)

use cms_e2e::cloud::FakeCloud;
use serde_json::{Value, json};

use super::{Engine, provisioned};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opentofu_engine_gets_the_encryption_block_in_every_run() {
    let engine = Engine::new();
    engine.set("opentofu", true);
    let cloud = FakeCloud::start().await;
    let server = super::clouds::server(&engine, &cloud).await;
    let api = server.api();
    let config = json!({"region": "eu-frankfurt-1", "compartmentOcid": "ocid1.compartment.oc1..c",
        "subnetId": "ocid1.subnet.oc1..s", "imageId": "ocid1.image.oc1..talos-amd64", "ocpus": 1, "memoryGb": 4});
    let body = json!({"metadata": {"name": "sealed"}, "spec": {"kubernetesVersion": "1.31.1",
        "controlPlaneEndpoint": "https://10.0.0.10:6443", "nodeGroups": [
        {"name": "cp", "role": "controlplane", "count": 1, "providerClass": "oci:VM.Standard.E4.Flex", "providerConfig": config}]}});
    api.post("/api/v1/tenants", &body).await.expect(201);
    provisioned(&api, "sealed").await;
    assert_eq!(cloud.resources("oci_core_instance").len(), 1);

    let runs = engine.encryption();
    let in_workspace: Vec<&(String, Option<String>)> =
        runs.iter().filter(|(verb, _)| verb != "version").collect();
    assert!(in_workspace.iter().any(|(verb, _)| verb == "apply"), "{runs:?}");
    let mut passphrases = std::collections::BTreeSet::new();
    for (verb, block) in in_workspace {
        let block: Value = serde_json::from_str(
            block.as_deref().unwrap_or_else(|| panic!("{verb} ran without TF_ENCRYPTION")),
        )
        .unwrap_or_else(|err| panic!("{verb}: TF_ENCRYPTION is not JSON: {err}"));
        let passphrase = block["key_provider"]["pbkdf2"]["cms"]["passphrase"].as_str().unwrap_or_default();
        // OpenTofu refuses a passphrase under 16 characters.
        assert!(passphrase.len() >= 16, "{verb}");
        passphrases.insert(passphrase.to_string());
        assert_eq!(block["method"]["aes_gcm"]["cms"]["keys"], "${key_provider.pbkdf2.cms}");
        for target in ["state", "plan"] {
            assert_eq!(block[target]["method"], "${method.aes_gcm.cms}", "{verb} {target}");
            assert_eq!(block[target]["enforced"], true, "{verb} {target}");
        }
    }
    assert_eq!(passphrases.len(), 1, "one tenant, one passphrase");
    let passphrase = passphrases.into_iter().next().unwrap();
    assert!(!server.output().contains(&passphrase), "the passphrase reached the log");
}

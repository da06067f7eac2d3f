//! What rendered configs carry: secrets by role, images, endpoint, SANs, the viewers binding.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cms_model::{ConfigPatchSpec, PatchFormat, PatchTarget, Role};
use cms_talos::{ResolvedPatch, TalosError, config_yaml, render, render_documents};
use proptest::prelude::*;
use secrecy::ExposeSecret;
use serde_json::{Value, json};

use crate::{KUBERNETES, VERSIONS, bundle, document, input, multidoc, strings};

/// Private values a worker must not carry, in every form they may take.
fn control_plane_secrets() -> Vec<(String, String)> {
    let bundle = bundle();
    let mut secrets = vec![
        ("secretbox".to_string(), bundle.secretbox_encryption_secret().expose_secret().to_string()),
        ("service account key".to_string(), bundle.service_account_key().expose_secret().to_string()),
    ];
    for (name, ca) in [
        ("os", bundle.os_ca()),
        ("etcd", bundle.etcd_ca()),
        ("k8s", bundle.kubernetes_ca()),
        ("aggregator", bundle.aggregator_ca()),
    ] {
        secrets.push((format!("{name} key"), ca.key_pem().expose_secret().to_string()));
    }
    secrets
        .into_iter()
        .flat_map(|(name, value)| {
            let encoded = STANDARD.encode(value.as_bytes());
            [(name.clone(), value), (format!("{name} (base64)"), encoded)]
        })
        .collect()
}

#[test]
fn workers_get_ca_certificates_but_no_ca_keys() {
    for version in VERSIONS {
        let worker = render(&input(version, Role::Worker)).unwrap();
        let control_plane = render(&input(version, Role::ControlPlane)).unwrap();
        for (name, secret) in control_plane_secrets() {
            let probe = secret.lines().find(|line| line.len() > 40).unwrap_or(&secret);
            assert!(!worker.contains(probe), "Talos {version}: the worker config carries the {name}");
        }
        assert!(!worker.contains("PRIVATE KEY"), "Talos {version}");
        let os_key = STANDARD.encode(bundle().os_ca().key_pem().expose_secret());
        assert!(control_plane.contains(&os_key), "Talos {version}: control planes carry the OS CA key");
        let os_crt = STANDARD.encode(bundle().os_ca().cert_pem());
        assert!(worker.contains(&os_crt), "Talos {version}: workers trust the OS CA");
        let k8s_crt = bundle().kubernetes_ca().cert_pem().lines().nth(1).unwrap().to_string();
        let k8s_crt_b64 = STANDARD.encode(bundle().kubernetes_ca().cert_pem());
        assert!(
            worker.contains(&k8s_crt) || worker.contains(&k8s_crt_b64),
            "Talos {version}: workers trust the k8s CA"
        );
    }
}

#[test]
fn images_endpoint_and_sans_follow_the_input() {
    for version in VERSIONS {
        let documents = render_documents(&input(version, Role::ControlPlane)).unwrap();
        let all: Vec<&str> = documents.iter().flat_map(strings).collect();
        for image in ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy"] {
            let expected = format!("registry.k8s.io/{image}:v{KUBERNETES}");
            assert!(all.contains(&expected.as_str()), "Talos {version}: {expected}");
        }
        let kubelet = format!("ghcr.io/siderolabs/kubelet:v{KUBERNETES}");
        let installer = format!("ghcr.io/siderolabs/installer:v{version}");
        assert!(all.contains(&kubelet.as_str()) && all.contains(&installer.as_str()), "Talos {version}");
        assert!(all.contains(&"https://10.0.0.10:6443"), "Talos {version}: derived endpoint");
        let v1alpha1 = document(&documents, None).unwrap();
        assert_eq!(v1alpha1["version"], "v1alpha1");
        assert_eq!(v1alpha1["machine"]["type"], "controlplane");
        assert_eq!(v1alpha1["machine"]["certSANs"], json!(["demo.example.com"]));
        let api_sans = if multidoc(version) {
            &document(&documents, Some("KubeAPIServerConfig")).unwrap()["certExtraSANs"]
        } else {
            &v1alpha1["cluster"]["apiServer"]["certSANs"]
        };
        assert_eq!(api_sans, &json!(["10.0.0.10", "demo.example.com"]), "Talos {version}");
        let (name, pods) = if multidoc(version) {
            let cluster = document(&documents, Some("KubeClusterConfig")).unwrap();
            (&cluster["clusterName"], &document(&documents, Some("KubeNetworkConfig")).unwrap()["podSubnets"])
        } else {
            (&v1alpha1["cluster"]["clusterName"], &v1alpha1["cluster"]["network"]["podSubnets"])
        };
        assert_eq!((name, pods), (&json!("demo"), &json!(["10.244.0.0/16"])), "Talos {version}");
    }
}

#[test]
fn explicit_endpoint_networks_and_installer_win() {
    let mut input = input("1.10.9", Role::Worker);
    input.control_plane_endpoint = Some("https://k8s.example.com:443".into());
    input.control_plane_addresses.clear();
    input.pod_networks = vec!["10.32.0.0/12".into()];
    input.service_networks = vec!["10.64.0.0/12".into()];
    input.install_image = Some("factory.example/installer:v1.10.9".into());
    let documents = render_documents(&input).unwrap();
    let cluster = &documents[0]["cluster"];
    assert_eq!(cluster["controlPlane"]["endpoint"], "https://k8s.example.com:443");
    assert_eq!(cluster["network"]["serviceSubnets"], json!(["10.64.0.0/12"]));
    assert_eq!(documents[0]["machine"]["install"]["image"], "factory.example/installer:v1.10.9");
    input.control_plane_endpoint = None;
    assert!(matches!(render(&input), Err(TalosError::InvalidInput(_))));
}

#[test]
fn control_planes_bind_the_viewers_group_to_view() {
    for version in VERSIONS {
        let control_plane = render_documents(&input(version, Role::ControlPlane)).unwrap();
        let manifest = if multidoc(version) {
            let document = document(&control_plane, Some("KubeInlineManifestConfig")).unwrap();
            assert_eq!(document["name"], "cms-viewers");
            document["manifest"].as_str().unwrap().to_string()
        } else {
            let manifests = &control_plane[0]["cluster"]["inlineManifests"];
            assert_eq!(manifests[0]["name"], "cms-viewers");
            manifests[0]["contents"].as_str().unwrap().to_string()
        };
        let binding: Value = serde_saphyr::from_str(&manifest).unwrap();
        assert_eq!(binding["kind"], "ClusterRoleBinding");
        assert_eq!(
            binding["roleRef"],
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"})
        );
        assert_eq!(binding["subjects"][0]["kind"], "Group");
        assert_eq!(binding["subjects"][0]["name"], "cms:viewers");
        let worker = render(&input(version, Role::Worker)).unwrap();
        assert!(!worker.contains("cms:viewers"), "Talos {version}: workers carry no manifests");
    }
}

#[test]
fn yaml_output_is_the_documents() {
    for version in ["1.8.4", "1.14.0"] {
        let input = input(version, Role::ControlPlane);
        let documents = render_documents(&input).unwrap();
        let yaml = render(&input).unwrap();
        assert_eq!(yaml, config_yaml(&documents).unwrap());
        assert!(yaml.starts_with("version: v1alpha1\ndebug: false\nmachine:\n"), "{}", &yaml[..60]);
        let parsed: Vec<Value> = serde_saphyr::from_multiple(&yaml).unwrap();
        assert_eq!(parsed, documents, "Talos {version}");
    }
}

#[test]
fn unsupported_versions_and_broken_patches_are_errors() {
    for version in ["1.7.6", "1.15.0", "x"] {
        assert!(
            matches!(render(&input(version, Role::Worker)), Err(TalosError::UnsupportedVersion { .. })),
            "{version}"
        );
    }
    let mut input = input("1.9.6", Role::Worker);
    input.kubernetes_version = "1.31".into();
    assert!(matches!(render(&input), Err(TalosError::InvalidInput(_))));
}

fn strategic(enabled: bool, target: PatchTarget, element: Value) -> ResolvedPatch {
    ResolvedPatch {
        name: "p".into(),
        spec: ConfigPatchSpec { format: PatchFormat::Strategic, target, enabled, patches: vec![element] },
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn disabled_and_empty_patches_leave_the_config_alone(
        version in prop::sample::select(VERSIONS.to_vec()),
        control_plane in any::<bool>(),
        key in "[a-z]{1,8}",
        value in "[a-z0-9]{0,8}",
    ) {
        let role = if control_plane { Role::ControlPlane } else { Role::Worker };
        let plain = render(&input(version, role)).unwrap();
        let mut with = input(version, role);
        with.patches = vec![
            strategic(false, PatchTarget::All, json!({"machine": {key.clone(): value}})),
            strategic(true, PatchTarget::All, json!({})),
        ];
        prop_assert_eq!(render(&with).unwrap(), plain.clone());
        let other = if control_plane { PatchTarget::Worker } else { PatchTarget::ControlPlane };
        with.patches = vec![strategic(true, other, json!({"machine": {key: "x"}}))];
        prop_assert_eq!(render(&with).unwrap(), plain);
    }
}

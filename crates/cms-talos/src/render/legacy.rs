//! The single `v1alpha1` document of Talos 1.8 to 1.13.
//!
//! Field by field it follows what `talosctl gen config` writes for each
//! version, limited to what that version's schema accepts: 1.12 dropped
//! `features.rbac`, `stableHostname`, `apidCheckExtKeyUsage`,
//! `apiServer.disablePodSecurityPolicy` and `machine.registries`; 1.13 dropped
//! `machine.network`.

use secrecy::ExposeSecret;
use serde_json::{Map, Value, json};

use super::{Context, INSTALL_DISK, KUBE_PRISM_PORT, VIEWERS_MANIFEST, VIEWERS_MANIFEST_NAME, b64};

/// The `v1alpha1` document of a control plane or a worker.
pub(super) fn document(context: &Context<'_>) -> Value {
    json!({
        "version": "v1alpha1",
        "debug": false,
        "machine": machine(context),
        "cluster": cluster(context),
    })
}

fn machine(context: &Context<'_>) -> Value {
    let version = context.version;
    let bundle = context.bundle;
    let mut machine = Map::new();
    machine.insert("type".into(), json!(context.role()));
    machine.insert("token".into(), json!(bundle.trustd_token().expose_secret()));
    let (ca, accepted) = super::os_cas(bundle, context.control_plane);
    machine.insert("ca".into(), ca);
    if let Some(accepted) = accepted {
        machine.insert("acceptedCAs".into(), accepted);
    }
    machine.insert("certSANs".into(), json!(context.machine_cert_sans));
    machine.insert(
        "kubelet".into(),
        json!({
            "image": context.image("kubelet"),
            "defaultRuntimeSeccompProfileEnabled": true,
            "disableManifestsDirectory": true,
        }),
    );
    if !version.at_least(13) {
        machine.insert("network".into(), json!({}));
    }
    let mut install = json!({"disk": INSTALL_DISK, "image": context.install_image, "wipe": false});
    if version.at_least(12) {
        install["grubUseUKICmdline"] = json!(true);
    }
    machine.insert("install".into(), install);
    if !version.at_least(12) {
        machine.insert("registries".into(), json!({}));
    }
    machine.insert("features".into(), features(context));
    if context.control_plane {
        machine.insert(
            "nodeLabels".into(),
            json!({"node.kubernetes.io/exclude-from-external-load-balancers": ""}),
        );
    }
    Value::Object(machine)
}

fn features(context: &Context<'_>) -> Value {
    let mut features = Map::new();
    if !context.version.at_least(12) {
        features.insert("rbac".into(), json!(true));
        features.insert("stableHostname".into(), json!(true));
        features.insert("apidCheckExtKeyUsage".into(), json!(true));
    }
    features.insert("diskQuotaSupport".into(), json!(true));
    features.insert("kubePrism".into(), json!({"enabled": true, "port": KUBE_PRISM_PORT}));
    features.insert("hostDNS".into(), json!({"enabled": true, "forwardKubeDNSToHost": true}));
    Value::Object(features)
}

fn cluster(context: &Context<'_>) -> Value {
    let bundle = context.bundle;
    let mut cluster = Map::new();
    cluster.insert("id".into(), json!(bundle.cluster_id()));
    cluster.insert("secret".into(), json!(bundle.cluster_secret().expose_secret()));
    cluster.insert("controlPlane".into(), json!({"endpoint": context.endpoint}));
    cluster.insert("clusterName".into(), json!(context.cluster_name));
    cluster.insert(
        "network".into(),
        json!({
            "dnsDomain": "cluster.local",
            "podSubnets": context.pod_networks,
            "serviceSubnets": context.service_networks,
        }),
    );
    cluster.insert("token".into(), json!(bundle.bootstrap_token().expose_secret()));
    cluster.insert(
        "discovery".into(),
        json!({"enabled": true, "registries": {"kubernetes": {"disabled": true}, "service": {}}}),
    );
    let kubernetes = bundle.config_cas(crate::rotation::Authority::Kubernetes);
    if !kubernetes.accepted.is_empty() {
        let accepted: Vec<Value> =
            kubernetes.accepted.iter().map(|ca| json!({"crt": b64(ca.cert_pem())})).collect();
        cluster.insert("acceptedCAs".into(), json!(accepted));
    }
    if !context.control_plane {
        cluster.insert("ca".into(), json!({"crt": b64(kubernetes.ca.cert_pem())}));
        return Value::Object(cluster);
    }
    let pair = |ca: &crate::CertificateAuthority| json!({"crt": b64(ca.cert_pem()), "key": b64(ca.key_pem().expose_secret())});
    cluster.insert(
        "secretboxEncryptionSecret".into(),
        json!(bundle.secretbox_encryption_secret().expose_secret()),
    );
    cluster.insert("ca".into(), pair(kubernetes.ca));
    cluster.insert("aggregatorCA".into(), pair(bundle.aggregator_ca()));
    cluster
        .insert("serviceAccount".into(), json!({"key": b64(bundle.service_account_key().expose_secret())}));
    cluster.insert("apiServer".into(), api_server(context));
    cluster.insert("controllerManager".into(), json!({"image": context.image("kube-controller-manager")}));
    cluster.insert("proxy".into(), json!({"image": context.image("kube-proxy")}));
    cluster.insert("scheduler".into(), json!({"image": context.image("kube-scheduler")}));
    cluster.insert("etcd".into(), json!({"ca": pair(bundle.etcd_ca())}));
    cluster.insert("extraManifests".into(), json!([]));
    cluster.insert(
        "inlineManifests".into(),
        json!([{"name": VIEWERS_MANIFEST_NAME, "contents": VIEWERS_MANIFEST}]),
    );
    Value::Object(cluster)
}

fn api_server(context: &Context<'_>) -> Value {
    let mut api_server = json!({
        "image": context.image("kube-apiserver"),
        "certSANs": context.api_server_cert_sans,
        "admissionControl": [{"name": "PodSecurity", "configuration": pod_security()}],
        "auditPolicy": {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "Metadata"}]},
    });
    if !context.version.at_least(12) {
        api_server["disablePodSecurityPolicy"] = json!(true);
    }
    api_server
}

/// The PodSecurity admission defaults talosctl writes.
pub(super) fn pod_security() -> Value {
    json!({
        "apiVersion": "pod-security.admission.config.k8s.io/v1alpha1",
        "kind": "PodSecurityConfiguration",
        "defaults": {
            "enforce": "baseline",
            "enforce-version": "latest",
            "audit": "restricted",
            "audit-version": "latest",
            "warn": "restricted",
            "warn-version": "latest",
        },
        "exemptions": {"usernames": [], "runtimeClasses": [], "namespaces": ["kube-system"]},
    })
}

//! The documents of Talos 1.14: a trimmed `v1alpha1` document plus typed ones.
//!
//! From 1.14 the `v1alpha1` schema keeps only `machine.type`, `token`, `ca`,
//! `certSANs`, `features` and `cluster.token`, `etcd`; discovery, install,
//! DNS and every Kubernetes setting live in typed documents, mirroring what
//! `talosctl gen config` writes for 1.14. Typed documents carry PEM text as
//! is, not base64. Worker configs get the Kubernetes CA certificate as an
//! accepted CA and none of the control-plane documents.

use secrecy::ExposeSecret;
use serde_json::{Value, json};

use super::legacy::pod_security;
use super::{Context, INSTALL_DISK, KUBE_PRISM_PORT, VIEWERS_MANIFEST, VIEWERS_MANIFEST_NAME, b64};

/// The public discovery service talosctl configures.
const DISCOVERY_ENDPOINT: &str = "https://discovery.talos.dev/";

/// A typed document of `kind` with the given fields.
fn typed(kind: &str, fields: Value) -> Value {
    let mut document = json!({"apiVersion": "v1alpha1", "kind": kind});
    if let (Some(document), Value::Object(fields)) = (document.as_object_mut(), fields) {
        document.extend(fields);
    }
    document
}

/// Every document of a 1.14 machine config, `v1alpha1` first.
pub(super) fn documents(context: &Context<'_>) -> Vec<Value> {
    let bundle = context.bundle;
    let mut documents = vec![v1alpha1(context)];
    documents.extend([
        typed("DiscoveryServiceConfig", json!({"name": "default", "endpoint": DISCOVERY_ENDPOINT})),
        typed(
            "DiscoveryIdentityConfig",
            json!({"clusterID": bundle.cluster_id(), "clusterSecret": bundle.cluster_secret().expose_secret()}),
        ),
        typed(
            "UnattendedInstall",
            json!({
                "installer": {"image": context.install_image},
                "provisioning": {"diskSelector": {"match": format!("disk.dev_path == '{INSTALL_DISK}'")}, "wipe": false},
            }),
        ),
        typed("ResolverConfig", json!({"hostDNS": {"enabled": true, "forwardKubeDNSToHost": true}})),
        typed("KubeClusterConfig", json!({"clusterName": context.cluster_name, "endpoint": context.endpoint})),
        typed(
            "KubeNetworkConfig",
            json!({
                "dnsDomain": "cluster.local",
                "podSubnets": context.pod_networks,
                "serviceSubnets": context.service_networks,
            }),
        ),
        kubernetes_ca(context),
        typed("KubeletConfig", json!({"image": context.image("kubelet"), "defaultRuntimeSeccompProfileEnabled": true})),
        typed("KubePrismConfig", json!({"port": KUBE_PRISM_PORT})),
    ]);
    if context.control_plane {
        documents.extend(control_plane(context));
    }
    documents
}

fn v1alpha1(context: &Context<'_>) -> Value {
    let bundle = context.bundle;
    let (ca, accepted) = super::os_cas(bundle, context.control_plane);
    let mut cluster = json!({"token": bundle.bootstrap_token().expose_secret()});
    if context.control_plane {
        cluster["etcd"] = json!({"ca": {
            "crt": b64(bundle.etcd_ca().cert_pem()),
            "key": b64(bundle.etcd_ca().key_pem().expose_secret()),
        }});
    }
    let mut config = json!({
        "version": "v1alpha1",
        "debug": false,
        "machine": {
            "type": context.role(),
            "token": bundle.trustd_token().expose_secret(),
            "ca": ca,
            "certSANs": context.machine_cert_sans,
            "features": {"diskQuotaSupport": true},
        },
        "cluster": cluster,
    });
    if let Some(accepted) = accepted {
        config["machine"]["acceptedCAs"] = accepted;
    }
    config
}

fn kubernetes_ca(context: &Context<'_>) -> Value {
    let cas = context.bundle.config_cas(crate::rotation::Authority::Kubernetes);
    let (ca, accepted) = (cas.ca, cas.accepted.iter().map(|ca| ca.cert_pem()));
    if context.control_plane {
        let mut config = json!({"issuingCA": {"cert": ca.cert_pem(), "key": ca.key_pem().expose_secret()}});
        let accepted: Vec<&str> = accepted.collect();
        if !accepted.is_empty() {
            config["acceptedCAs"] = json!(accepted);
        }
        typed("KubeAPIServerCAConfig", config)
    } else {
        let every: Vec<&str> = std::iter::once(ca.cert_pem()).chain(accepted).collect();
        typed("KubeAPIServerCAConfig", json!({"acceptedCAs": every}))
    }
}

fn control_plane(context: &Context<'_>) -> Vec<Value> {
    let bundle = context.bundle;
    let aggregator = bundle.aggregator_ca();
    let role_label = "node-role.kubernetes.io/control-plane";
    vec![
        typed(
            "KubeNodeConfig",
            json!({
                "labels": {role_label: "", "node.kubernetes.io/exclude-from-external-load-balancers": ""},
                "taints": {role_label: ":NoSchedule"},
            }),
        ),
        typed(
            "KubeAggregatorCAConfig",
            json!({"issuingCA": {"cert": aggregator.cert_pem(), "key": aggregator.key_pem().expose_secret()}}),
        ),
        typed(
            "KubeServiceAccountConfig",
            json!({"issuer": {
                "issuerURL": context.endpoint,
                "privateKey": bundle.service_account_key().expose_secret(),
            }}),
        ),
        typed(
            "KubeEtcdEncryptionConfig",
            json!({"config": {"resources": [{
                "resources": ["secrets"],
                "providers": [{"secretbox": {"keys": [{
                    "name": "key1",
                    "secret": bundle.secretbox_encryption_secret().expose_secret(),
                }]}}],
            }]}}),
        ),
        typed("KubeAdmissionControlConfig", json!({"name": "PodSecurity", "configuration": pod_security()})),
        typed(
            "KubeAuditPolicyConfig",
            json!({"configuration": {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "Metadata"}]}}),
        ),
        typed("KubeAuthorizerConfig", json!({"name": "node", "type": "Node"})),
        typed("KubeAuthorizerConfig", json!({"name": "rbac", "type": "RBAC"})),
        typed(
            "KubeAPIServerConfig",
            json!({"image": context.image("kube-apiserver"), "certExtraSANs": context.api_server_cert_sans}),
        ),
        typed("KubeControllerManagerConfig", json!({"image": context.image("kube-controller-manager")})),
        typed("KubeSchedulerConfig", json!({"image": context.image("kube-scheduler")})),
        typed("KubeProxyConfig", json!({"image": context.image("kube-proxy")})),
        typed("KubeFlannelCNIConfig", json!({"backendType": "vxlan", "backendPort": 4789})),
        typed("KubeCoreDNSConfig", json!({"enabled": true})),
        typed(
            "KubeInlineManifestConfig",
            json!({"name": VIEWERS_MANIFEST_NAME, "manifest": VIEWERS_MANIFEST}),
        ),
    ]
}

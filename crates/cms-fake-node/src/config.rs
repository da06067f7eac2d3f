//! What the fake node reads from a machine config: its documents, the
//! `v1alpha1` one among them, the machine type, the OS CA and the image
//! tags of the kubelet and the API server.
//!
//! A machine config is a YAML stream of documents. Talos's config loader
//! (`pkg/machinery/config/configloader`) takes the document with
//! `version: v1alpha1` and no `kind` as the `v1alpha1` one, and the others
//! by their `apiVersion` and `kind` (`KubeletConfig`, `KubeAPIServerConfig`,
//! ...). Up to Talos 1.13 our renderer writes the kubelet image at
//! `machine.kubelet.image` and the API server's at `cluster.apiServer.image`
//! of the `v1alpha1` document; from 1.14 on at `image` of the `KubeletConfig`
//! and `KubeAPIServerConfig` documents.
//!
//! The OS CA is `machine.ca` of the `v1alpha1` document (`crt` and, in a
//! control plane's config only, `key`), with more CAs whose client
//! certificates are taken in `machine.acceptedCAs` (each a `crt`): base64
//! of PEM text, as Talos's `RootOSController`
//! (`internal/app/machined/pkg/controllers/secrets/root.go`) reads them.

use base64::Engine;
use serde_json::Value;

/// A parsed machine config.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MachineConfig {
    documents: Vec<Value>,
}

impl MachineConfig {
    /// Parses a YAML stream; fails on YAML that does not parse, as Talos's
    /// `failed to parse config`, and on a config without a `v1alpha1`
    /// document, which Talos refuses on a configured node.
    pub(crate) fn parse(text: &str) -> Result<MachineConfig, String> {
        let documents: Vec<Value> =
            serde_saphyr::from_multiple(text).map_err(|err| format!("failed to parse config: {err}"))?;
        let config =
            MachineConfig { documents: documents.into_iter().filter(|doc| !doc.is_null()).collect() };
        if config.v1alpha1().is_none() {
            return Err(
                "the applied machine configuration doesn't contain v1alpha1 config, did you mean to \
                        patch the machine config instead?"
                    .into(),
            );
        }
        Ok(config)
    }

    /// The `v1alpha1` document.
    pub(crate) fn v1alpha1(&self) -> Option<&Value> {
        self.documents.iter().find(|doc| doc.get("kind").is_none() && doc["version"] == "v1alpha1")
    }

    /// The first typed document of `kind`.
    fn typed(&self, kind: &str) -> Option<&Value> {
        self.documents.iter().find(|doc| doc["kind"] == kind)
    }

    /// `machine.type`: `controlplane` or `worker`.
    pub(crate) fn machine_type(&self) -> Option<&str> {
        self.v1alpha1()?["machine"]["type"].as_str()
    }

    /// The tag of the kubelet image, such as `v1.32.0`.
    pub(crate) fn kubelet_version(&self) -> Option<String> {
        let image = match self.typed("KubeletConfig") {
            Some(document) => document["image"].as_str(),
            None => self.v1alpha1()?["machine"]["kubelet"]["image"].as_str(),
        };
        image.and_then(image_tag)
    }

    /// The tag of the API server image of a control plane's config.
    pub(crate) fn api_server_version(&self) -> Option<String> {
        let image = match self.typed("KubeAPIServerConfig") {
            Some(document) => document["image"].as_str(),
            None => self.v1alpha1()?["cluster"]["apiServer"]["image"].as_str(),
        };
        image.and_then(image_tag)
    }
}

/// The OS CA a config names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OsCa {
    /// `machine.ca.crt`, PEM.
    pub(crate) cert_pem: Option<String>,
    /// `machine.ca.key`, PEM: only a control plane's config carries it.
    pub(crate) key_pem: Option<String>,
    /// `machine.acceptedCAs[].crt`, PEM.
    pub(crate) accepted: Vec<String>,
}

impl MachineConfig {
    /// `machine.ca` and `machine.acceptedCAs`, when the config names either.
    pub(crate) fn os_ca(&self) -> Option<OsCa> {
        let machine = &self.v1alpha1()?["machine"];
        let cert_pem = pem_field(&machine["ca"]["crt"]);
        let key_pem = pem_field(&machine["ca"]["key"]).filter(|_| cert_pem.is_some());
        let accepted: Vec<String> = match machine["acceptedCAs"].as_array() {
            Some(cas) => cas.iter().filter_map(|ca| pem_field(&ca["crt"])).collect(),
            None => Vec::new(),
        };
        if cert_pem.is_none() && accepted.is_empty() {
            return None;
        }
        Some(OsCa { cert_pem, key_pem, accepted })
    }
}

/// The Kubernetes CAs a control plane's config names: the issuing one
/// (with its key) and those accepted besides, PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KubeCas {
    pub(crate) cert_pem: String,
    pub(crate) key_pem: String,
    pub(crate) accepted: Vec<String>,
}

impl MachineConfig {
    /// `cluster.ca` and `cluster.acceptedCAs` (up to Talos 1.13), or the
    /// `KubeAPIServerCAConfig` document's `issuingCA` and `acceptedCAs`
    /// (from 1.14), when the config carries the issuing key: a control
    /// plane's.
    pub(crate) fn kubernetes_cas(&self) -> Option<KubeCas> {
        if let Some(document) = self.typed("KubeAPIServerCAConfig") {
            let cert_pem = document["issuingCA"]["cert"].as_str()?.to_string();
            let key_pem = document["issuingCA"]["key"].as_str()?.to_string();
            let accepted = match document["acceptedCAs"].as_array() {
                Some(cas) => cas.iter().filter_map(|ca| ca.as_str().map(str::to_string)).collect(),
                None => Vec::new(),
            };
            return Some(KubeCas { cert_pem, key_pem, accepted });
        }
        let cluster = &self.v1alpha1()?["cluster"];
        let cert_pem = pem_field(&cluster["ca"]["crt"])?;
        let key_pem = pem_field(&cluster["ca"]["key"])?;
        let accepted = match cluster["acceptedCAs"].as_array() {
            Some(cas) => cas.iter().filter_map(|ca| pem_field(&ca["crt"])).collect(),
            None => Vec::new(),
        };
        Some(KubeCas { cert_pem, key_pem, accepted })
    }
}

/// A certificate or key of the `v1alpha1` document: base64 of PEM text
/// (PEM text as is is taken too).
fn pem_field(value: &Value) -> Option<String> {
    let text = value.as_str()?;
    if text.trim_start().starts_with("-----BEGIN") {
        return Some(text.to_string());
    }
    let bytes = base64::engine::general_purpose::STANDARD.decode(text.trim()).ok()?;
    String::from_utf8(bytes).ok().filter(|pem| pem.contains("-----BEGIN"))
}

/// The tag of an image reference: `v1.32.0` of
/// `ghcr.io/siderolabs/kubelet:v1.32.0` (a digest after it is dropped).
fn image_tag(image: &str) -> Option<String> {
    let name = image.split_once('@').map_or(image, |(name, _digest)| name);
    let last = name.rsplit('/').next()?;
    let (_, tag) = last.split_once(':')?;
    (!tag.is_empty()).then(|| tag.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEGACY: &str = "\
version: v1alpha1
debug: false
machine:
  type: controlplane
  kubelet:
    image: ghcr.io/siderolabs/kubelet:v1.31.4
cluster:
  apiServer:
    image: registry.k8s.io/kube-apiserver:v1.31.4
";

    const MULTIDOC: &str = "\
version: v1alpha1
debug: false
machine:
  type: worker
cluster:
  token: abc.def
---
apiVersion: v1alpha1
kind: KubeletConfig
image: ghcr.io/siderolabs/kubelet:v1.32.0
---
apiVersion: v1alpha1
kind: KubeAPIServerConfig
image: registry.k8s.io/kube-apiserver:v1.32.1
";

    #[test]
    fn the_v1alpha1_document_and_the_typed_ones_are_read() {
        let legacy = MachineConfig::parse(LEGACY).unwrap();
        assert_eq!(legacy.machine_type(), Some("controlplane"));
        assert_eq!(legacy.kubelet_version().as_deref(), Some("v1.31.4"));
        assert_eq!(legacy.api_server_version().as_deref(), Some("v1.31.4"));
        let multidoc = MachineConfig::parse(MULTIDOC).unwrap();
        assert_eq!(multidoc.machine_type(), Some("worker"));
        assert_eq!(multidoc.kubelet_version().as_deref(), Some("v1.32.0"));
        assert_eq!(multidoc.api_server_version().as_deref(), Some("v1.32.1"));
    }

    #[test]
    fn a_config_without_v1alpha1_or_not_yaml_is_refused() {
        let typed_only =
            "apiVersion: v1alpha1\nkind: KubeletConfig\nimage: ghcr.io/siderolabs/kubelet:v1.32.0\n";
        assert!(MachineConfig::parse(typed_only).unwrap_err().contains("doesn't contain v1alpha1"));
        assert!(MachineConfig::parse("machine: [unclosed").unwrap_err().starts_with("failed to parse"));
    }

    #[test]
    fn the_os_ca_is_read_from_base64_and_a_worker_has_no_key() {
        let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
        let (cert, key) = (
            "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n",
            "-----BEGIN EC PRIVATE KEY-----\nAA==\n-----END EC PRIVATE KEY-----\n",
        );
        let control_plane = format!(
            "version: v1alpha1\nmachine:\n  type: controlplane\n  ca:\n    crt: {}\n    key: {}\n  acceptedCAs:\n  - crt: {}\n",
            b64(cert),
            b64(key),
            b64(cert)
        );
        let os_ca = MachineConfig::parse(&control_plane).unwrap().os_ca().unwrap();
        assert_eq!(os_ca.cert_pem.as_deref(), Some(cert));
        assert_eq!(os_ca.key_pem.as_deref(), Some(key));
        assert_eq!(os_ca.accepted, [cert]);
        let worker = format!(
            "version: v1alpha1\nmachine:\n  type: worker\n  ca:\n    crt: {}\n    key: \"\"\n",
            b64(cert)
        );
        let os_ca = MachineConfig::parse(&worker).unwrap().os_ca().unwrap();
        assert_eq!((os_ca.cert_pem.as_deref(), os_ca.key_pem), (Some(cert), None));
        assert_eq!(MachineConfig::parse(LEGACY).unwrap().os_ca(), None);
    }

    #[test]
    fn a_control_planes_kubernetes_cas_are_read_in_both_forms() {
        let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
        let (cert, key, other) = (
            "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n",
            "-----BEGIN EC PRIVATE KEY-----\nAA==\n-----END EC PRIVATE KEY-----\n",
            "-----BEGIN CERTIFICATE-----\nAQ==\n-----END CERTIFICATE-----\n",
        );
        let legacy = format!(
            "version: v1alpha1\nmachine:\n  type: controlplane\ncluster:\n  ca:\n    crt: {}\n    key: {}\n  acceptedCAs:\n  - crt: {}\n",
            b64(cert),
            b64(key),
            b64(other)
        );
        let cas = MachineConfig::parse(&legacy).unwrap().kubernetes_cas().unwrap();
        assert_eq!(
            (cas.cert_pem.as_str(), cas.key_pem.as_str(), cas.accepted),
            (cert, key, vec![other.to_string()])
        );
        let multidoc = format!(
            "version: v1alpha1\nmachine:\n  type: controlplane\n---\napiVersion: v1alpha1\nkind: KubeAPIServerCAConfig\nissuingCA:\n  cert: {cert:?}\n  key: {key:?}\nacceptedCAs:\n- {other:?}\n"
        );
        let cas = MachineConfig::parse(&multidoc).unwrap().kubernetes_cas().unwrap();
        assert_eq!(
            (cas.cert_pem.as_str(), cas.key_pem.as_str(), cas.accepted),
            (cert, key, vec![other.to_string()])
        );
        let worker =
            format!("version: v1alpha1\nmachine:\n  type: worker\ncluster:\n  ca:\n    crt: {}\n", b64(cert));
        assert_eq!(
            MachineConfig::parse(&worker).unwrap().kubernetes_cas(),
            None,
            "a worker has no issuing key"
        );
    }

    #[test]
    fn image_tags() {
        assert_eq!(image_tag("ghcr.io/siderolabs/kubelet:v1.32.0").as_deref(), Some("v1.32.0"));
        assert_eq!(image_tag("localhost:5000/kubelet:v1.30.1@sha256:00ff").as_deref(), Some("v1.30.1"));
        assert_eq!(image_tag("localhost:5000/kubelet"), None);
    }
}

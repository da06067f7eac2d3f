//! Machine config rendering: the complete Talos config of one machine.
//!
//! Talos 1.8 to 1.13 get one `v1alpha1` document (`version`, `machine`,
//! `cluster`) with the fields that version's schema knows. From 1.14 on,
//! Kubernetes and discovery settings moved out of `v1alpha1` into typed
//! documents (`KubeClusterConfig`, `KubeNetworkConfig`, ...), so 1.14 gets a
//! `v1alpha1` document plus those. Workers carry CA certificates only, never
//! CA keys. Then the config patches apply ([`crate::patch`]).

mod legacy;
mod multidoc;

use std::net::IpAddr;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cms_model::{DEFAULT_POD_NETWORK, DEFAULT_SERVICE_NETWORK, Role, normalize_version};
use serde_json::Value;

use crate::bundle::SecretsBundle;
use crate::error::{Result, TalosError};
use crate::patch::{ResolvedPatch, apply_patches};
use crate::version::TalosVersion;
use crate::yaml;

/// The port of the Kubernetes API server on control-plane machines.
pub const KUBERNETES_API_PORT: u16 = 6443;
/// The group that the control-plane config binds to the `view` ClusterRole.
pub const VIEWERS_GROUP: &str = "cms:viewers";
/// The name of the inline manifest that holds that binding.
pub const VIEWERS_MANIFEST_NAME: &str = "cms-viewers";

/// The KubePrism port, as talosctl enables it.
const KUBE_PRISM_PORT: u16 = 7445;
/// The install disk talosctl defaults to; patches change it.
const INSTALL_DISK: &str = "/dev/sda";

/// The ClusterRoleBinding of [`VIEWERS_GROUP`] to the `view` ClusterRole.
const VIEWERS_MANIFEST: &str = "\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: cms:viewers
  labels:
    app.kubernetes.io/managed-by: cms
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: view
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: Group
  name: cms:viewers
";

/// What a machine config is made of.
#[derive(Debug, Clone)]
pub struct RenderInput<'a> {
    pub cluster_name: String,
    pub role: Role,
    /// `MAJOR.MINOR.PATCH`, with or without a leading `v`; 1.8 to 1.14.
    pub talos_version: String,
    /// `MAJOR.MINOR.PATCH`, with or without a leading `v`: the control-plane
    /// components' version, and the kubelet's unless `kubelet_version` says.
    pub kubernetes_version: String,
    /// The kubelet's version, while a Kubernetes upgrade moves the
    /// control-plane components ahead of it; `kubernetes_version` when absent.
    pub kubelet_version: Option<String>,
    /// `https://HOST:PORT`; when absent, derived from the first control-plane address.
    pub control_plane_endpoint: Option<String>,
    /// The control-plane machines' addresses, in order.
    pub control_plane_addresses: Vec<String>,
    /// Pod CIDRs; the cms default when empty.
    pub pod_networks: Vec<String>,
    /// Service CIDRs; the cms default when empty.
    pub service_networks: Vec<String>,
    /// Extra SANs for the machine and API server certificates.
    pub cert_sans: Vec<String>,
    /// The installer image, with its tag, as `cms_model::installer_image`
    /// chooses it for a tenant's machine (a schematic's or a named
    /// repository); `ghcr.io/siderolabs/installer:v<talosVersion>` when absent.
    pub install_image: Option<String>,
    pub bundle: &'a SecretsBundle,
    /// The resolved patches, in order; disabled ones and ones for the other role are skipped.
    pub patches: Vec<ResolvedPatch>,
}

/// The OS CA a config carries (`machine.ca`, with its key on a control
/// plane) and, while a rotation has them, the CAs it accepts besides
/// (`machine.acceptedCAs`), in the rotation's phase.
fn os_cas(bundle: &SecretsBundle, control_plane: bool) -> (Value, Option<Value>) {
    use secrecy::ExposeSecret;
    let b64 = |text: &str| base64::engine::Engine::encode(&base64::engine::general_purpose::STANDARD, text);
    let cas = bundle.config_cas(crate::rotation::Authority::Os);
    let mut ca = serde_json::json!({"crt": b64(cas.ca.cert_pem())});
    if control_plane {
        ca["key"] = serde_json::json!(b64(cas.ca.key_pem().expose_secret()));
    }
    let accepted: Vec<Value> =
        cas.accepted.iter().map(|ca| serde_json::json!({"crt": b64(ca.cert_pem())})).collect();
    (ca, (!accepted.is_empty()).then_some(Value::Array(accepted)))
}

/// Renders the machine config as YAML (several documents from Talos 1.14 on).
pub fn render(input: &RenderInput<'_>) -> Result<String> {
    config_yaml(&render_documents(input)?)
}

/// Writes config documents (as [`render_documents`] returns them) as the YAML
/// stream [`render`] produces.
pub fn config_yaml(documents: &[Value]) -> Result<String> {
    yaml::documents_to_yaml(documents)
}

/// Renders the machine config as JSON values, the `v1alpha1` document first.
pub fn render_documents(input: &RenderInput<'_>) -> Result<Vec<Value>> {
    let context = Context::new(input)?;
    let mut documents = if context.version.multidoc_kubernetes() {
        multidoc::documents(&context)
    } else {
        vec![legacy::document(&context)]
    };
    apply_patches(&mut documents, &input.patches, input.role)?;
    Ok(documents)
}

/// The control-plane endpoint: the configured one, else
/// `https://<first control-plane address>:6443`.
pub fn control_plane_endpoint(
    configured: Option<&str>,
    control_plane_addresses: &[String],
) -> Result<String> {
    if let Some(endpoint) = configured {
        if !endpoint.starts_with("https://") || endpoint.len() <= "https://".len() {
            return Err(TalosError::InvalidInput(format!(
                "control-plane endpoint {endpoint:?} must be https://HOST[:PORT]"
            )));
        }
        return Ok(endpoint.trim_end_matches('/').to_string());
    }
    let address = control_plane_addresses.first().ok_or_else(|| {
        TalosError::InvalidInput(
            "no control-plane endpoint: configure one or give a control-plane address".into(),
        )
    })?;
    Ok(match address.parse::<IpAddr>() {
        Ok(IpAddr::V6(ip)) => format!("https://[{ip}]:{KUBERNETES_API_PORT}"),
        _ => format!("https://{address}:{KUBERNETES_API_PORT}"),
    })
}

/// The host part of an `https://HOST[:PORT]` endpoint, brackets dropped.
pub fn endpoint_host(endpoint: &str) -> String {
    let rest = endpoint.trim_start_matches("https://");
    let authority = rest.split('/').next().unwrap_or(rest);
    if let Some(bracketed) = authority.strip_prefix('[') {
        return bracketed.split(']').next().unwrap_or(bracketed).to_string();
    }
    authority.rsplit_once(':').map_or(authority, |(host, _)| host).to_string()
}

/// Every value the document builders need, computed once.
struct Context<'a> {
    version: TalosVersion,
    control_plane: bool,
    cluster_name: &'a str,
    kubernetes_version: String,
    kubelet_version: String,
    endpoint: String,
    pod_networks: Vec<String>,
    service_networks: Vec<String>,
    machine_cert_sans: Vec<String>,
    api_server_cert_sans: Vec<String>,
    install_image: String,
    bundle: &'a SecretsBundle,
}

impl<'a> Context<'a> {
    fn new(input: &'a RenderInput<'a>) -> Result<Context<'a>> {
        let version = TalosVersion::supported(&input.talos_version)?;
        if input.cluster_name.trim().is_empty() {
            return Err(TalosError::InvalidInput("the cluster name is empty".into()));
        }
        let kubernetes_version = normalize_version("kubernetesVersion", &input.kubernetes_version)
            .map_err(|err| TalosError::InvalidInput(err.to_string()))?;
        let kubelet_version = match &input.kubelet_version {
            Some(kubelet) => normalize_version("kubeletVersion", kubelet)
                .map_err(|err| TalosError::InvalidInput(err.to_string()))?,
            None => kubernetes_version.clone(),
        };
        let endpoint =
            control_plane_endpoint(input.control_plane_endpoint.as_deref(), &input.control_plane_addresses)?;
        let or_default = |networks: &[String], default: &str| {
            if networks.is_empty() { vec![default.to_string()] } else { networks.to_vec() }
        };
        let mut api_server_cert_sans = vec![endpoint_host(&endpoint)];
        for san in &input.cert_sans {
            if !api_server_cert_sans.contains(san) {
                api_server_cert_sans.push(san.clone());
            }
        }
        Ok(Context {
            version,
            control_plane: input.role == Role::ControlPlane,
            cluster_name: &input.cluster_name,
            kubernetes_version,
            kubelet_version,
            endpoint,
            pod_networks: or_default(&input.pod_networks, DEFAULT_POD_NETWORK),
            service_networks: or_default(&input.service_networks, DEFAULT_SERVICE_NETWORK),
            machine_cert_sans: input.cert_sans.clone(),
            api_server_cert_sans,
            install_image: input
                .install_image
                .clone()
                .unwrap_or_else(|| format!("ghcr.io/siderolabs/installer:v{version}")),
            bundle: input.bundle,
        })
    }

    fn role(&self) -> &'static str {
        if self.control_plane { "controlplane" } else { "worker" }
    }

    /// A Kubernetes component image for the cluster's Kubernetes version.
    fn image(&self, component: &str) -> String {
        match component {
            "kubelet" => format!("ghcr.io/siderolabs/kubelet:v{}", self.kubelet_version),
            other => format!("registry.k8s.io/{other}:v{}", self.kubernetes_version),
        }
    }
}

/// Base64 of PEM text: how `v1alpha1` carries certificates and keys.
fn b64(pem: &str) -> String {
    STANDARD.encode(pem.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_derived_from_the_first_control_plane_address() {
        let addresses = |list: &[&str]| list.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        assert_eq!(
            control_plane_endpoint(None, &addresses(&["10.0.0.5", "10.0.0.6"])).unwrap(),
            "https://10.0.0.5:6443"
        );
        assert_eq!(control_plane_endpoint(None, &addresses(&["fd00::5"])).unwrap(), "https://[fd00::5]:6443");
        assert_eq!(
            control_plane_endpoint(Some("https://k.example:443/"), &[]).unwrap(),
            "https://k.example:443"
        );
        assert!(control_plane_endpoint(None, &[]).is_err());
        assert!(control_plane_endpoint(Some("http://x"), &[]).is_err());
    }

    #[test]
    fn endpoint_hosts_drop_scheme_port_and_brackets() {
        assert_eq!(endpoint_host("https://10.0.0.5:6443"), "10.0.0.5");
        assert_eq!(endpoint_host("https://[fd00::5]:6443"), "fd00::5");
        assert_eq!(endpoint_host("https://k.example"), "k.example");
    }
}

//! The patch sets that every rendered config is validated with.
//!
//! Talos 1.12 moved network settings out of `machine.network` into typed
//! documents (`LinkConfig`, `VLANConfig`, `HostnameConfig`) and 1.14 moved
//! the Kubernetes settings into typed documents too, so the sets follow the
//! version; each keeps its intent (strategic merge, JSON patch, delete,
//! network interfaces).

use cms_model::{ConfigPatchSpec, PatchFormat, PatchTarget};
use cms_talos::ResolvedPatch;
use serde_json::{Value, json};

use crate::multidoc;

/// A named set of patches and whether rendering with it must succeed.
pub(crate) struct PatchSet {
    pub(crate) name: &'static str,
    pub(crate) patches: Vec<ResolvedPatch>,
    /// `None` when rendering succeeds, else a text the error contains.
    pub(crate) refused_with: Option<&'static str>,
}

pub(crate) fn patch(name: &str, format: PatchFormat, patches: Vec<Value>) -> ResolvedPatch {
    ResolvedPatch {
        name: name.into(),
        spec: ConfigPatchSpec { format, target: PatchTarget::All, enabled: true, patches },
    }
}

fn typed(kind: &str, fields: Value) -> Value {
    let mut document = json!({"apiVersion": "v1alpha1", "kind": kind});
    document.as_object_mut().unwrap().extend(fields.as_object().unwrap().clone());
    document
}

/// The patch sets for `talos_version`.
pub(crate) fn sets(talos_version: &str) -> Vec<PatchSet> {
    let new_network = !matches!(talos_version.split('.').nth(1), Some("8" | "9" | "10" | "11"));
    let multidoc = multidoc(talos_version);
    let mut sets = vec![PatchSet { name: "none", patches: vec![], refused_with: None }];
    sets.push(PatchSet { name: "strategic", patches: vec![strategic(multidoc)], refused_with: None });
    sets.push(PatchSet {
        name: "jsonpatch",
        patches: vec![json_patch()],
        refused_with: multidoc.then_some("single-document"),
    });
    sets.push(PatchSet { name: "delete", patches: vec![delete(multidoc)], refused_with: None });
    let interfaces = if new_network { typed_interfaces() } else { legacy_interfaces() };
    sets.push(PatchSet { name: "interfaces", patches: interfaces, refused_with: None });
    sets
}

fn strategic(multidoc: bool) -> ResolvedPatch {
    if multidoc {
        return patch(
            "strategic",
            PatchFormat::Strategic,
            vec![
                json!({"machine": {"certSANs": ["patched.example.com"]}}),
                typed("KubeletConfig", json!({"extraArgs": {"rotate-server-certificates": "true"}})),
                typed("KubeNetworkConfig", json!({"podSubnets": ["10.32.0.0/12"]})),
                typed(
                    "UnattendedInstall",
                    json!({"provisioning": {"diskSelector": {"match": "disk.dev_path == '/dev/vda'"}}}),
                ),
            ],
        );
    }
    patch(
        "strategic",
        PatchFormat::Strategic,
        vec![json!({
            "machine": {
                "certSANs": ["patched.example.com"],
                "install": {"disk": "/dev/vda"},
                "kubelet": {"extraArgs": {"rotate-server-certificates": "true"}},
            },
            "cluster": {"network": {"podSubnets": ["10.32.0.0/12"]}},
        })],
    )
}

fn json_patch() -> ResolvedPatch {
    patch(
        "jsonpatch",
        PatchFormat::JsonPatch,
        vec![
            json!({"op": "add", "path": "/machine/kubelet/extraArgs", "value": {"v": "2"}}),
            json!({"op": "replace", "path": "/machine/install/disk", "value": "/dev/nvme0n1"}),
            json!({"op": "add", "path": "/machine/certSANs/-", "value": "json.example.com"}),
            json!({"op": "remove", "path": "/cluster/discovery"}),
        ],
    )
}

fn delete(multidoc: bool) -> ResolvedPatch {
    if multidoc {
        return patch(
            "delete",
            PatchFormat::Strategic,
            vec![
                typed("KubePrismConfig", json!({"$patch": "delete"})),
                typed("DiscoveryServiceConfig", json!({"name": "default", "$patch": "delete"})),
                json!({"machine": {"features": {"diskQuotaSupport": {"$patch": "delete"}}}}),
            ],
        );
    }
    patch(
        "delete",
        PatchFormat::Strategic,
        vec![json!({
            "machine": {"features": {"kubePrism": {"$patch": "delete"}}},
            "cluster": {"discovery": {"$patch": "delete"}},
        })],
    )
}

fn legacy_interfaces() -> Vec<ResolvedPatch> {
    let first = json!({"machine": {"network": {
        "hostname": "node-1",
        "interfaces": [
            {"interface": "eth0", "dhcp": true, "vlans": [{"vlanId": 100, "addresses": ["192.168.100.2/24"]}]},
            {"deviceSelector": {"hardwareAddr": "00:11:*"}, "addresses": ["10.0.0.2/24"],
             "routes": [{"network": "0.0.0.0/0", "gateway": "10.0.0.1"}]},
            {"interface": "eth9", "dhcp": true},
        ],
    }}});
    let second = json!({"machine": {"network": {"interfaces": [
        {"interface": "eth0", "mtu": 9000, "vlans": [{"vlanId": 100, "mtu": 1500}, {"vlanId": 200, "dhcp": true}]},
        {"interface": "eth9", "$patch": "delete"},
    ]}}});
    vec![
        patch("interfaces", PatchFormat::Strategic, vec![first]),
        patch("interfaces-more", PatchFormat::Strategic, vec![second]),
    ]
}

fn typed_interfaces() -> Vec<ResolvedPatch> {
    let first = vec![
        typed("HostnameConfig", json!({"hostname": "node-1", "auto": "off"})),
        typed(
            "LinkConfig",
            json!({"name": "eth0", "up": true, "addresses": [{"address": "10.0.0.2/24"}],
            "routes": [{"gateway": "10.0.0.1"}]}),
        ),
        typed("VLANConfig", json!({"name": "eth0.100", "parent": "eth0", "vlanID": 100})),
        typed("LinkConfig", json!({"name": "eth9", "up": true})),
    ];
    let second = vec![
        typed("LinkConfig", json!({"name": "eth0", "mtu": 9000})),
        typed("LinkConfig", json!({"name": "eth9", "$patch": "delete"})),
    ];
    vec![
        patch("interfaces", PatchFormat::Strategic, first),
        patch("interfaces-more", PatchFormat::Strategic, second),
    ]
}

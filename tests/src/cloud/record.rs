//! The cloud record the fake providers keep, read back: one JSON file per
//! resource (`resources/<type>/<id>.json`, `{type, id, attributes, boot}`),
//! and `events.jsonl`, one line per create, update or delete. From them,
//! the instances of tenants (their machine, address and the machine config
//! they booted with) and the tenants' load balancer addresses.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

/// The instance types, with how each carries its tags and address.
const OCI_INSTANCE: &str = "oci_core_instance";
const OPENSTACK_INSTANCE: &str = "openstack_compute_instance_v2";
const OCI_BALANCER: &str = "oci_network_load_balancer_network_load_balancer";
const OPENSTACK_BALANCER: &str = "openstack_lb_loadbalancer_v2";
const OPENSTACK_FLOATING_IP: &str = "openstack_networking_floatingip_v2";
const OPENSTACK_FLOATING_IP_ASSOCIATION: &str = "openstack_networking_floatingip_associate_v2";

/// The tags that name an instance's tenant and machine.
const TENANT_TAG: &str = "cms-tenant";
const MACHINE_TAG: &str = "cms-machine";

/// One resource of the record, as the provider keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    /// The resource type, such as `oci_core_instance`.
    pub kind: String,
    pub id: String,
    /// Its attributes, as in the state.
    pub attributes: Value,
    /// An instance's user data, exactly as it booted with it (base64 on
    /// OCI, the text on OpenStack).
    pub user_data: Option<String>,
}

/// One change of the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudEvent {
    /// `create`, `update` or `delete`.
    pub op: String,
    /// The resource type.
    pub kind: String,
    pub id: String,
    /// The resource's display name or name, if it has one.
    pub name: Option<String>,
    /// Unix milliseconds.
    pub at: u64,
}

/// An instance tagged with a tenant and a machine, ready to boot.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Instance {
    pub(crate) tenant: String,
    pub(crate) machine: String,
    pub(crate) id: String,
    pub(crate) ip: IpAddr,
    /// The machine config it booted with, decoded.
    pub(crate) config: String,
}

/// The resources of type `kind`, by id; files that are not whole JSON
/// records are skipped.
/// Writes a record file as the fake providers do (a temporary file,
/// renamed): for tests of the datacenter without an engine.
pub fn write(record: &Path, kind: &str, id: &str, attributes: Value, user_data: Option<&str>) {
    let dir = record.join("resources").join(kind);
    std::fs::create_dir_all(&dir).expect("the record's directory");
    let mut body = serde_json::json!({"type": kind, "id": id, "attributes": attributes});
    if let Some(user_data) = user_data {
        body["boot"] = serde_json::json!({"user_data": user_data});
    }
    let temporary = dir.join(format!(".{id}.tmp"));
    std::fs::write(&temporary, body.to_string()).expect("a record file");
    std::fs::rename(temporary, dir.join(format!("{id}.json"))).expect("a record file");
}

pub(crate) fn resources(record: &Path, kind: &str) -> Vec<Resource> {
    let Ok(entries) = std::fs::read_dir(record.join("resources").join(kind)) else { return Vec::new() };
    let mut paths: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "json"))
        .collect();
    paths.sort();
    paths.iter().filter_map(|path| parse_resource(&std::fs::read_to_string(path).ok()?)).collect()
}

fn parse_resource(text: &str) -> Option<Resource> {
    let value: Value = serde_json::from_str(text).ok()?;
    Some(Resource {
        kind: value["type"].as_str()?.to_string(),
        id: value["id"].as_str()?.to_string(),
        attributes: value["attributes"].clone(),
        user_data: value["boot"]["user_data"].as_str().map(str::to_string),
    })
}

/// The events so far, in order; a line being written is skipped.
pub(crate) fn events(record: &Path) -> Vec<CloudEvent> {
    let text = std::fs::read_to_string(record.join("events.jsonl")).unwrap_or_default();
    text.lines().filter_map(parse_event).collect()
}

fn parse_event(line: &str) -> Option<CloudEvent> {
    let value: Value = serde_json::from_str(line).ok()?;
    Some(CloudEvent {
        op: value["op"].as_str()?.to_string(),
        kind: value["type"].as_str()?.to_string(),
        id: value["id"].as_str()?.to_string(),
        name: value["name"].as_str().map(str::to_string),
        at: value["at"].as_u64().unwrap_or_default(),
    })
}

/// Whether `kind` is an instance type.
pub(crate) fn is_instance(kind: &str) -> bool {
    kind == OCI_INSTANCE || kind == OPENSTACK_INSTANCE
}

/// Why a tagged instance cannot boot: its id, and the reason.
pub(crate) type Unbootable = (String, String);

/// Every tagged instance of the record: `Ok` when it can boot, `Err` when
/// its address or user data are unusable.
pub(crate) fn instances(record: &Path) -> Vec<Result<Instance, Unbootable>> {
    let oci = resources(record, OCI_INSTANCE).into_iter().map(|resource| (resource, "freeform_tags"));
    let openstack = resources(record, OPENSTACK_INSTANCE).into_iter().map(|resource| (resource, "metadata"));
    oci.chain(openstack).filter_map(|(resource, tags)| instance(&resource, tags)).collect()
}

/// The instance of `resource`, whose tenant and machine are in its map
/// attribute `tags`; `None` when it is not tagged.
fn instance(resource: &Resource, tags: &str) -> Option<Result<Instance, Unbootable>> {
    let tags = &resource.attributes[tags];
    let tenant = tags[TENANT_TAG].as_str()?.to_string();
    let machine = tags[MACHINE_TAG].as_str()?.to_string();
    let id = resource.id.clone();
    let address = match resource.kind.as_str() {
        OCI_INSTANCE => &resource.attributes["private_ip"],
        _ => &resource.attributes["access_ip_v4"],
    };
    let Some(ip) = address.as_str().and_then(|text| text.parse().ok()) else {
        return Some(Err((id, format!("no address in {address}"))));
    };
    let Some(user_data) = &resource.user_data else {
        return Some(Err((id, "no user data".into())));
    };
    let config = match resource.kind.as_str() {
        OCI_INSTANCE => match STANDARD.decode(user_data.trim()).map(String::from_utf8) {
            Ok(Ok(config)) => config,
            _ => return Some(Err((id, "the user data is not base64 of UTF-8 text".into()))),
        },
        _ => user_data.clone(),
    };
    Some(Ok(Instance { tenant, machine, id, ip, config }))
}

/// Each tenant's load balancer address: on OCI, the network load
/// balancer's public IP when it has one, else its first; on OpenStack, the floating IP associated with the
/// load balancer's VIP port, else the VIP.
pub(crate) fn balancers(record: &Path) -> BTreeMap<String, IpAddr> {
    let mut found = BTreeMap::new();
    for resource in resources(record, OCI_BALANCER) {
        let tenant = resource.attributes["freeform_tags"][TENANT_TAG].as_str();
        let addresses = resource.attributes["ip_addresses"].as_array().cloned().unwrap_or_default();
        let public = addresses.iter().find(|entry| entry["is_public"] == true);
        let entry = public.or(addresses.first());
        let ip = entry.and_then(|entry| entry["ip_address"].as_str()).and_then(|ip| ip.parse().ok());
        if let (Some(tenant), Some(ip)) = (tenant, ip) {
            found.entry(tenant.to_string()).or_insert(ip);
        }
    }
    let floating = floating_ips(record);
    for resource in resources(record, OPENSTACK_BALANCER) {
        let tags = resource.attributes["tags"].as_array().cloned().unwrap_or_default();
        let tenant = tags.iter().filter_map(Value::as_str).find_map(|tag| tag.strip_prefix("cms-tenant="));
        let port = resource.attributes["vip_port_id"].as_str().filter(|port| !port.is_empty());
        let vip = resource.attributes["vip_address"].as_str().and_then(|ip| ip.parse().ok());
        let ip = port.and_then(|port| floating.get(port).copied()).or(vip);
        if let (Some(tenant), Some(ip)) = (tenant, ip) {
            found.entry(tenant.to_string()).or_insert(ip);
        }
    }
    found
}

/// OpenStack's floating IPs by the port they are associated with, whether
/// through their own `port_id` or an association resource.
fn floating_ips(record: &Path) -> BTreeMap<String, IpAddr> {
    let mut by_port = BTreeMap::new();
    let ips = resources(record, OPENSTACK_FLOATING_IP);
    let associations = resources(record, OPENSTACK_FLOATING_IP_ASSOCIATION);
    let own = ips.iter().map(|ip| (&ip.attributes["port_id"], &ip.attributes["address"]));
    let associated =
        associations.iter().map(|link| (&link.attributes["port_id"], &link.attributes["floating_ip"]));
    for (port, address) in own.chain(associated) {
        let port = port.as_str().filter(|port| !port.is_empty());
        let address = address.as_str().and_then(|ip| ip.parse().ok());
        if let (Some(port), Some(address)) = (port, address) {
            by_port.insert(port.to_string(), address);
        }
    }
    by_port
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn instances_of_both_clouds_with_their_configs_decoded() {
        let record = tempfile::tempdir().unwrap();
        let tags = json!({"cms-tenant": "acme", "cms-machine": "cp-0"});
        let attributes = json!({"private_ip": "127.1.2.3", "freeform_tags": tags});
        write(record.path(), OCI_INSTANCE, "ocid1.instance.oc1..1", attributes, Some("dHlwZTogd29ya2Vy"));
        let tags = json!({"cms-tenant": "beta", "cms-machine": "w-0"});
        let attributes = json!({"access_ip_v4": "127.1.2.4", "metadata": tags});
        write(record.path(), OPENSTACK_INSTANCE, "uuid-1", attributes, Some("type: controlplane"));
        let untagged = json!({"private_ip": "127.1.2.5", "freeform_tags": {}});
        write(record.path(), OCI_INSTANCE, "ocid1.instance.oc1..2", untagged, Some(""));
        let tags = json!({"cms-tenant": "acme", "cms-machine": "cp-1"});
        let attributes = json!({"private_ip": "127.1.2.6", "freeform_tags": tags});
        write(record.path(), OCI_INSTANCE, "ocid1.instance.oc1..3", attributes, Some("not base64!"));

        let found = instances(record.path());
        assert_eq!(found.len(), 3, "the untagged instance is not ours: {found:?}");
        let oci = found[0].clone().unwrap();
        assert_eq!((oci.tenant.as_str(), oci.machine.as_str()), ("acme", "cp-0"));
        assert_eq!((oci.ip.to_string(), oci.config.as_str()), ("127.1.2.3".into(), "type: worker"));
        let (id, why) = found[1].clone().unwrap_err();
        assert_eq!(id, "ocid1.instance.oc1..3");
        assert!(why.contains("not base64"), "{why}");
        let openstack = found[2].clone().unwrap();
        assert_eq!((openstack.id.as_str(), openstack.config.as_str()), ("uuid-1", "type: controlplane"));
    }

    #[test]
    fn load_balancers_answer_on_their_floating_ip_when_one_is_associated() {
        let record = tempfile::tempdir().unwrap();
        let nlb = json!({"ip_addresses": [{"ip_address": "127.1.2.9", "is_public": false},
                                          {"ip_address": "127.1.2.10", "is_public": true}],
                         "freeform_tags": {"cms-tenant": "acme"}});
        write(record.path(), OCI_BALANCER, "ocid1.nlb", nlb, None);
        let lb = |vip: &str, port: &str, tenant: &str| json!({"vip_address": vip, "vip_port_id": port, "tags": ["other", format!("cms-tenant={tenant}")]});
        write(record.path(), OPENSTACK_BALANCER, "lb-1", lb("127.1.2.11", "port-1", "beta"), None);
        write(record.path(), OPENSTACK_BALANCER, "lb-2", lb("127.1.2.12", "port-2", "gamma"), None);
        write(record.path(), OPENSTACK_BALANCER, "lb-3", lb("127.1.2.13", "port-3", "delta"), None);
        let fip = json!({"address": "127.1.2.20", "port_id": "port-1"});
        write(record.path(), OPENSTACK_FLOATING_IP, "fip-1", fip, None);
        let fip = json!({"address": "127.1.2.21", "port_id": ""});
        write(record.path(), OPENSTACK_FLOATING_IP, "fip-2", fip, None);
        let link = json!({"floating_ip": "127.1.2.21", "port_id": "port-2"});
        write(record.path(), OPENSTACK_FLOATING_IP_ASSOCIATION, "link-2", link, None);

        let found: Vec<(String, String)> =
            balancers(record.path()).into_iter().map(|(tenant, ip)| (tenant, ip.to_string())).collect();
        let expected = [
            ("acme", "127.1.2.10"),
            ("beta", "127.1.2.20"),
            ("delta", "127.1.2.13"),
            ("gamma", "127.1.2.21"),
        ];
        assert_eq!(found, expected.map(|(tenant, ip)| (tenant.to_string(), ip.to_string())));
    }

    #[test]
    fn events_skip_a_line_being_written() {
        let record = tempfile::tempdir().unwrap();
        let lines = "{\"op\":\"create\",\"type\":\"oci_core_instance\",\"id\":\"i-1\",\"name\":\"acme-cp-0\",\"at\":5}\n\
                     {\"op\":\"delete\",\"type\":\"oci_core_instance\",\"id\":\"i-1\",\"name\":null,\"at\":7}\n{\"op\":\"cre";
        std::fs::write(record.path().join("events.jsonl"), lines).unwrap();
        let found = events(record.path());
        assert_eq!(found.len(), 2);
        assert_eq!(
            (found[0].op.as_str(), found[0].name.as_deref(), found[0].at),
            ("create", Some("acme-cp-0"), 5)
        );
        assert_eq!((found[1].op.as_str(), found[1].name.as_deref()), ("delete", None));
    }
}

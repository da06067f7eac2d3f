//! What the tenant's security group admits, the same on every cloud: what
//! Talos and Kubernetes need between the nodes, and the node API and the
//! Kubernetes API from where the service and the tenant's users are
//! ([`crate::Network::admin_cidrs`]). Everything else inbound is refused;
//! outbound is open (images, time, the discovery service).

/// A transport protocol of a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    Tcp,
    Udp,
}

impl Protocol {
    /// The name OpenStack takes.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
        }
    }

    /// The IANA number OCI takes.
    pub(crate) fn number(self) -> &'static str {
        match self {
            Protocol::Tcp => "6",
            Protocol::Udp => "17",
        }
    }
}

/// Where a rule admits traffic from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// The tenant's nodes (and its load balancer), which share the group.
    Nodes,
    /// Each of the administrative CIDRs.
    Admin,
}

/// One inbound rule: a name that is part of a resource name, the
/// protocol, the first and last port, and the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rule {
    pub(crate) name: &'static str,
    pub(crate) protocol: Protocol,
    pub(crate) ports: (u16, u16),
    pub(crate) source: Source,
}

const fn rule(name: &'static str, protocol: Protocol, ports: (u16, u16), source: Source) -> Rule {
    Rule { name, protocol, ports, source }
}

/// Every inbound rule of a tenant's security group.
pub(crate) const RULES: [Rule; 10] = [
    // apid: the node API, for the service, talosctl and the other nodes.
    rule("talos_api", Protocol::Tcp, (50000, 50000), Source::Nodes),
    rule("talos_api_admin", Protocol::Tcp, (50000, 50000), Source::Admin),
    // trustd: workers fetch their certificates from the control planes.
    rule("trustd", Protocol::Tcp, (50001, 50001), Source::Nodes),
    // The Kubernetes API, for the nodes, the service and the users.
    rule("kubernetes_api", Protocol::Tcp, (6443, 6443), Source::Nodes),
    rule("kubernetes_api_admin", Protocol::Tcp, (6443, 6443), Source::Admin),
    // etcd's client and peer ports, between control planes.
    rule("etcd", Protocol::Tcp, (2379, 2380), Source::Nodes),
    // The kubelet API, for the API server.
    rule("kubelet", Protocol::Tcp, (10250, 10250), Source::Nodes),
    // Flannel, Talos's default CNI: VXLAN on the IANA port and on Linux's
    // default one.
    rule("flannel_vxlan", Protocol::Udp, (4789, 4789), Source::Nodes),
    rule("flannel_vxlan_linux", Protocol::Udp, (8472, 8472), Source::Nodes),
    // KubeSpan's WireGuard, when a patch turns it on.
    rule("kubespan", Protocol::Udp, (51820, 51820), Source::Nodes),
];

/// The administrative CIDRs, `0.0.0.0/0` when none is set.
pub(crate) fn admin_cidrs(configured: &[String]) -> Vec<String> {
    if configured.is_empty() { vec!["0.0.0.0/0".to_string()] } else { configured.to_vec() }
}

/// The resource names and sources of `rule`: one for the nodes, one per
/// administrative CIDR (`<name>_<index>`).
pub(crate) fn instances(rule: &Rule, admin: &[String]) -> Vec<(String, Option<String>)> {
    match rule.source {
        Source::Nodes => vec![(rule.name.to_string(), None)],
        Source::Admin => admin
            .iter()
            .enumerate()
            .map(|(index, cidr)| (format!("{}_{index}", rule.name), Some(cidr.clone())))
            .collect(),
    }
}

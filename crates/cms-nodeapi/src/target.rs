//! Where a node API call goes: an endpoint, and optionally the node behind it.

use std::net::{IpAddr, SocketAddr};

use rustls::pki_types::ServerName;

use crate::error::NodeApiError;

/// The port apid listens on.
pub const NODE_API_PORT: u16 = 50000;

/// An apid endpoint and the node the call is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeTarget {
    host: String,
    port: u16,
    node: Option<String>,
}

impl NodeTarget {
    /// Parses `IP:port`, `[IPv6]:port`, `host:port`, or an address without a
    /// port, which gets [`NODE_API_PORT`].
    pub fn parse(address: &str) -> Result<NodeTarget, NodeApiError> {
        let invalid = || NodeApiError::InvalidAddress(address.to_string());
        if let Ok(socket) = address.parse::<SocketAddr>() {
            return Ok(NodeTarget { host: socket.ip().to_string(), port: socket.port(), node: None });
        }
        if let Ok(ip) = address.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
            return Ok(NodeTarget { host: ip.to_string(), port: NODE_API_PORT, node: None });
        }
        let (host, port) = match address.rsplit_once(':') {
            Some((host, port)) => (host, port.parse::<u16>().map_err(|_| invalid())?),
            None => (address, NODE_API_PORT),
        };
        if host.is_empty() || ServerName::try_from(host).is_err() {
            return Err(invalid());
        }
        Ok(NodeTarget { host: host.to_string(), port, node: None })
    }

    /// Routes the call through this endpoint to `node` (gRPC metadata `node`).
    pub fn with_node(mut self, node: impl Into<String>) -> NodeTarget {
        self.node = Some(node.into());
        self
    }

    /// The host: an IP address or a DNS name.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The node the call is routed to, if not the endpoint itself.
    pub fn node(&self) -> Option<&str> {
        self.node.as_deref()
    }

    /// `host:port`, with brackets around an IPv6 address.
    pub fn endpoint(&self) -> String {
        match self.host.parse::<IpAddr>() {
            Ok(IpAddr::V6(ip)) => format!("[{ip}]:{}", self.port),
            _ => format!("{}:{}", self.host, self.port),
        }
    }

    /// The name the server certificate must carry.
    pub(crate) fn server_name(&self) -> Result<ServerName<'static>, NodeApiError> {
        ServerName::try_from(self.host.clone()).map_err(|_| NodeApiError::InvalidAddress(self.host.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(address: &str, endpoint: &str) {
        assert_eq!(NodeTarget::parse(address).unwrap().endpoint(), endpoint, "{address}");
    }

    #[test]
    fn addresses() {
        check("10.0.0.1:50000", "10.0.0.1:50000");
        check("127.0.0.1:4242", "127.0.0.1:4242");
        check("10.0.0.1", "10.0.0.1:50000");
        check("[fd00::1]:5", "[fd00::1]:5");
        check("fd00::1", "[fd00::1]:50000");
        check("node-1.example:7", "node-1.example:7");
        check("node-1.example", "node-1.example:50000");
        for bad in ["", ":1", "a:b", "bad name!:1"] {
            assert!(NodeTarget::parse(bad).is_err(), "{bad}");
        }
        let routed = NodeTarget::parse("10.0.0.1").unwrap().with_node("10.0.0.2");
        assert_eq!(routed.node(), Some("10.0.0.2"));
    }
}

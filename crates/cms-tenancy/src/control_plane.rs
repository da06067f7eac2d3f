//! Where a tenant's control plane is: the addresses of its control-plane
//! machines, and the Kubernetes endpoint that client and machine configs use.
//!
//! A machine is a control plane when [`Machine::role`] says so. Its address
//! is the host of `spec.managementAddress`. Machines being deleted are left
//! out. The endpoint is the tenant's `controlPlaneEndpoint` when set, else
//! the one the service made for it (the load balancer of a cloud tenant,
//! [`MADE_ENDPOINT_ANNOTATION`]), else derived from the first control-plane
//! address; with none, documents that need it are [`TenancyError::NotReady`].

use std::net::SocketAddr;

use cms_model::{Kind, Machine, Role, Tenant};
use cms_store::Store;

use crate::error::TenancyError;

/// The host of a `spec.managementAddress` (`IP:port`, `[IPv6]:port` or a bare host).
pub(crate) fn address_host(address: &str) -> String {
    match address.parse::<SocketAddr>() {
        Ok(socket) => socket.ip().to_string(),
        Err(_) => address.trim_start_matches('[').trim_end_matches(']').to_string(),
    }
}

/// The addresses of the tenant's control-plane machines, in machine-name order.
pub(crate) fn addresses(store: &dyn Store, tenant: &Tenant) -> Result<Vec<String>, TenancyError> {
    let groups = tenant.spec.node_groups.as_deref().unwrap_or_default();
    let mut addresses = Vec::new();
    for object in store.all(Kind::Machine, Some(tenant.metadata.name.clone())) {
        if object.deleting {
            continue;
        }
        let machine: Machine = object.parse().map_err(TenancyError::corrupt(&object.key))?;
        let Some(address) = machine.spec.management_address.as_deref() else { continue };
        if machine.role(groups) == Some(Role::ControlPlane) {
            addresses.push(address_host(address));
        }
    }
    Ok(addresses)
}

/// The tenant annotation holding the control-plane endpoint the service
/// made for a tenant without a `controlPlaneEndpoint` (the address of the
/// load balancer before its cloud control planes), `https://IP:6443`.
pub const MADE_ENDPOINT_ANNOTATION: &str = "service.io/control-plane-endpoint";

/// The endpoint set on the tenant, or else the one the service made for it.
pub fn set_endpoint(tenant: &Tenant) -> Option<String> {
    let made = || tenant.metadata.annotations.get(MADE_ENDPOINT_ANNOTATION).cloned();
    tenant.spec.control_plane_endpoint.clone().or_else(made)
}

/// The Kubernetes API endpoint, `https://HOST:PORT`: set or made, else derived.
pub(crate) fn endpoint(tenant: &Tenant, addresses: &[String]) -> Result<String, TenancyError> {
    let set = set_endpoint(tenant);
    let configured = set.as_deref();
    if configured.is_none() && addresses.is_empty() {
        return Err(TenancyError::NotReady(format!(
            "tenant {:?} has no control-plane endpoint yet: set spec.controlPlaneEndpoint, \
             or wait until its control-plane machines exist",
            tenant.metadata.name
        )));
    }
    Ok(cms_talos::control_plane_endpoint(configured, addresses)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_drop_their_port_and_brackets() {
        assert_eq!(address_host("10.0.0.1:50000"), "10.0.0.1");
        assert_eq!(address_host("[fd00::1]:50000"), "fd00::1");
        assert_eq!(address_host("10.0.0.2"), "10.0.0.2");
        assert_eq!(address_host("node-1.example.com"), "node-1.example.com");
    }
}

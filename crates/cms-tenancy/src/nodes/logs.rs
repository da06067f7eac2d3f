//! Which node a machine's logs come from: its `spec.managementAddress`.

use cms_model::{Kind, Machine};
use cms_store::{Key, Store};

use super::NodeRef;
use crate::error::TenancyError;

/// The node of `machine` in `tenant`, from its `spec.managementAddress`:
/// [`TenancyError::NotFound`] when there is no such machine (or tenant),
/// [`TenancyError::NotReady`] when it has no address yet.
pub fn machine_node(store: &dyn Store, tenant: &str, machine: &str) -> Result<NodeRef, TenancyError> {
    let key = Key::child(Kind::Machine, tenant, machine);
    let object = store.get(&key).ok_or_else(|| TenancyError::NotFound(key.to_string()))?;
    let parsed = object.parse::<Machine>().map_err(TenancyError::corrupt(&key))?;
    let address = parsed.spec.management_address.filter(|address| !address.trim().is_empty());
    let management_address =
        address.ok_or_else(|| TenancyError::NotReady(format!("{key} has no management address yet")))?;
    Ok(NodeRef { tenant: tenant.to_string(), machine: machine.to_string(), management_address })
}
